#!lua flags=no-writes
-- The read-only commands on a conveyor key (docs/conveyor.md): ZSCORE,
-- ZMSCORE, ZRANK and ZREVRANK WITHSCORE, ZRANGE (BYSCORE, WITHSCORES),
-- ZREVRANGE WITHSCORES, ZRANGEBYSCORE, ZREVRANGEBYSCORE, ZCOUNT,
-- ZRANDMEMBER WITHSCORES, ZDIFF, ZSCAN. KEYS and ARGV as lib/conveyor.lua says. Scores
-- in replies are positions; score arguments are positions, turned into
-- stored-score bounds that select exactly the members whose positions
-- they select. Anything Redis refuses goes to Redis as it is, for its own
-- error.

-- A score range read the proxy also sent as the command itself, its bounds
-- written with the offset it expected (docs/conveyor.md, "How reads are
-- sent"), in a transaction before this call. ARGV then starts with 'expect'
-- and that offset's text (or 'expect-none' and ''): when the offset key
-- still holds it, the command's own reply stands and this one is false, at
-- the cost of one HGET (checked before any helper below is made); else this
-- reply is the client's, and the rest of ARGV is as lib/conveyor.lua says.
if ARGV[1] == 'expect' or ARGV[1] == 'expect-none' then
  local stored = redis.pcall('HGET', KEYS[2], 'offset')
  if stored == (ARGV[1] == 'expect' and ARGV[2]) then
    return false
  end
  table.remove(ARGV, 1)
  table.remove(ARGV, 1)
end

--#include lib/err.lua
--#include lib/float.lua
--#include lib/order.lua
--#include lib/conveyor.lua
--#include lib/conveyor_command.lua
--#include lib/conveyor_bound.lua
--#include lib/conveyor_range.lua
--#include lib/dformat.lua

local key = KEYS[1]
if conveyor_name == 'zdiff' then
  -- The members of the first source that no other holds, with its scores:
  -- only its offset counts.
  local offset = conveyor_offset(1)
  if offset == nil then
    return conveyor_bad_offset(1)
  end
  if offset == 0 then
    return conveyor_as_is()
  end
  local r = conveyor_call_as_sent()
  if type(r) ~= 'table' or r.err or string.lower(carg(conveyor_argc - 1)) ~= 'withscores' then
    return r
  end
  return conveyor_scored_reply(r, offset)
end
local offset = conveyor_offset(1)
if offset == nil then
  return conveyor_bad_offset(1)
end
if offset == 0 and conveyor_name ~= 'zmscore' then
  -- (no key, another type, or a line never ticked: Redis's own reply)
  local r = conveyor_as_is()
  if r == false and (conveyor_name == 'zrank' or conveyor_name == 'zrevrank') then
    return conveyor_nil_array() -- (WITHSCORE: the only form translated)
  end
  return r
end
-- An offset: the key is a sorted set, or gone (a stale offset: the
-- commands below reply nothing for no key) or of another type (they reply
-- WRONGTYPE, by pcall); a score range is checked first (conveyor_bound).

local name = conveyor_name
if name == 'zscore' then
  if conveyor_argc ~= 3 then
    return conveyor_as_is()
  end
  local score = redis.pcall('ZSCORE', key, carg(2))
  if type(score) == 'table' then
    return score -- WRONGTYPE
  end
  return score and conveyor_position(score, offset)
elseif name == 'zmscore' then
  local scores = redis.pcall(unpack(ARGV, 3)) -- (RESP2: a missing member is false, kept in place)
  if scores.err then
    return scores
  end
  for i = 1, #scores do
    if scores[i] then
      scores[i] = conveyor_position(scores[i], offset)
    end
  end
  return scores
elseif name == 'zrank' or name == 'zrevrank' then
  local r = conveyor_call_as_sent()
  if r == false then
    return conveyor_nil_array()
  end
  if type(r) ~= 'table' or r.err or #r ~= 2 then
    return r
  end
  return { r[1], conveyor_position(r[2], offset) }
elseif name == 'zrandmember' then
  local r = conveyor_call_as_sent()
  if type(r) ~= 'table' or r.err then
    return r
  end
  return conveyor_scored_reply(r, offset)
elseif name == 'zscan' then
  for i = 3, conveyor_argc - 1 do
    if string.lower(carg(i)) == 'noscores' then
      return conveyor_as_is() -- (Redis 8: members only)
    end
  end
  local r = conveyor_call_as_sent()
  if type(r) ~= 'table' or r.err then
    return r
  end
  -- The scores as the set's own strings would be, were they positions:
  -- a listpack's (d2string), or a skiplist's (%.17g).
  local items = r[2]
  local listpack = #items > 0 and redis.call('OBJECT', 'ENCODING', key) ~= 'skiplist'
  for i = 2, #items, 2 do
    local x = tonumber(items[i]) + offset
    items[i] = listpack and dformat_d2string(x) or format_score(x)
  end
  return r
elseif name == 'zcount' then
  if conveyor_argc ~= 4 then
    return conveyor_as_is()
  end
  local args = conveyor_zset(key) and conveyor_range_args(key, offset, 2, 3)
  if not args then
    return conveyor_as_is()
  end
  return redis.pcall(unpack(args))
elseif name == 'zrange' or name == 'zrevrange' or name == 'zrangebyscore' or name == 'zrevrangebyscore' then
  local byscore, withscores, min_at, max_at = conveyor_range_form(4)
  if byscore == nil then
    return conveyor_as_is()
  end
  local args = { unpack(ARGV, 3) }
  if byscore then
    args = conveyor_zset(key) and conveyor_range_args(key, offset, min_at, max_at)
    if not args then
      return conveyor_as_is()
    end
  end
  local r = redis.pcall(unpack(args))
  if r.err or not withscores then
    return r
  end
  return conveyor_scored_reply(r, offset)
end
return err("ERR verbproxy: '" .. name .. "' is not a read of a conveyor key")
