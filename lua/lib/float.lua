-- lib/float.lua: Redis's getDoubleFromObject: glibc strtod over the whole
-- string (decimal, hex such as 0x1p3, inf/infinity in any case), refusing a
-- leading space, NaN, overflow to +-inf and underflow to 0. The shape is
-- checked here first because Lua's tonumber, the same strtod, also skips
-- spaces around the number and stops at a NUL byte. Returns the value or
-- nil.
local function parse_float(s)
  local body = string.match(s, '^[+-]?(.*)$')
  local word = string.lower(body)
  if word == 'inf' or word == 'infinity' then
    return (string.sub(s, 1, 1) == '-') and -math.huge or math.huge
  end
  local mantissa, exponent, nonzero, exponent_shape
  if string.find(body, '^0[xX]') then
    mantissa, exponent = string.match(body, '^0[xX]([%x.]*)(.*)$')
    nonzero, exponent_shape = '[1-9a-fA-F]', '^[pP][+-]?%d+$'
  else
    mantissa, exponent = string.match(body, '^([%d.]*)(.*)$')
    nonzero, exponent_shape = '[1-9]', '^[eE][+-]?%d+$'
  end
  if not string.find(mantissa, '%x') or string.find(mantissa, '%..*%.') then
    return nil
  end
  if exponent ~= '' and not string.find(exponent, exponent_shape) then
    return nil
  end
  local value = tonumber(s)
  if value == nil or value ~= value or value == math.huge or value == -math.huge then
    return nil
  end
  if value == 0 and string.find(mantissa, nonzero) then
    return nil
  end
  return value
end
