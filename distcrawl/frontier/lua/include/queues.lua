--[[ queues: a shard's queue, parked retries and held leases.

A request lives in exactly one of: the queue (K.queue), a site's waiting room (K.wait), the
parked retries (K.delayed), the revisits (K.revisit) or the held hash of the node it is leased
to (K.held). A held line is "<order score>\t<rid>\t<value>", what its lease reply carried. ]]
--- @include "util"
--- @include "sites"
--- @include "budgets"
--- @include "status"

-- Return leases of `node` (the rids named, or all of them when none are) to the queue, with
-- their order score, as bare rids whose values go back to K.requests. Returns how many left
-- the node (a line this library did not write is dropped: nothing to return).
local function release_leases(call, node, rids)
  local P = call.P
  local held = K.held(P, node)
  local mine = {}
  if #rids == 0 then
    local all = redis.call('HGETALL', held)
    for i = 1, #all, 2 do mine[#mine + 1] = {all[i], all[i + 1]} end
  else
    local got = call_joined('HMGET', held, rids)
    for j, rid in ipairs(rids) do
      if got[j] then mine[#mine + 1] = {rid, got[j]} end
    end
  end
  if #mine == 0 then return 0 end
  local zadd, reqs, per_site, gone = {}, {}, {}, {}
  for _, e in ipairs(mine) do
    local rid = e[1]
    local score, value = string.match(e[2], '^([^\t]*)\t[^\t]*\t(.*)$')
    if score and tonumber(score) then
      zadd[#zadd + 1] = score; zadd[#zadd + 1] = rid
      reqs[#reqs + 1] = rid; reqs[#reqs + 1] = value
      local site = split_req(value)
      per_site[site] = (per_site[site] or 0) + 1
    end
    gone[#gone + 1] = rid
  end
  call_chunked('HDEL', held, gone, 1)
  if #reqs > 0 then call_chunked('HSET', K.requests(P), reqs, 2) end
  call_chunked('ZADD', K.queue(P), zadd, 2)
  for site, count in pairs(per_site) do site_done(call, site, count) end
  save_budgets(call)
  if #rids == 0 then
    redis.call('HDEL', K.status(P), STATUS_LEASES .. node) -- [status registry]
  else
    status_add(P, STATUS_LEASES .. node, -#gone) -- [status registry]
  end
  return #gone
end

-- due retries into the queue; returns how many moved and how many joined the queue
local function promote_due(P, now, limit)
  local due = redis.call('ZRANGEBYSCORE', K.delayed(P), '-inf', now, 'LIMIT', 0, limit)
  if #due == 0 then return 0, 0 end
  local scores = redis.call('HMGET', K.delayed_score(P), unpack(due))
  local zadd = {}
  for j, rid in ipairs(due) do
    zadd[#zadd + 1] = scores[j] or 0; zadd[#zadd + 1] = rid
  end
  redis.call('ZREM', K.delayed(P), unpack(due))
  redis.call('HDEL', K.delayed_score(P), unpack(due))
  return #due, redis.call('ZADD', K.queue(P), unpack(zadd))
end

-- Which of the shard's waiting rooms, parked retries, pause flag, per-site limits, adaptive
-- cuts and in-flight counts exist: one EXISTS of the six, as most calls of a crawl without
-- limits find none; else one more, key j named 2^(j-1) times, whose count says which.
-- Returns a table: waiting, delayed, paused, special (limits or cuts), active, cuts
local function side_keys(P)
  local keys = {K.waiting(P), K.delayed(P), K.paused(P), K.limits(P), K.cuts(P), K.active(P)}
  if redis.call('EXISTS', unpack(keys)) == 0 then return {} end
  local args = {}
  for j, key in ipairs(keys) do
    for _ = 1, 2 ^ (j - 1) do args[#args + 1] = key end
  end
  local n = redis.call('EXISTS', unpack(args))
  local has = {}
  for j = 1, #keys do
    has[j] = n % 2 == 1
    n = math.floor(n / 2)
  end
  return {waiting = has[1], delayed = has[2], paused = has[3], special = has[4] or has[5],
    active = has[6], cuts = has[5]}
end

-- the best (lowest) score of a sorted set, or nil
local function head_score(key)
  local first = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
  if #first == 2 then return tonumber(first[2]) end
  return nil
end
