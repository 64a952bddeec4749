-- lib/int.lua: Redis's string2ll: optional '-', no '+', no leading zeros
-- ('0' itself is fine), no spaces, within int64. Lua numbers are doubles,
-- so the range is checked on the digits. Returns the value (exact below
-- 2^53) or nil.
local function parse_int(s)
  if s == '0' then
    return 0
  end
  local sign, digits = string.match(s, '^(%-?)([1-9]%d*)$')
  if digits == nil or #digits > 19 then
    return nil
  end
  if #digits == 19 then
    local limit = (sign == '-') and '9223372036854775808' or '9223372036854775807'
    if digits > limit then
      return nil
    end
  end
  return tonumber(s)
end
