#!lua
-- VERBPROXY CONVEYOR INFO key  |  VERBPROXY CONVEYOR REBASE key
-- (docs/conveyor.md#what-redis-itself-shows). KEYS and ARGV as
-- lib/conveyor.lua says: ARGV[3..6] are VERBPROXY, CONVEYOR, the
-- subcommand and the key.
--
-- INFO: whether the key is a conveyor key (matches a `conveyor`
-- pattern), its offset, its members, its offset key's name, when it was
-- last rebased (server time in ms, nil: never) and how many times.
-- REBASE: folds the offset into the stored scores (O(N): every member
-- rescored) so they are the positions and the offset is 0, then replies as
-- INFO. It folds a key that no longer matches a pattern too, when it still
-- has an offset: the way back for a pattern removed too early. A map in
-- RESP3, a flat array of names and values in RESP2.

--#include lib/err.lua
--#include lib/order.lua
--#include lib/zrescore.lua
--#include lib/conveyor.lua
--#include lib/conveyor_command.lua

local key, okey = KEYS[1], KEYS[2]
local sub = string.lower(ARGV[5])
if sub ~= 'info' and sub ~= 'rebase' then
  return err("ERR unknown subcommand '" .. ARGV[5] .. "'. Try VERBPROXY HELP.")
end
local offset = conveyor_read_offset(okey)
if offset == nil then
  return conveyor_bad_offset(1)
end
local kind = redis.call('TYPE', key).ok
local members = 0
if kind == 'zset' then
  members = redis.call('ZCARD', key)
end
if sub == 'rebase' and kind == 'zset' and offset ~= 0 then
  zrescore_first(key, offset, members)
  conveyor_note_rebase(1)
  offset = 0
end

local rebased = redis.call('HGET', okey, 'rebased')
local rebases = tonumber(redis.call('HGET', okey, 'rebases') or '0')
local fields = {
  'conveyor', conveyor_is(1) and 1 or 0,
  'type', kind,
  'offset', format_score(offset),
  'members', members,
  'offset-key', okey,
  'rebased-ms', rebased and tonumber(rebased) or false,
  'rebases', rebases,
}
if conveyor_resp3 then
  local map = {}
  for i = 1, #fields, 2 do
    map[fields[i]] = fields[i + 1]
  end
  return { map = map }
end
return fields
