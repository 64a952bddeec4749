#!lua
-- ZDIFFSTORE and ZRANGESTORE where a key is a conveyor key
-- (docs/conveyor.md): Redis's own command copies the source's stored
-- scores (the first source's, for ZDIFFSTORE), score bounds translated
-- for ZRANGESTORE ... BYSCORE; then the destination takes the source's
-- offset: as its own if it is a conveyor key, folded into its scores if it
-- is plain, so it holds the true positions either way. KEYS and ARGV as
-- lib/conveyor.lua says: the destination first, then the source(s).

--#include lib/err.lua
--#include lib/float.lua
--#include lib/order.lua
--#include lib/zrescore.lua
--#include lib/conveyor.lua
--#include lib/conveyor_command.lua
--#include lib/conveyor_bound.lua
--#include lib/conveyor_range.lua

local dest, src = KEYS[1], KEYS[3]
local offset = conveyor_offset(2)
if offset == nil then
  return conveyor_bad_offset(2)
end
local args = nil
if conveyor_name == 'zrangestore' and offset ~= 0 then
  local byscore, _, min_at, max_at = conveyor_range_form(5)
  if byscore then
    args = conveyor_range_args(src, offset, min_at, max_at)
  end
end
local r
if args then
  r = redis.pcall(unpack(args))
else
  r = conveyor_as_is()
end
if type(r) ~= 'number' then
  return r
end
if r == 0 or offset == 0 then
  redis.call('DEL', KEYS[2])
elseif conveyor_is(1) then
  conveyor_set_offset(1, offset)
else
  zrescore_first(dest, offset, r)
  redis.call('DEL', KEYS[2])
end
return r
