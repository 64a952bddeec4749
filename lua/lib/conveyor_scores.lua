-- lib/conveyor_scores.lua: lib/zline.lua's score hooks on conveyor keys
-- (zline_bound, zline_score, zline_scores): the scores a verb reads are
-- positions. Needs lib/conveyor.lua, lib/conveyor_bound.lua and
-- lib/dformat.lua before it; lib/conveyor_line.lua comes after it.

-- A double as this server prints a score in a RESP2 reply (addReplyDouble:
-- fpconv_dtoa from Redis 7.2 on, %.17g before), which is what a plain
-- verb's body hands on.
local function conveyor_reply_text(x)
  if dformat_fpconv and x == x and x ~= math.huge and x ~= -math.huge then
    if x == 0 then
      return (1 / x < 0) and '-0' or '0'
    end
    return dformat_shortest(x)
  end
  return format_score(x)
end

local function zline_bound(k, bound, lower)
  local offset = (conveyor_offset(k) or 0)
  if offset == 0 then
    return bound
  end
  local value, exclusive = bound, false
  if type(bound) ~= 'number' then
    value, exclusive = conveyor_parse_bound(bound)
  end
  return conveyor_bound(KEYS[2 * k - 1], value, exclusive, lower, offset)
end

local function zline_score(k, text)
  local offset = (conveyor_offset(k) or 0)
  if offset == 0 or not text then
    return text
  end
  return conveyor_reply_text(tonumber(text) + offset)
end

local function zline_scores(k, flat)
  local offset = (conveyor_offset(k) or 0)
  if offset ~= 0 then
    for i = 2, #flat, 2 do
      flat[i] = conveyor_reply_text(tonumber(flat[i]) + offset)
    end
  end
  return flat
end

