-- lib/conveyor_command.lua: a Redis command on conveyor keys, as the
-- translation scripts run it: the offset written, the command as sent, its
-- reply. Needs lib/conveyor.lua (and what it needs) before it.

-- Writes fields of the k-th key's offset key, which takes the key's time
-- to live when it is new.
local function conveyor_hset(k, ...)
  local key, okey = KEYS[2 * k - 1], KEYS[2 * k]
  -- (every offset key has `offset`, which is always written: every field
  -- new is a new key)
  local fresh = redis.call('HSET', okey, ...) == select('#', ...) / 2
  if fresh then
    local ttl = redis.call('PTTL', key)
    if ttl > 0 then
      redis.call('PEXPIRE', okey, ttl)
    end
  end
end

-- Sets the offset of the k-th key (a conveyor key that exists). Offset 0
-- of a line never rebased deletes the offset key.
local function conveyor_set_offset(k, offset)
  if offset == 0 and redis.call('HEXISTS', KEYS[2 * k], 'rebased') == 0 then
    redis.call('DEL', KEYS[2 * k])
    return
  end
  conveyor_hset(k, 'offset', format_score(offset))
end

-- After the k-th key's offset went into its stored scores: offset 0, and
-- when and how often that happened.
local function conveyor_note_rebase(k)
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  conveyor_hset(k, 'offset', '0', 'rebased', string.format('%.0f', now))
  redis.call('HINCRBY', KEYS[2 * k], 'rebases', 1)
end

-- A nil array, as Redis's own ZRANK ... WITHSCORE and ZMPOP reply for
-- nothing (*-1 in RESP2): a script can return no such thing, so it returns
-- a marker the proxy replaces (proxy/upstream/upstream.c); false (a nil
-- bulk string in RESP2) where it cannot (inside MULTI).
local function conveyor_nil_array()
  if conveyor_nil_array_ok then
    return { ok = 'VERBPROXY-NIL-ARRAY' }
  end
  return false
end

-- A score in a reply, formatted by Redis as its own commands format
-- scores (a RESP3 double; a bulk string in RESP2).
local function conveyor_score(x)
  return { double = x }
end

-- The position of a stored score (the text Redis gave for it) as a score
-- in a reply. (Offset 0 adds nothing: -0 + 0 would be 0.)
local function conveyor_position(text, offset)
  local x = tonumber(text)
  if offset ~= 0 then
    x = x + offset
  end
  return { double = x }
end

-- The command as the client sent it, run as it is, its reply as Lua gets
-- it in RESP2 (scores as strings): for a reply translated next.
-- Redis's refusal of a command it does not have, in its words for a
-- client (6.2 quotes with `).
local function conveyor_unknown_command()
  local old = redis.REDIS_VERSION_NUM == nil
  local args = ''
  for i = 1, conveyor_argc - 1 do
    if #args >= 128 then
      break
    end
    local a = string.sub(ARGV[i + 3], 1, 128 - #args)
    args = args .. (old and ('`' .. a .. '`, ') or ("'" .. a .. "' "))
  end
  local text
  if old then
    text = 'ERR unknown command `' .. ARGV[3] .. '`, with args beginning with: ' .. args
  else
    text = "ERR unknown command '" .. string.sub(ARGV[3], 1, 128) .. "', with args beginning with: " .. args
  end
  return err((string.gsub(text, '[\r\n]', ' ')))
end

-- A call's error as Redis would give it to a client: an older server's
-- arity, or a command it lacks, it words otherwise for scripts.
local function conveyor_client_error(r)
  if type(r) ~= 'table' or not r.err then
    return r
  elseif string.find(r.err, 'Wrong number of args calling') then
    return err("ERR wrong number of arguments for '" .. conveyor_name .. "' command")
  elseif string.find(r.err, 'Unknown [%a ]*command called from') then
    return conveyor_unknown_command()
  end
  return r
end

local function conveyor_call_as_sent()
  return conveyor_client_error(redis.pcall(unpack(ARGV, 3)))
end

-- The command as the client sent it, its reply passed on as it is: for
-- what needs no translation (a key of another type, a missing key, offset
-- 0) and for arguments Redis refuses, which it refuses with its own error.
-- In RESP3 the reply comes back as RESP3 (doubles, pairs) and goes on as
-- such; the script's own calls are RESP2 again after it. (A RESP3 reply
-- holding a null inside an array would lose it: ZMSCORE never comes here.)
local function conveyor_as_is()
  if conveyor_resp3 then
    redis.setresp(3)
  end
  local r = conveyor_call_as_sent()
  if conveyor_resp3 then
    redis.setresp(2)
  end
  return r
end

-- The key's type is a sorted set (else the command goes as it is: Redis
-- answers an empty reply for no key, WRONGTYPE for another type).
local function conveyor_zset(key)
  return redis.call('TYPE', key).ok == 'zset'
end
