-- lib/err.lua: an error reply with exactly Redis's text. Returned, never
-- raised, so Redis adds no " script: ..." suffix.
local function err(msg)
  return redis.error_reply(msg)
end
