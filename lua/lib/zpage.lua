-- lib/zpage.lua: the body of ZPAGE (lua/zpage.lua, lua/conveyor_zpage.lua), its
-- scores through lib/zline.lua's hooks.

if #KEYS ~= 1 or #ARGV < 2 then
  return err("ERR wrong number of arguments for 'zpage' command")
end
local key = KEYS[1]

local rev, withscores = false, false
for i = 3, #ARGV do
  local option = string.lower(ARGV[i])
  if option == 'rev' then
    rev = true
  elseif option == 'withscores' then
    withscores = true
  else
    return err('ERR syntax error')
  end
end
local count = parse_int(ARGV[2])
if count == nil then
  return err('ERR value is not an integer or out of range')
end
if count <= 0 then
  return err('ERR value is out of range, must be positive')
end

local direction = rev and 'r' or 'a'
local after_text, after_score, after_member -- nil on the first page
if ARGV[1] ~= '0' then
  local dir, score_text, hex = string.match(ARGV[1], '^([ar])([^:]+):([0-9a-f]*)$')
  if dir ~= direction or #hex % 2 ~= 0 then
    return err('ERR invalid cursor')
  end
  after_score = parse_float(score_text)
  if after_score == nil then
    return err('ERR invalid cursor')
  end
  after_text = score_text
  after_member = string.gsub(hex, '..', function(h)
    return string.char(tonumber(h, 16))
  end)
end

-- ZCARD fails (WRONGTYPE) on a key of another type, and is 0 on none.
local card = redis.pcall('ZCARD', key)
if type(card) ~= 'number' then
  return err('WRONGTYPE Operation against a key holding the wrong kind of value')
end
if card == 0 then
  return { '0', {} }
end

-- The member at a rank counted in the page's direction.
local function member_at(rank)
  if rev then
    return redis.call('ZRANGE', key, rank, rank, 'REV')[1]
  end
  return redis.call('ZRANGE', key, rank, rank)[1]
end

-- The rank (in the page's direction) of the first member strictly after
-- (after_score, after_member).
local function first_after()
  local score = redis.call('ZSCORE', key, after_member)
  if score and tonumber(zline_score(1, score)) == after_score then
    return redis.call(rev and 'ZREVRANK' or 'ZRANK', key, after_member) + 1
  end
  -- Gone or moved: after the members that come before the cursor's score,
  -- then past the tied members that come before (or are) its member.
  local before
  if rev then
    before = redis.call('ZCOUNT', key, zline_bound(1, '(' .. after_text, true), '+inf')
  else
    before = redis.call('ZCOUNT', key, '-inf', zline_bound(1, '(' .. after_text, false))
  end
  local low, high = before, before + redis.call('ZCOUNT', key, zline_bound(1, after_text, true), zline_bound(1, after_text, false))
  -- Lua's '<' (strcoll) where the locale orders bytes as memcmp does: many
  -- times faster than bytes_less, which each probe would otherwise pay.
  local less = bytes_less
  if low < high and collation_is_bytes() then
    less = function(a, b)
      return a < b
    end
  end
  while low < high do
    local mid = math.floor((low + high) / 2)
    local m = member_at(mid)
    local past
    if rev then
      past = less(m, after_member)
    else
      past = less(after_member, m)
    end
    if past then
      high = mid
    else
      low = mid + 1
    end
  end
  return low
end

local start = 0
if after_member then
  start = first_after()
end
if start >= card then
  return { '0', {} }
end
-- Ranks stay below the set's size, so the arithmetic is exact.
local stop = start + math.min(count, card) - 1
local range = { 'ZRANGE', key, start, stop }
if rev then
  range[#range + 1] = 'REV'
end
if withscores then
  range[#range + 1] = 'WITHSCORES'
end
range = redis.call(unpack(range))
if withscores then
  zline_scores(1, range)
end
local per_member = withscores and 2 or 1

-- The member's bytes in lower-case hex: string.byte puts each byte on Lua's
-- C stack (LUAI_MAXCSTACK, 8000 slots), so a long member goes by gsub.
local function to_hex(s)
  if #s <= 3000 then
    return string.format(string.rep('%02x', #s), string.byte(s, 1, -1))
  end
  return (string.gsub(s, '.', function(c)
    return string.format('%02x', string.byte(c))
  end))
end

local next_cursor = '0'
if start + #range / per_member < card then
  local last, last_score = range[#range - per_member + 1], range[#range]
  if not withscores then
    -- The score as ZRANGE ... WITHSCORES would have printed it.
    last_score = zline_score(1, redis.call('ZSCORE', key, last))
  end
  next_cursor = direction .. last_score .. ':' .. to_hex(last)
end
return { next_cursor, range }
