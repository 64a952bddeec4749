-- lib/qreclaim.lua: the body of QRECLAIM (lua/qreclaim.lua, lua/conveyor_qreclaim.lua), its
-- scores through lib/zline.lua's hooks.

if #KEYS ~= 2 or #ARGV < 1 then
  return err("ERR wrong number of arguments for 'qreclaim' command")
end
local lease_key, key = KEYS[1], KEYS[2]

local score_is_now = string.lower(ARGV[1]) == 'now'
local score
if not score_is_now then
  score = parse_float(ARGV[1])
  if score == nil then
    return err('ERR value is not a valid float')
  end
end

local count       -- nil without COUNT: every expired lease
local count_arg   -- COUNT's digits, passed on verbatim (exact for any int64)
local i = 2
while i <= #ARGV do
  if string.lower(ARGV[i]) == 'count' and i + 1 <= #ARGV then
    local failure
    count, failure = parse_count(ARGV[i + 1])
    if count == nil then
      return failure
    end
    count_arg = ARGV[i + 1]
    i = i + 2
  else
    return err('ERR syntax error')
  end
end

if not zset_or_none(lease_key) or not zset_or_none(key) then
  return err('WRONGTYPE Operation against a key holding the wrong kind of value')
end
if count == 0 then
  return {}
end

local now = now_ms()
if score_is_now then
  score = now
end
local expired
if count_arg then
  expired = redis.call('ZRANGE', lease_key, '-inf', zline_bound(1, now, false), 'BYSCORE', 'LIMIT', 0, count_arg)
else
  expired = redis.call('ZRANGE', lease_key, '-inf', zline_bound(1, now, false), 'BYSCORE')
end

-- Out of the lease set first, then into the queue: if both names are the
-- same key, the members end up there with the new score.
for first = 1, #expired, MEMBERS_PER_CALL do
  local last = math.min(first + MEMBERS_PER_CALL - 1, #expired)
  redis.call('ZREM', lease_key, unpack(expired, first, last))
  zline_emptied(1)
  local stored = zline_stored(2, score)
  local args, used = { 'ZADD', key }, 2
  for k = first, last do
    args[used + 1] = stored -- a Lua number: Redis formats it with %.17g, exactly
    args[used + 2] = expired[k]
    used = used + 2
  end
  redis.call(unpack(args, 1, used))
end
return expired
