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

-- Whether Lua's '<' on strings (strcoll, the server's LC_COLLATE) puts
-- these probes in byte order, as it does in the C, POSIX and C.UTF-8
-- locales Redis usually runs in (a locale such as en_US sorts letters
-- without case first, and skips punctuation). Then table.sort may use '<',
-- many times faster than bytes_less.
local function collation_is_bytes()
  local probes = { '\0', ' ', '-', '0', 'A', 'B', 'Z', '_', 'a', 'b', 'z', '\127', '\128', '\195\169', '\255' }
  for i = 2, #probes do
    if not (probes[i - 1] < probes[i]) then
      return false
    end
  end
  return 'a' < 'a\0' and 'a\0z' < 'ab' and '-b' < 'a' and 'a b' < 'ab' and 'ab' < 'a\255' and 'B' < 'a'
end
