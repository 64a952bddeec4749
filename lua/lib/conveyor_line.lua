-- lib/conveyor_line.lua: lib/zline.lua's write hooks on conveyor keys,
-- for a verb (QPOP, QRECLAIM, QEXTEND, ZWINDOW, ZPAGE, ZSNAPSHOT) whose
-- keys may be conveyor keys: a score written is a position, stored as
-- position - offset (docs/conveyor.md); lib/conveyor_scores.lua has the
-- hooks that read. Needs lib/conveyor.lua before it. KEYS and ARGV come
-- as lib/conveyor.lua says; at its end the verb's own KEYS and ARGV
-- replace them, for the verb's body that follows.

-- A key that does not exist starts at offset 0: its stale offset key goes.
local function zline_stored(k, score)
  if not conveyor_is(k) then
    return score
  end
  if redis.call('EXISTS', KEYS[2 * k - 1]) == 0 then
    redis.call('DEL', KEYS[2 * k])
    return score
  end
  local offset = (conveyor_offset(k) or 0)
  if offset == 0 then
    return score
  end
  return score - offset
end

local function zline_emptied(k)
  if conveyor_is(k) and redis.call('EXISTS', KEYS[2 * k - 1]) == 0 then
    redis.call('DEL', KEYS[2 * k])
  end
end

-- The offset key's time to live is its key's.
local function zline_expired(k)
  if conveyor_is(k) and redis.call('EXISTS', KEYS[2 * k]) == 1 then
    local ttl = redis.call('PTTL', KEYS[2 * k - 1])
    if ttl > 0 then
      redis.call('PEXPIRE', KEYS[2 * k], ttl)
    else
      redis.call('PERSIST', KEYS[2 * k])
    end
  end
end

local function zline_offsets(k)
  local offsets, any = {}, false
  for j = k, #KEYS / 2 do
    offsets[#offsets + 1] = (conveyor_offset(j) or 0)
    any = any or offsets[#offsets] ~= 0
  end
  return any and offsets or nil
end

-- An offset key holding no number: refused before the verb runs.
for k = 1, #KEYS / 2 do
  if conveyor_offset(k) == nil then
    return conveyor_bad_offset(k)
  end
end

-- The verb's own KEYS and ARGV: its keys in order, then its arguments
-- after its own keys (QRECLAIM has two; QPOP's lease key stays among its
-- options, as the verb gets it).
local conveyor_verb_keys = {}
for k = 1, #KEYS / 2 do
  conveyor_verb_keys[k] = KEYS[2 * k - 1]
end
local conveyor_verb_args = { unpack(ARGV, conveyor_name == 'qreclaim' and 6 or 5) }
local KEYS, ARGV = conveyor_verb_keys, conveyor_verb_args
