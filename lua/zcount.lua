#!lua flags=no-writes
-- ZUNION / ZINTER numkeys key [key ...] [WEIGHTS weight ...]
--   [AGGREGATE SUM|MIN|MAX|COUNT] [WITHSCORES]
-- with AGGREGATE COUNT, on a Redis that lacks it (it came with 8.8): the
-- proxy's polyfill, run where the upstream lacks COUNT; never a verb.
--
-- KEYS      the sources, numkeys of them
-- ARGV[1]   the client's RESP version, 2 or 3, hidden, set by the proxy
--           (RESP3 nests WITHSCORES pairs)
-- ARGV[2..] the command as the client sent it: ZUNION or ZINTER (any
--           case), numkeys, the sources, the options
--
-- Reply: exactly Redis 8.8's. AGGREGATE COUNT makes each member's score the
-- sum of the weights of the sources that hold it (1 each without WEIGHTS),
-- whatever its score there; sets count like sorted sets, a missing key is
-- empty, a key given twice counts twice. Members come in score order, ties
-- in byte order; scores are printed by this server, as its own ZUNION
-- prints them. Errors in Redis's order and texts: numkeys, then WRONGTYPE,
-- then the options. When the last AGGREGATE is not COUNT, Redis's own
-- command runs with the options that win (computed here the same way when
-- its sources are too many for one redis.call).

--#include lib/err.lua
--#include lib/int.lua
--#include lib/float.lua
--#include lib/order.lua
--#include lib/zset.lua
--#include lib/zaggregate.lua
--#include lib/zcommand.lua

local command = string.lower(ARGV[2] or '')
if (command ~= 'zunion' and command ~= 'zinter') or #ARGV < 4 then
  return err("ERR wrong number of arguments for 'zunion' command")
end
local resp3 = ARGV[1] == '3'
local read, failure = zcommand_read(command, ARGV, 3, KEYS, false)
if not read then
  return failure
end
local native = read.aggregate ~= 'count' and zcommand_native(command, nil, KEYS, read)
if native and #native <= MEMBERS_PER_CALL then
  if resp3 then
    redis.setresp(3) -- the reply comes back as RESP3 and goes on as such
  end
  return redis.call(unpack(native))
end

-- COUNT, or more sources than one redis.call carries: computed here.
local scores, members = zaggregate_compute(command == 'zinter', KEYS, read.weights, read.aggregate)

return zaggregate_reply(scores, members, read.withscores, resp3)
