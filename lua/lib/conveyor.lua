-- lib/conveyor.lua: conveyor keys (docs/conveyor.md). A conveyor key
-- stores score = position - offset; the offset is a number in the key's
-- offset key (none: 0). The proxy sends a command on such a key as
--   KEYS  each key of the command, then its offset key: KEYS[2k-1], KEYS[2k]
--   ARGV  the client's RESP version ('2' or '3', followed by 'n' where the
--         proxy will put a nil array for conveyor_nil_array); a mask with '1' for each
--         key that is a conveyor key; then the command as the client sent
--         it, its name first.
-- Positions are doubles: position = stored + offset, as Redis adds (the
-- rounding of a double sum). Needs lib/err.lua before it.

local conveyor_resp3 = string.sub(ARGV[1], 1, 1) == '3'
-- ('n' after it: the proxy turns the nil-array marker into a nil array)
local conveyor_nil_array_ok = string.sub(ARGV[1], 2, 2) == 'n'
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

-- The offset key is a hash: `offset` (the number, as %.17g prints it),
-- and once the line was first folded (its offset put into its stored
-- scores: a rebase) `rebased` (server time in ms of the last one) and
-- `rebases` (how many). Its time to live is the line's.

-- The offset an offset key holds: 0 when there is none, nil when it holds
-- something else than a finite number (refused, not guessed).
local function conveyor_read_offset(okey)
  local text = redis.pcall('HGET', okey, 'offset')
  if type(text) == 'table' then
    return nil -- not a hash
  end
  if not text then
    return 0
  end
  local offset = tonumber(text)
  if offset == nil or offset ~= offset or offset == math.huge or offset == -math.huge then
    return nil
  end
  return offset
end

-- The offset of the command's k-th key: 0 for a plain key.
local function conveyor_offset(k)
  if not conveyor_is(k) then
    return 0
  end
  return conveyor_read_offset(KEYS[2 * k])
end

local function conveyor_bad_offset(k)
  return err("ERR verbproxy: the offset key '" .. KEYS[2 * k] .. "' of conveyor key '" .. KEYS[2 * k - 1]
    .. "' holds no offset")
end

-- After a write that may have emptied the k-th key: a sorted set emptied
-- is gone, and its offset with it. Whether the key is gone.
local function conveyor_drop_if_gone(k)
  if redis.call('EXISTS', KEYS[2 * k - 1]) == 0 then
    redis.call('DEL', KEYS[2 * k])
    return true
  end
  return false
end
