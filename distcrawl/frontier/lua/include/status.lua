--[[ status: the registries `scrapy status` and the progress line read, O(shards + nodes + top
sites) keys and never a SCAN. Written per batch, never per request. ]]

-- add n to a field of the shard's status hash (a field at 0 or below goes)
local function status_add(P, field, n)
  if n == 0 then return end
  if redis.call('HINCRBY', K.status(P), field, n) <= 0 then
    redis.call('HDEL', K.status(P), field)
  end
end

local GONE_KEPT_MS = 24 * 3600 * 1000 -- a node that stopped or was recovered is listed for a day

-- a node stopped cleanly or was claimed as dead (control slot)
local function mark_gone(P, node, now)
  redis.call('ZADD', K.gone(P), now, node)
  redis.call('ZREMRANGEBYSCORE', K.gone(P), '-inf', now - GONE_KEPT_MS)
end
