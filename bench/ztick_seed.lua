-- bench/ztick_seed.lua - the obvious ZTICK, which bench/verbs.sh measures
-- lua/ztick.lua against: read the whole set, then one ZADD (new score) or
-- one ZREM (new score >= threshold) per member. Not part of the product.
--
-- Same KEYS/ARGV layout as lua/ztick.lua, so one call line serves both:
--   KEYS[1] = the sorted set
--   ARGV    = max-members (ignored here), delta, threshold
-- Reply: the members removed, in ascending order of new score (ZRANGE's
-- order, which adding one delta to every score keeps).
local key = KEYS[1]
local delta = tonumber(ARGV[2])
local threshold = tonumber(ARGV[3])

local all = redis.call('ZRANGE', key, 0, -1, 'WITHSCORES')
local removed = {}
for i = 1, #all, 2 do
    local member = all[i]
    local score = tonumber(all[i + 1]) + delta
    if score >= threshold then
        redis.call('ZREM', key, member)
        removed[#removed + 1] = member
    else
        redis.call('ZADD', key, score, member)
    end
end
return removed
