#!lua
-- ZUNION, ZINTER, ZUNIONSTORE and ZINTERSTORE where a key is a conveyor
-- key (docs/conveyor.md). A source's scores are its positions; a
-- destination gets the result's positions with no offset of its own (so
-- a conveyor destination starts at offset 0). Computed here as Redis
-- computes them (lib/zaggregate.lua) when a source has an offset; Redis's
-- own command otherwise. KEYS and ARGV as lib/conveyor.lua says. Errors
-- in Redis's order and texts (lib/zcommand.lua).

--#include lib/err.lua
--#include lib/int.lua
--#include lib/float.lua
--#include lib/order.lua
--#include lib/zset.lua
--#include lib/zaggregate.lua
--#include lib/zcommand.lua
--#include lib/conveyor.lua
--#include lib/conveyor_command.lua

local store = conveyor_name == 'zunionstore' or conveyor_name == 'zinterstore'
local first = store and 2 or 1 -- the first source among the keys
local sources, offsets, shifted = {}, {}, false
for k = first, #KEYS / 2 do
  local offset = conveyor_offset(k)
  if offset == nil then
    return conveyor_bad_offset(k)
  end
  sources[#sources + 1] = KEYS[2 * k - 1]
  offsets[#offsets + 1] = offset
  shifted = shifted or offset ~= 0
end
local read, failure = zcommand_read(conveyor_name, ARGV, 3 + first, sources, store)
if not read then
  return failure
end
if not shifted and read.aggregate ~= 'count' then
  -- Positions are the stored scores: Redis's own. (AGGREGATE COUNT, which
  -- reads no score, is computed here on every server: Redis before 8.8
  -- lacks it, and a conveyor destination's offset must go.)
  local r = conveyor_as_is()
  if store and type(r) == 'number' then
    redis.call('DEL', KEYS[2])
  end
  return r
end
local inter = conveyor_name == 'zinter' or conveyor_name == 'zinterstore'
local scores, members = zaggregate_compute(inter, sources, read.weights, read.aggregate, offsets)
if store then
  redis.call('DEL', KEYS[2])
  return zaggregate_store(KEYS[1], scores, members)
end
return zaggregate_reply(scores, members, read.withscores, conveyor_resp3)
