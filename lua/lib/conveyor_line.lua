-- lib/conveyor_line.lua: lib/zline.lua's write hooks on conveyor keys,
-- for a verb (QPOP, QRECLAIM, QEXTEND, ZWINDOW, ZPAGE, ZSNAPSHOT) whose
-- keys may be conveyor keys: a score written is a position, stored as
-- position - offset (docs/conveyor.md); lib/conveyor_scores.lua has the
-- hooks that read. Needs lib/conveyor.lua and lib/conveyor_ttl.lua before
-- it. KEYS and ARGV come as lib/conveyor.lua says; at its end the verb's
-- own KEYS and ARGV replace them, for the verb's body that follows.

-- A key that does not exist starts at offset 0: its stale offset key goes.
local function zline_stored(k, score)
  if not conveyor_is(k) then
    return score
  end
  if conveyor_drop_if_gone(k) then
    return score
  end
  local offset = (conveyor_offset(k) or 0)
  if offset == 0 then
    return score
  end
  return score - offset
end

local function zline_emptied(k)
  if conveyor_is(k) then
    conveyor_drop_if_gone(k)
  end
end

local function zline_expired(k)
  if conveyor_is(k) then
    conveyor_follow_ttl(k)
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
