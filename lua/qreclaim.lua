#!lua
-- QRECLAIM leasekey key score|NOW [COUNT n]
--
-- KEYS[1]  the lease set (a sorted set of member -> deadline in ms)
-- KEYS[2]  the queue the members go back to
-- ARGV[1]  the score they get in the queue, a float, or NOW (server time
--          in ms, any case)
-- ARGV     then options: COUNT n (keyword in any case, last one wins)
--
-- Moves members whose deadline has passed (deadline <= server time), oldest
-- deadline first, at most COUNT of them, from the lease set back into the
-- queue. Reply: the members moved, in that order.

--#include lib/err.lua
--#include lib/int.lua
--#include lib/float.lua
--#include lib/time.lua
--#include lib/zset.lua
--#include lib/zline.lua
--#include lib/qreclaim.lua
