#!lua
-- ZWINDOW on conveyor keys (docs/conveyor.md): the verb's own body
-- (lib/zwindow.lua), its scores positions (lib/conveyor_line.lua). KEYS and
-- ARGV as lib/conveyor.lua says.

--#include lib/err.lua
--#include lib/int.lua
--#include lib/count.lua
--#include lib/time.lua
--#include lib/order.lua
--#include lib/dformat.lua
--#include lib/conveyor.lua
--#include lib/conveyor_bound.lua
--#include lib/conveyor_scores.lua
--#include lib/conveyor_ttl.lua
--#include lib/conveyor_line.lua
--#include lib/zwindow.lua
