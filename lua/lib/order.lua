-- lib/order.lua: how Redis orders and prints sorted-set members.

-- A score as Redis 7.0 replies it (%.17g, infinities as inf and -inf):
-- exact for every double. (Lua's tostring and '..' print %.14g, which is
-- not.)
local function format_score(x)
  if x == math.huge then
    return 'inf'
  elseif x == -math.huge then
    return '-inf'
  end
  return string.format('%.17g', x)
end

-- Byte order (memcmp), which is how Redis orders members with equal scores.
-- Lua's '<' on strings uses strcoll, which follows the server's locale.
local function bytes_less(a, b)
  for i = 1, math.min(#a, #b) do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then
      return x < y
    end
  end
  return #a < #b
end
