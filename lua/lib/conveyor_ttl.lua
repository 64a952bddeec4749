-- lib/conveyor_ttl.lua: an offset key's time to live follows its key's.
-- Needs lib/conveyor.lua before it.

-- The k-th key's time to live, given to its offset key too (or the
-- offset key deleted with a key that is gone).
local function conveyor_follow_ttl(k)
  local okey = KEYS[2 * k]
  if redis.call('EXISTS', okey) == 0 then
    return
  end
  local ttl = redis.call('PTTL', KEYS[2 * k - 1])
  if ttl == -2 then
    redis.call('DEL', okey)
  elseif ttl == -1 then
    redis.call('PERSIST', okey)
  else
    redis.call('PEXPIRE', okey, ttl)
  end
end
