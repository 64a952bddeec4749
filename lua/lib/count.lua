-- lib/count.lua: a count that may be 0 (COUNT, LIMIT, ZTICK's member
-- limit) as the verbs read one: its value, or nil and Redis's error for
-- it. Needs lib/err.lua and lib/int.lua before it.
local function parse_count(s)
  local n = parse_int(s)
  if n == nil then
    return nil, err('ERR value is not an integer or out of range')
  elseif n < 0 then
    return nil, err('ERR value is out of range, must be positive')
  end
  return n
end
