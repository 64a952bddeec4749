-- lib/dformat.lua: a double as this server prints it where Lua cannot ask
-- it to (ZSCAN's scores: a sorted set's own strings).
--
-- A listpack (ziplist on Redis 6.2) keeps each score as d2string made it
-- at ZADD; a skiplist prints it with ld2string (%.17Lg). d2string prints
-- an integral value as an integer (Redis 7.0 and 6.2 below 2^52, Redis
-- 7.2, 7.4 and Valkey within +-LLONG_MAX/2), else %.17g (6.2, 7.0) or
-- fpconv_dtoa (7.2, 7.4, Valkey: the shortest digits that read back the
-- same double, laid out as fpconv's emit_digits lays them out). Needs
-- lib/order.lua (format_score: %.17g) before it.

-- Redis 7.2 and later print doubles with fpconv (Valkey says 7.2.4).
local dformat_fpconv = (redis.REDIS_VERSION_NUM or 0) >= 0x070200

-- fpconv_dtoa of a finite double that is not 0.
local function dformat_shortest(x)
  local neg = x < 0
  local a = neg and -x or x
  local digits, e10
  for p = 0, 16 do
    local s = string.format('%.' .. p .. 'e', a)
    if tonumber(s) == a or p == 16 then
      local m, e = string.match(s, '^([%d%.]+)e([-+]%d+)$')
      digits, e10 = string.gsub(m, '%.', ''), tonumber(e)
      break
    end
  end
  digits = string.gsub(digits, '0+$', '')
  local nd = #digits
  local k = e10 - nd + 1 -- the value is digits * 10^k
  local exp = math.abs(k + nd - 1)
  local out
  if k >= 0 and exp < nd + 7 then
    out = digits .. string.rep('0', k)
  elseif k < 0 and (k > -7 or exp < 4) then
    local offset = nd + k
    if offset <= 0 then
      out = '0.' .. string.rep('0', -offset) .. digits
    else
      out = string.sub(digits, 1, offset) .. '.' .. string.sub(digits, offset + 1)
    end
  else
    local n = math.min(nd, neg and 17 or 18)
    out = string.sub(digits, 1, 1)
    if n > 1 then
      out = out .. '.' .. string.sub(digits, 2, n)
    end
    out = out .. 'e' .. ((k + n - 1 < 0) and '-' or '+') .. tostring(exp)
  end
  return (neg and '-' or '') .. out
end

-- A score in a RESP2 reply (addReplyDouble: fpconv_dtoa from Redis 7.2
-- on, %.17g before), as a script gets it from its own redis.call.
local function dformat_reply(x)
  if not dformat_fpconv or x ~= x or x == math.huge or x == -math.huge then
    return format_score(x)
  elseif x == 0 then
    return (1 / x < 0) and '-0' or '0'
  end
  return dformat_shortest(x)
end

-- d2string: what a listpack holds for the score x: an integral value
-- (but 0) as an integer, else as a reply prints it.
local function dformat_d2string(x)
  local limit = dformat_fpconv and 4611686018427387903 or 4503599627370496
  if x ~= 0 and x == math.floor(x) and x >= -limit and x <= limit then
    return string.format('%.0f', x)
  end
  return dformat_reply(x)
end
