#!lua
-- The writes on a conveyor key (docs/conveyor.md): ZADD (every flag,
-- INCR), ZINCRBY, ZREMRANGEBYSCORE, ZPOPMIN, ZPOPMAX, ZMPOP, and one
-- attempt of BZPOPMIN, BZPOPMAX, BZMPOP. KEYS and ARGV as
-- lib/conveyor.lua says. A score written is a position, stored as position
-- - offset; an increment adds to the position and to the stored score
-- alike (a new member starts at the increment, a position). A key that does not exist starts with offset 0 (a stale offset
-- key is dropped), so its stored scores are its positions. Anything Redis
-- refuses goes to Redis as it is, for its own error, before anything is
-- written.

-- The common write first, before any helper below is made (making them
-- costs Redis more than this whole path): ZADD of up to 64 score-member
-- pairs, no flag, each score a plain decimal of up to 17 characters (what
-- Lua's tonumber and Redis's strtod read alike), on a sorted set with a
-- finite offset not 0. Anything else falls through to the general path
-- below, which does the same for these.
if #ARGV >= 6 and #ARGV <= 132 and #ARGV % 2 == 0 and ARGV[2] == '1' and string.lower(ARGV[3]) == 'zadd' then
  local scores = {}
  for j = 5, #ARGV, 2 do
    local text = ARGV[j]
    if #text > 17 or not string.find(text, '^%-?%d+%.?%d*$') then
      scores = nil
      break
    end
    scores[#scores + 1] = tonumber(text)
  end
  local text = scores and redis.pcall('HGET', KEYS[2], 'offset')
  local offset = type(text) == 'string' and tonumber(text)
  if offset and offset ~= 0 and offset - offset == 0 and redis.call('TYPE', KEYS[1]).ok == 'zset' then
    local args = { 'ZADD', KEYS[1] }
    for p = 1, #scores do
      args[2 * p + 1] = scores[p] - offset
      args[2 * p + 2] = ARGV[4 + 2 * p]
    end
    return redis.call(unpack(args))
  end
end

--#include lib/err.lua
--#include lib/float.lua
--#include lib/order.lua
--#include lib/conveyor.lua
--#include lib/conveyor_command.lua
--#include lib/conveyor_bound.lua
--#include lib/conveyor_range.lua

-- ZADD members per call: unpack() puts every value on Lua's C stack
-- (LUAI_MAXCSTACK is 8000 slots).
local PAIRS_PER_CALL = 1500

local blocking = conveyor_name == 'bzpopmin' or conveyor_name == 'bzpopmax' or conveyor_name == 'bzmpop'

-- One try of a blocking pop, which Redis does not run in a script: its
-- timeout checked as Redis checks it first (its value is the proxy's to
-- keep), then ZMPOP for BZMPOP, or the first key that is not empty popped
-- (WRONGTYPE at a key of another type before it). Redis's reply, or false.
local function blocking_pop()
  if conveyor_name == 'bzmpop' and redis.REDIS_VERSION_NUM == nil then
    return conveyor_unknown_command() -- (Redis 6.2 has no BZMPOP)
  end
  local at = conveyor_name == 'bzmpop' and 1 or conveyor_argc - 1
  local text = carg(at)
  local timeout = nil
  if not string.find(text, '^%s') and not string.find(text, '%s$') then
    timeout = tonumber(text)
  end
  if timeout == nil or timeout ~= timeout then
    return err('ERR timeout is not a float or out of range')
  elseif timeout < 0 then
    return err('ERR timeout is negative')
  elseif timeout > 1e13 then
    return err('ERR timeout is out of range')
  end
  if conveyor_name == 'bzmpop' then
    local args = { 'ZMPOP' }
    for i = 2, conveyor_argc - 1 do
      args[#args + 1] = carg(i)
    end
    return conveyor_client_error(redis.pcall(unpack(args)))
  end
  local pop = conveyor_name == 'bzpopmin' and 'ZPOPMIN' or 'ZPOPMAX'
  for k = 1, #KEYS / 2 do
    local kind = redis.call('TYPE', KEYS[2 * k - 1]).ok
    if kind == 'zset' then
      local r = redis.call(pop, KEYS[2 * k - 1])
      return { KEYS[2 * k - 1], r[1], r[2] }
    elseif kind ~= 'none' then
      return err('WRONGTYPE Operation against a key holding the wrong kind of value')
    end
  end
  return false
end
if conveyor_name == 'zmpop' or blocking then
  -- Pops from the first key that is not empty: that key's offset counts.
  -- (In a script the blocking pops never block: with nothing to pop they
  -- reply as at their timeout, and the proxy waits and asks again.)
  local r
  if blocking then
    r = blocking_pop()
  else
    r = conveyor_call_as_sent()
  end
  if r == false then
    if blocking and conveyor_nil_array_ok then
      return { ok = 'VERBPROXY-WAIT' } -- (outside MULTI: the proxy waits)
    end
    return conveyor_nil_array()
  end
  if type(r) ~= 'table' or r.err then
    return r
  end
  for k = 1, #KEYS / 2 do
    if KEYS[2 * k - 1] == r[1] then
      local offset = conveyor_offset(k)
      if offset == nil then
        return conveyor_bad_offset(k)
      end
      if conveyor_name == 'bzpopmin' or conveyor_name == 'bzpopmax' then
        r[3] = conveyor_position(r[3], offset) -- [key, member, score]
      else
        for i = 1, #r[2] do
          r[2][i][2] = conveyor_position(r[2][i][2], offset)
        end
      end
      conveyor_drop_if_gone(k)
      break
    end
  end
  return r
end

local key = KEYS[1]
local kind = redis.call('TYPE', key).ok
if kind ~= 'zset' then
  if kind == 'none' then
    redis.call('DEL', KEYS[2]) -- a stale offset: the new line starts at 0
  end
  return conveyor_as_is()
end
local offset = conveyor_offset(1)
if offset == nil then
  return conveyor_bad_offset(1)
end
if offset == 0 then
  return conveyor_as_is()
end

local name = conveyor_name
if name == 'zadd' then
  -- zaddGenericCommand's reading: flags, then score-member pairs.
  local flags, incr = {}, false
  local i = 2
  while i < conveyor_argc do
    local option = string.lower(carg(i))
    if option == 'nx' or option == 'xx' or option == 'gt' or option == 'lt' or option == 'ch' then
      flags[#flags + 1] = carg(i)
    elseif option == 'incr' then
      flags[#flags + 1] = carg(i)
      incr = true
    else
      break
    end
    i = i + 1
  end
  local elements = conveyor_argc - i
  if elements == 0 or elements % 2 ~= 0 or (incr and elements > 2) then
    return conveyor_as_is()
  end
  local scores = {}
  for j = i, conveyor_argc - 1, 2 do
    local score = parse_float(carg(j))
    if score == nil then
      return conveyor_as_is()
    end
    scores[#scores + 1] = incr and score or score - offset
  end
  if incr and not redis.call('ZSCORE', key, carg(i + 1)) then
    -- A new member starts at the increment: a position.
    scores[1] = scores[1] - offset
  end
  -- (Incompatible flags are refused by Redis below, before any write.)
  local total, n = 0, 0
  local args = { 'ZADD', key }
  for f = 1, #flags do
    args[#args + 1] = flags[f]
  end
  local head = #args
  local used = head
  for p = 1, #scores do
    args[used + 1] = scores[p]
    args[used + 2] = carg(i + 2 * p - 1)
    used = used + 2
    n = n + 1
    if n == PAIRS_PER_CALL or p == #scores then
      local r = redis.pcall(unpack(args, 1, used))
      if type(r) == 'table' and r.err then
        return r
      end
      if incr then
        return r and conveyor_position(r, offset)
      end
      total = total + r
      used, n = head, 0
    end
  end
  return total
elseif name == 'zincrby' then
  if conveyor_argc ~= 4 or parse_float(carg(2)) == nil then
    return conveyor_as_is()
  end
  -- An existing member moves by the increment; a new one starts at it,
  -- a position.
  local by = carg(2)
  if not redis.call('ZSCORE', key, carg(3)) then
    by = parse_float(by) - offset
  end
  local r = redis.pcall('ZINCRBY', key, by, carg(3))
  if type(r) == 'table' and r.err then
    return r
  end
  return conveyor_position(r, offset)
elseif name == 'zremrangebyscore' then
  local min, min_ex = conveyor_parse_bound(carg(2))
  local max, max_ex = conveyor_parse_bound(carg(3))
  if conveyor_argc ~= 4 or min == nil or max == nil then
    return conveyor_as_is()
  end
  local removed = redis.call('ZREMRANGEBYSCORE', key, conveyor_bound(key, min, min_ex, true, offset),
    (conveyor_bound(key, max, max_ex, false, offset))) -- (the bound alone)
  conveyor_drop_if_gone(1)
  return removed
elseif name == 'zpopmin' or name == 'zpopmax' then
  local r = conveyor_call_as_sent()
  if type(r) ~= 'table' or r.err then
    return r
  end
  conveyor_drop_if_gone(1)
  if conveyor_argc == 2 then
    -- One member without COUNT: [member, score] in both protocols.
    if #r == 0 then
      return r
    end
    return { r[1], conveyor_position(r[2], offset) }
  end
  return conveyor_scored_reply(r, offset)
end
return err("ERR verbproxy: '" .. name .. "' is not a write of a conveyor key")
