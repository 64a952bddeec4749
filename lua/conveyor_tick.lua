#!lua
-- ZTICK key delta threshold [WITHSCORES] on a conveyor key
-- (docs/conveyor.md): the offset moves by delta, and the members whose
-- position reaches the threshold are removed and returned, in
-- O(log N + exits). Replies as ztick.lua's exactly (the same helpers make
-- them). KEYS and ARGV as lib/conveyor.lua says: ARGV[3] is 'ZTICK',
-- ARGV[4] the key, then delta, threshold and WITHSCORES.
--
-- The offset is folded into the stored scores (a rebase: every member
-- rescored, O(N), the offset 0 and the rebase noted in the offset key)
-- when the new offset would not be finite (an infinite delta) or would
-- pass REBASE_AT in magnitude, where positions with fractions would lose
-- precision against it.

--#include lib/err.lua
--#include lib/float.lua
--#include lib/order.lua
--#include lib/zrescore.lua
--#include lib/ztick.lua
--#include lib/conveyor.lua
--#include lib/conveyor_command.lua
--#include lib/conveyor_bound.lua
--#include lib/conveyor_range.lua

local REBASE_AT = 2 ^ 32

local key = KEYS[1]
local delta, threshold, withscores = ztick_args(ARGV, 5)
if delta == nil then
  return threshold -- the error
end
local card = redis.pcall('ZCARD', key)
if type(card) == 'table' then
  return card -- WRONGTYPE, in Redis's words
end
if card == 0 then
  redis.call('DEL', KEYS[2])
  return {}
end
local offset = conveyor_offset(1)
if offset == nil then
  return conveyor_bad_offset(1)
end

local moved = offset + delta
if moved ~= moved or moved == math.huge or moved == -math.huge or math.abs(moved) > REBASE_AT then
  -- Fold the offset in, then tick as the seed does.
  if delta == math.huge or delta == -math.huge then
    -- (the seed's NaN check first: nothing is written if it refuses)
    local low = tonumber(redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')[2]) + offset
    local high = tonumber(redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')[2]) + offset
    if (delta == math.huge and low == -math.huge) or (delta == -math.huge and high == math.huge) then
      return err('ERR resulting score is not a number (NaN)')
    end
  end
  zrescore_first(key, offset, card)
  conveyor_note_rebase(1)
  offset, moved = 0, delta
  if math.abs(delta) > REBASE_AT then
    -- Too far to keep as an offset: every member moves, as the seed moves
    -- them, and the exits are then read as they lie (score, then member:
    -- the seed's order).
    zrescore_first(key, delta, card)
    moved = 0
  end
end

-- Each search of a large line's skiplist costs some microseconds in
-- cache misses (at 10M members, most of a tick's time): a tick with no
-- exit searches once (the bound's probe finds no member), one with exits
-- three times (probe, read, removal).
local first, none = conveyor_bound(key, threshold, false, true, moved)
local range = {}
if not none then
  range = redis.call('ZRANGE', key, first, '+inf', 'BYSCORE', 'WITHSCORES')
end
local reply = {}
if #range > 0 then
  reply = ztick_reply(range, moved, withscores)
  redis.call('ZREMRANGEBYSCORE', key, first, '+inf')
end

-- Does a member of the line left (not empty) have a finite score? Its
-- two ends answer without a search, but for a line from -inf to +inf.
local function line_moves()
  local low = tonumber(redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')[2])
  local high = tonumber(redis.call('ZRANGE', key, 0, 0, 'REV', 'WITHSCORES')[2])
  if low == math.huge or high == -math.huge then
    return false -- all at +inf, or all at -inf
  end
  if low ~= -math.huge or high ~= math.huge then
    return true
  end
  return redis.call('ZCOUNT', key, '(-inf', '(+inf') > 0
end

if #range / 2 < card then
  -- A tick that moves no member writes nothing, as the plain ZTICK (a
  -- WATCH sees no change): one of 0, or of a line all at -inf and +inf.
  if moved ~= offset and line_moves() then
    conveyor_set_offset(1, moved)
  end
else
  redis.call('DEL', KEYS[2]) -- the line is gone, and its offset with it
end
return reply
