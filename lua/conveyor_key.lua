#!lua
-- The key commands on a conveyor key (docs/conveyor.md): DEL, UNLINK,
-- EXPIRE, PEXPIRE, EXPIREAT, PEXPIREAT, PERSIST, RENAME, RENAMENX, COPY,
-- MOVE, RESTORE, DUMP. The offset key follows the key: deleted with it,
-- expiring with it, renamed, copied and moved with it. A line that goes to
-- a plain name (RENAME, COPY) or out as bytes (DUMP) goes with its true
-- positions: folded in place where it goes away (RENAME), else through a
-- folded copy (COPY to another database, DUMP), leaving the key as it was. KEYS and
-- ARGV as lib/conveyor.lua says. The command itself runs as the client
-- sent it: its errors and replies are Redis's.

--#include lib/err.lua
--#include lib/order.lua
--#include lib/zrescore.lua
--#include lib/conveyor.lua
--#include lib/conveyor_command.lua
--#include lib/conveyor_ttl.lua

-- Keys per DEL: unpack() puts every value on Lua's C stack.
local KEYS_PER_CALL = 3000

-- Folds the k-th key's offset into its stored scores (O(N)): its stored
-- scores become its positions, its offset 0. Nothing for a
-- plain key (its stored scores are its positions) or another type.
local function fold(k)
  local key = KEYS[2 * k - 1]
  if not conveyor_is(k) or redis.call('TYPE', key).ok ~= 'zset' then
    return true
  end
  local offset = conveyor_offset(k)
  if offset == nil then
    return false
  end
  if offset ~= 0 then
    zrescore_first(key, offset, redis.call('ZCARD', key))
    conveyor_note_rebase(k)
  end
  return true
end

-- A copy of the k-th key holding its positions (its offset folded in),
-- beside it in its slot, for a command that must give positions without
-- touching the key (a client's WATCH on it would see the fold): the
-- copy's name; nil when the key's stored scores are its positions (plain,
-- offset 0, another type, none); false for an offset key of no number.
local function folded_copy(k)
  local key = KEYS[2 * k - 1]
  if not conveyor_is(k) or redis.call('TYPE', key).ok ~= 'zset' then
    return nil
  end
  local offset = conveyor_offset(k)
  if offset == nil then
    return false
  elseif offset == 0 then
    return nil
  end
  local copy = string.gsub(KEYS[2 * k], '^verbproxy%-offset:', 'verbproxy-fold:', 1)
  redis.call('COPY', key, copy, 'REPLACE')
  zrescore_first(copy, offset, redis.call('ZCARD', copy))
  return copy
end

-- The source's offset key given to the destination `dest_okey` in
-- database `db` (nil: this one): a copy of the source's (its time to live
-- with it), or an offset of 0 where the source has none, replacing
-- whatever stale offset was there. `ttl` is the line's time to live in ms
-- (for an offset key made here).
local function give_offset(src_okey, dest_okey, db, ttl, keep_source)
  local made = false
  if redis.call('EXISTS', src_okey) == 0 then
    if db == nil then
      redis.call('DEL', dest_okey)
      return
    end
    redis.call('HSET', src_okey, 'offset', '0')
    if ttl > 0 then
      redis.call('PEXPIRE', src_okey, ttl)
    end
    made = true
  end
  if db == nil then
    redis.call('COPY', src_okey, dest_okey, 'REPLACE')
  else
    redis.call('COPY', src_okey, dest_okey, 'DB', db, 'REPLACE')
  end
  if made or not keep_source then
    redis.call('DEL', src_okey)
  end
end

