#!lua
-- ZTICK key delta threshold [WITHSCORES]
--
-- KEYS[1]  the sorted set
-- ARGV[1]  ztick-max-members, hidden, set by the proxy (0 = no limit)
-- ARGV[2]  delta, a float (may be negative, may be inf)
-- ARGV[3]  threshold, a float
-- ARGV[4]  WITHSCORES (any case), optional
--
-- Adds delta to every score. Members whose new score is >= threshold are
-- removed. Reply: the removed members in ascending order of new score (ties
-- in member order, as ZRANGE), each followed by its new score with
-- WITHSCORES. Missing key: empty array. Nothing is written when an argument
-- is refused, when the set is larger than ztick-max-members, or when a new
-- score would be NaN (inf + -inf). On a conveyor key the proxy runs
-- conveyor_tick.lua instead.

--#include lib/err.lua
--#include lib/int.lua
--#include lib/count.lua
--#include lib/float.lua
--#include lib/order.lua
--#include lib/zrescore.lua
--#include lib/ztick.lua

if #KEYS ~= 1 or #ARGV < 3 then
  return err("ERR wrong number of arguments for 'ztick' command")
end
local key = KEYS[1]
local max_members, failure = parse_count(ARGV[1])
if max_members == nil then
  return failure
end
local delta, threshold, withscores = ztick_args(ARGV, 2)
if delta == nil then
  return threshold -- the error
end
local kind = redis.call('TYPE', key).ok
if kind ~= 'zset' and kind ~= 'none' then
  return err('WRONGTYPE Operation against a key holding the wrong kind of value')
end

local card = redis.call('ZCARD', key)
if card == 0 then
  return {}
end
if max_members > 0 and card > max_members then
  return err(string.format(
    'ERR ZTICK refused: the sorted set has %d members, over ztick-max-members (%s)',
    card, ARGV[1]))
end

-- The old score of the member at a 0-based rank. ZRANGE replies scores as
-- %.17g strings, so tonumber gives back the stored double exactly.
local function score_at(rank)
  return tonumber(redis.call('ZRANGE', key, rank, rank, 'WITHSCORES')[2])
end
-- Only inf + -inf is NaN, and the infinities sit at the ends of the set.
if (delta == math.huge and score_at(0) == -math.huge)
    or (delta == -math.huge and score_at(card - 1) == math.huge) then
  return err('ERR resulting score is not a number (NaN)')
end
-- Adding the same delta to every score keeps them in order (rounding is
-- monotonic: it can make two scores equal, never swap them), so the
-- members that reach the threshold are the highest ranks: find the
-- first of them by bisection (card when none reach it).
local first_removed = card
if score_at(card - 1) + delta >= threshold then
  local low, high = 0, card - 1
  while low < high do
    local mid = math.floor((low + high) / 2)
    if score_at(mid) + delta >= threshold then
      high = mid
    else
      low = mid + 1
    end
  end
  first_removed = low
end
local reply = {}
if first_removed < card then
  reply = ztick_reply(redis.call('ZRANGE', key, first_removed, -1, 'WITHSCORES'), delta, withscores)
  redis.call('ZREMRANGEBYRANK', key, first_removed, -1)
end
zrescore_first(key, delta, first_removed)
return reply
