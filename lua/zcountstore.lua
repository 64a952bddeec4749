#!lua
-- ZUNIONSTORE / ZINTERSTORE destination numkeys key [key ...]
--   [WEIGHTS weight ...] [AGGREGATE SUM|MIN|MAX|COUNT]
-- with AGGREGATE COUNT, on a Redis that lacks it (it came with 8.8): the
-- proxy's polyfill, run where the upstream lacks COUNT; never a verb.
--
-- KEYS      destination, then the sources (numkeys of them)
-- ARGV      the command as the client sent it: ZUNIONSTORE or ZINTERSTORE
--           (any case), destination, numkeys, the sources, the options
--
-- Stores the result as Redis 8.8 does: destination replaced whatever its
-- type, or deleted when the result is empty. Reply: the number of members
-- stored. AGGREGATE COUNT: see lua/zcount.lua. Errors in Redis's order and
-- texts, before anything is written. When the last AGGREGATE is not COUNT,
-- Redis's own command runs with the options that win (computed here the
-- same way when its sources are too many for one redis.call).

--#include lib/err.lua
--#include lib/int.lua
--#include lib/float.lua
--#include lib/order.lua
--#include lib/zset.lua
--#include lib/zaggregate.lua
--#include lib/zcommand.lua

local command = string.lower(ARGV[1] or '')
if (command ~= 'zunionstore' and command ~= 'zinterstore') or #ARGV < 4 or #KEYS < 2 then
  return err("ERR wrong number of arguments for 'zunionstore' command")
end
local dest = KEYS[1]
local sources = {}
for k = 2, #KEYS do
  sources[k - 1] = KEYS[k]
end
local read, failure = zcommand_read(command, ARGV, 3, sources, true)
if not read then
  return failure
end
local native = read.aggregate ~= 'count' and zcommand_native(command, dest, sources, read)
if native and #native <= MEMBERS_PER_CALL then
  return redis.call(unpack(native))
end
-- COUNT, or more sources than one redis.call carries: computed here.
return zaggregate_store(dest, zaggregate_compute(command == 'zinterstore', sources, read.weights, read.aggregate))
