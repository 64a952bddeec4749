-- lib/qpop.lua: the body of QPOP (lua/qpop.lua, lua/conveyor_qpop.lua), its
-- scores through lib/zline.lua's hooks.

local WRONG_ARGS = "ERR wrong number of arguments for 'qpop' command"
if #KEYS < 1 or #KEYS > 2 then
  return err(WRONG_ARGS)
end

local count       -- nil without COUNT
local count_arg   -- COUNT's digits, passed on verbatim (exact for any int64)
local max_score   -- nil without MAXSCORE
local max_is_now = false
local lease_ms    -- nil without LEASE
local i = 1
while i <= #ARGV do
  local option = string.lower(ARGV[i])
  if option == 'count' and i + 1 <= #ARGV then
    local failure
    count, failure = parse_count(ARGV[i + 1])
    if count == nil then
      return failure
    end
    count_arg = ARGV[i + 1]
    i = i + 2
  elseif option == 'maxscore' and i + 1 <= #ARGV then
    if string.lower(ARGV[i + 1]) == 'now' then
      max_is_now, max_score = true, nil
    else
      max_is_now, max_score = false, parse_float(ARGV[i + 1])
      if max_score == nil then
        return err('ERR value is not a valid float')
      end
    end
    i = i + 2
  elseif option == 'lease' and i + 2 <= #ARGV then
    lease_ms = parse_int(ARGV[i + 2])
    if lease_ms == nil then
      return err('ERR value is not an integer or out of range')
    end
    if lease_ms <= 0 then
      return err("ERR invalid expire time in 'qpop' command")
    end
    i = i + 3
  else
    return err('ERR syntax error')
  end
end
-- The lease key is declared in KEYS exactly when LEASE is given.
if #KEYS ~= (lease_ms and 2 or 1) then
  return err(WRONG_ARGS)
end

local key, lease_key = KEYS[1], KEYS[2]
if not zset_or_none(key) or (lease_key and not zset_or_none(lease_key)) then
  return err('WRONGTYPE Operation against a key holding the wrong kind of value')
end

if count == 0 then
  return {}
end
local now
if max_is_now or lease_ms then
  now = now_ms()
end
if max_is_now then
  max_score = now
end

-- BYSCORE with LIMIT takes the count as given, so COUNT needs no arithmetic
-- (a rank range would need count - 1, inexact beyond 2^53).
-- (The scores as replied are read before the removal, which may take the
-- offset with the last member.)
local range = zline_scores(1, redis.call('ZRANGE', key, '-inf', zline_bound(1, max_score or '+inf', false),
  'BYSCORE', 'LIMIT', 0, count_arg or 1, 'WITHSCORES'))
if #range == 0 then
  if count == nil then
    return false
  end
  return {}
end

local members = {}
for k = 1, #range, 2 do
  members[#members + 1] = range[k]
end
call_chunked('ZREM', key, nil, members)
zline_emptied(1)
if lease_ms then
  call_chunked('ZADD', lease_key, zline_stored(2, now + lease_ms), members)
end
return range
