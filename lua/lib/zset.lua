-- lib/zset.lua: sorted-set keys.

-- unpack() puts every value on Lua's C stack (LUAI_MAXCSTACK is 8000
-- slots), so one call carries at most this many members.
local MEMBERS_PER_CALL = 3000

-- A sorted set, or no key at all (what a sorted-set command accepts).
local function zset_or_none(key)
  local kind = redis.call('TYPE', key).ok
  return kind == 'zset' or kind == 'none'
end

-- Calls `command key` followed by items[1..n], each item preceded by
-- `score` when one is given, in calls small enough for unpack().
local function call_chunked(command, key, score, items)
  local args, used, total = { command, key }, 2, 0
  local per_call = score and MEMBERS_PER_CALL / 2 or MEMBERS_PER_CALL
  for i = 1, #items do
    if score then
      used = used + 1
      args[used] = score
    end
    used = used + 1
    args[used] = items[i]
    if i % per_call == 0 or i == #items then
      total = total + redis.call(unpack(args, 1, used))
      used = 2
    end
  end
  return total
end
