-- lib/zline.lua: the verbs' view of a sorted set's scores, on a plain key:
-- every hook leaves what it is given as it is. A verb's body (lib/qpop.lua
-- and the like) reads and writes scores through these hooks, so that the
-- same body runs on a conveyor key with lib/conveyor_line.lua's instead,
-- where scores are positions (docs/conveyor.md). k is the verb's k-th key.

-- A score range's end (a Lua number, or text such as '(1.5'), as the
-- bound to give Redis: lower (min) or upper (max).
local function zline_bound(k, bound, lower)
  return bound
end

-- A score as Redis printed it, as the verb replies it.
local function zline_score(k, text)
  return text
end

-- A flat WITHSCORES reply's scores, as the verb replies them (in place).
local function zline_scores(k, flat)
  return flat
end

-- The score a ZADD writes for a score the verb means.
local function zline_stored(k, score)
  return score
end

-- After a write that may have emptied the key, or made it anew.
local function zline_emptied(k)
end

-- After the key's time to live was set.
local function zline_expired(k)
end

-- Per source key, from the k-th on: what to add to its scores, or nil
-- when nothing (Redis's own commands then compute the verb's result).
local function zline_offsets(k)
  return nil
end
