--[[ queues: a shard's queue, parked retries and held leases.

A request lives in exactly one of: the queue (a priority's list, levels), a site's waiting room
(K.wait), the parked retries (K.delayed), the revisits (K.revisit) or the held hash of the
node it is leased to (K.held). A held line is "<priority>\t<rid>\t<value>", what its lease reply
carried. ]]
--- @include "util"
--- @include "sites"
--- @include "budgets"
--- @include "status"
--- @include "levels"

-- Return leases of `node` (the rids named, or all of them when none are) to the front of their
-- priority's queue, oldest first (by seq), their values inline. Returns how many left the
-- node (a line this library did not write is dropped: nothing to return).
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
  local lv = read_levels(call)
  local back, per_site, gone = new_batch(), {}, {}
  for _, e in ipairs(mine) do
    local rid = e[1]
    local prio, value = string.match(e[2], '^([^\t]*)\t[^\t]*\t(.*)$')
    local p = prio and tonumber(prio)
    if p and p == math.floor(p) then
      batch_add(back, level_of(lv, prio), {seq_of(rid), rid .. '\t' .. value})
      local site = split_req(value)
      per_site[site] = (per_site[site] or 0) + 1
    end
    gone[#gone + 1] = rid
  end
  call_chunked('HDEL', held, gone, 1)
  for _, l in ipairs(back.order) do
    local entries = back.by[l]
    table.sort(entries, function(x, y) return x[1] < y[1] end)
    local sorted = {}
    for j, e in ipairs(entries) do sorted[j] = e[2] end
    push_level(lv, l, sorted, true)
  end
  save_levels(lv)
  for site, count in pairs(per_site) do site_done(call, site, count) end
  save_budgets(call)
  if #rids == 0 then
    redis.call('HDEL', K.status(P), STATUS_LEASES .. node) -- [status registry]
  else
    status_add(P, STATUS_LEASES .. node, -#gone) -- [status registry]
  end
  return #gone
end

-- due retries to the end of their priority's queue (bare rids: their values stay in
-- K.requests); returns how many moved
local function promote_due(P, lv, now, limit)
  local due = redis.call('ZRANGEBYSCORE', K.delayed(P), '-inf', now, 'LIMIT', 0, limit)
  if #due == 0 then return 0 end
  local prios = redis.call('HMGET', K.delayed_priority(P), unpack(due))
  local b = new_batch()
  for j, rid in ipairs(due) do batch_add(b, level_of(lv, prios[j] or '0'), rid) end
  redis.call('ZREM', K.delayed(P), unpack(due))
  redis.call('HDEL', K.delayed_priority(P), unpack(due))
  push_batch(lv, b, false)
  return #due
end

-- Which of the shard's waiting rooms, parked retries, pause flag, per-site limits, adaptive
-- cuts and in-flight counts exist: one EXISTS of the six, as most calls of a crawl without
-- limits find none; else one more, key j named 2^(j-1) times, whose count says which.
-- Returns a table: waiting, delayed, paused, special (limits or cuts), active, cuts
local function side_keys(call)
  local keys = call.names.side
  if not keys then
    local P = call.P
    keys = {K.waiting(P), K.delayed(P), K.paused(P), K.limits(P), K.cuts(P), K.active(P)}
    call.names.side = keys
  end
  if redis.call('EXISTS', unpack(keys)) == 0 then return EMPTY end
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
