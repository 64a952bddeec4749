-- lib/conveyor.lua: conveyor keys (docs/conveyor.md). A conveyor key
-- stores score = position - offset; the offset is a number in the key's
-- offset key (none: 0). The proxy sends a command on such a key as
--   KEYS  each key of the command, then its offset key: KEYS[2k-1], KEYS[2k]
--   ARGV  the client's RESP version ('2' or '3'); a mask with '1' for each
--         key that is a conveyor key; then the command as the client sent
--         it, its name first.
-- Positions are doubles: position = stored + offset, as Redis adds (the
-- rounding of a double sum). Needs lib/err.lua and lib/order.lua before it.

local conveyor_resp3 = ARGV[1] == '3'
local conveyor_mask = ARGV[2]
local conveyor_name = string.lower(ARGV[3])

-- The command's argument i (0: its name), and how many there are with the
-- name.
local function carg(i)
  return ARGV[i + 3]
end
local conveyor_argc = #ARGV - 2

local function conveyor_is(k)
  return string.sub(conveyor_mask, k, k) == '1'
end

-- The offset of the command's k-th key: 0 for a plain key, or one with no
-- offset key. An offset key that holds no number is refused, not guessed.
local function conveyor_offset(k)
  if not conveyor_is(k) then
    return 0
  end
  local text = redis.call('GET', KEYS[2 * k])
  if not text then
    return 0
  end
  local offset = tonumber(text)
  if offset == nil or offset ~= offset then
    return nil
  end
  return offset
end

local function conveyor_bad_offset(k)
  return err("ERR verbproxy: the offset key '" .. KEYS[2 * k] .. "' of conveyor key '" .. KEYS[2 * k - 1]
    .. "' holds no number")
end

-- Sets the offset of the k-th key (a conveyor key that exists): kept with
-- the key's time to live. 0 deletes the offset key.
local function conveyor_set_offset(k, offset)
  local key, okey = KEYS[2 * k - 1], KEYS[2 * k]
  if offset == 0 then
    redis.call('DEL', okey)
    return
  end
  local text = format_score(offset)
  if redis.call('EXISTS', okey) == 1 then
    redis.call('SET', okey, text, 'KEEPTTL')
    return
  end
  redis.call('SET', okey, text)
  local ttl = redis.call('PTTL', key)
  if ttl > 0 then
    redis.call('PEXPIRE', okey, ttl)
  end
end

-- A score in a reply, formatted by Redis as its own commands format
-- scores (a RESP3 double; a bulk string in RESP2).
local function conveyor_score(x)
  return { double = x }
end

-- The command as the client sent it, run as it is: for what needs no
-- translation (a key of another type, a missing key) and for arguments
-- Redis refuses, which it refuses with its own error.
local function conveyor_as_is()
  return redis.pcall(unpack(ARGV, 3))
end

-- The key's type is a sorted set (else the command goes as it is: Redis
-- answers an empty reply for no key, WRONGTYPE for another type).
local function conveyor_zset(key)
  return redis.call('TYPE', key).ok == 'zset'
end