local name = conveyor_name
if name == 'del' or name == 'unlink' then
  local total, used, args = 0, 1, { name }
  local nkeys = #KEYS / 2
  for k = 1, nkeys do
    used = used + 1
    args[used] = KEYS[2 * k - 1]
    if used - 1 == KEYS_PER_CALL or k == nkeys then
      total = total + redis.call(unpack(args, 1, used))
      used = 1
    end
  end
  used = 1
  for k = 1, nkeys do
    used = used + 1
    args[used] = KEYS[2 * k]
    if used - 1 == KEYS_PER_CALL or k == nkeys then
      redis.call(unpack(args, 1, used))
      used = 1
    end
  end
  return total
elseif name == 'expire' or name == 'pexpire' or name == 'expireat' or name == 'pexpireat'
    or name == 'persist' then
  local r = conveyor_as_is()
  conveyor_follow_ttl(1)
  return r
elseif name == 'dump' then
  local copy = folded_copy(1)
  if copy == false then
    return conveyor_bad_offset(1)
  elseif not copy then
    return conveyor_as_is()
  end
  local r = redis.pcall('DUMP', copy)
  redis.call('DEL', copy)
  return r
elseif name == 'restore' then
  local r = conveyor_as_is()
  if type(r) == 'table' and r.ok then
    redis.call('DEL', KEYS[2]) -- a DUMP through the proxy holds positions
  end
  return r
elseif name == 'rename' or name == 'renamenx' or name == 'copy' then
  local src, dest = KEYS[1], KEYS[3]
  local db = nil
  if name == 'copy' then
    for i = 3, conveyor_argc - 2 do
      if string.lower(carg(i)) == 'db' then
        db = carg(i + 1)
      end
    end
  end
  if src == dest and db == nil then
    return conveyor_as_is()
  end
  if conveyor_is(1) and conveyor_offset(1) == nil then
    return conveyor_bad_offset(1)
  end
  -- To a plain name the line goes with its true positions.
  if not conveyor_is(2) and name == 'copy' then
    local offset = conveyor_offset(1)
    if offset == 0 or redis.call('TYPE', src).ok ~= 'zset' then
      return conveyor_as_is()
    end
    if db == nil then
      -- the copy folded, the source untouched
      local r = conveyor_as_is()
      if r == 1 then
        zrescore_first(dest, offset, redis.call('ZCARD', dest))
        redis.call('DEL', KEYS[4])
      end
      return r
    end
    local copy = folded_copy(1)
    local args = { 'COPY', copy }
    for i = 2, conveyor_argc - 1 do
      args[#args + 1] = carg(i)
    end
    local r = redis.pcall(unpack(args))
    redis.call('DEL', copy)
    return r
  end
  if not conveyor_is(2) then
    -- RENAME, RENAMENX: the source goes, so it is folded in place (unless
    -- RENAMENX would do nothing: a client's WATCH on it must see nothing).
    if name == 'renamenx' and redis.call('EXISTS', dest) == 1 then
      return conveyor_as_is()
    end
    fold(1)
  end
  local ttl = redis.call('PTTL', src)
  local r = conveyor_as_is()
  if type(r) == 'table' and r.err then
    return r
  end
  if r == 0 then
    return r -- RENAMENX or COPY that did nothing
  end
  if conveyor_is(2) then
    if conveyor_is(1) then
      give_offset(KEYS[2], KEYS[4], db, ttl, name == 'copy')
    elseif db == nil then
      redis.call('DEL', KEYS[4])
    else
      -- (a plain source's offset key name is free to borrow: any there is stale)
      redis.call('DEL', KEYS[2])
      give_offset(KEYS[2], KEYS[4], db, ttl, false)
    end
  elseif db == nil then
    redis.call('DEL', KEYS[4])
  end
  if name ~= 'copy' then
    redis.call('DEL', KEYS[2])
  end
  return r
elseif name == 'move' then
  local ttl = redis.call('PTTL', KEYS[1])
  local r = conveyor_as_is()
  if r == 1 then
    give_offset(KEYS[2], KEYS[2], carg(2), ttl, false)
  end
  return r
end
return err("ERR verbproxy: '" .. name .. "' is not a key command of a conveyor key")
