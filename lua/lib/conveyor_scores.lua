-- lib/conveyor_scores.lua: lib/zline.lua's score hooks on conveyor keys
-- (zline_bound, zline_score, zline_scores): the scores a verb reads are
-- positions, printed as the server prints a score (dformat_reply: what a
-- plain verb's body hands on). Needs lib/conveyor.lua,
-- lib/conveyor_bound.lua and lib/dformat.lua before it;
-- lib/conveyor_line.lua comes after it.

local function zline_bound(k, bound, lower)
  local offset = (conveyor_offset(k) or 0)
  if offset == 0 then
    return bound
  end
  local value, exclusive = bound, false
  if type(bound) ~= 'number' then
    value, exclusive = conveyor_parse_bound(bound)
  end
  return (conveyor_bound(KEYS[2 * k - 1], value, exclusive, lower, offset)) -- (the bound alone)
end

local function zline_score(k, text)
  local offset = (conveyor_offset(k) or 0)
  if offset == 0 or not text then
    return text
  end
  return dformat_reply(tonumber(text) + offset)
end

local function zline_scores(k, flat)
  local offset = (conveyor_offset(k) or 0)
  if offset ~= 0 then
    for i = 2, #flat, 2 do
      flat[i] = dformat_reply(tonumber(flat[i]) + offset)
    end
  end
  return flat
end

