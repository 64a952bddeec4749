#!lua
-- HSETVER key version field value [field value ...]
--
-- KEYS[1]  the hash
-- ARGV[1]  version, a signed 64-bit integer
-- ARGV     then field, value pairs
--
-- Writes the fields, and then the field `version` = version, only if the
-- stored `version` field is missing or not greater than version (compared
-- exactly, as 64-bit integers). `version` is written last, so a pair named
-- `version` cannot override it.
-- Reply: 1 if applied, 0 if rejected as outdated.

-- unpack() puts every value on Lua's C stack (LUAI_MAXCSTACK is 8000
-- slots), so one HSET carries at most this many field/value pairs.
local PAIRS_PER_CALL = 3000

--#include lib/err.lua
--#include lib/int.lua

-- Redis's string2ll (lib/int.lua). Returns the string itself when valid
-- (the value as a double would be inexact beyond 2^53), or nil.
local function int64_string(s)
  if parse_int(s) == nil then
    return nil
  end
  return s
end

-- Whether int64 string a > int64 string b, exactly. Both are in string2ll
-- form, which has no leading zeros, so a longer magnitude is a larger one
-- and equal lengths compare digit by digit.
local function int64_greater(a, b)
  local a_negative, b_negative = string.sub(a, 1, 1) == '-', string.sub(b, 1, 1) == '-'
  if a_negative ~= b_negative then
    return b_negative
  end
  if a_negative then
    a, b = string.sub(b, 2), string.sub(a, 2) -- compare magnitudes, reversed
  end
  if #a ~= #b then
    return #a > #b
  end
  return a > b
end

if #KEYS ~= 1 or #ARGV < 3 or #ARGV % 2 ~= 1 then
  return err("ERR wrong number of arguments for 'hsetver' command")
end
local key = KEYS[1]
local version = int64_string(ARGV[1])
if version == nil then
  return err('ERR value is not an integer or out of range')
end
local kind = redis.call('TYPE', key).ok
if kind ~= 'hash' and kind ~= 'none' then
  return err('WRONGTYPE Operation against a key holding the wrong kind of value')
end

local stored = redis.call('HGET', key, 'version')
if stored then
  stored = int64_string(stored)
  if stored == nil then
    return err('ERR hash value is not an integer')
  end
  if int64_greater(stored, version) then
    return 0
  end
end

-- The pairs in chunks; the last chunk ends with `version`, so within that
-- one HSET it is the last write of the field.
local pairs_total = (#ARGV - 1) / 2
for first = 0, pairs_total - 1, PAIRS_PER_CALL do
  local last = math.min(first + PAIRS_PER_CALL, pairs_total) - 1
  local args = { 'HSET', key, unpack(ARGV, 2 + 2 * first, 3 + 2 * last) }
  if last == pairs_total - 1 then
    args[#args + 1] = 'version'
    args[#args + 1] = version
  end
  redis.call(unpack(args))
end
return 1
