--[[ revisit: scheduled re-crawls (DISTCRAWL_REVISIT). Nothing here runs unless a call's header
carries rv (the dupefilter's generation length, ms): a crawl without the setting keeps the keys
and the work of the other includes, call for call.

The dupefilter forgets: a URL is new when neither the current generation nor the one before
holds it, so it is forgotten rv to 2 rv after it was last recorded (at its first push, and
again at every revisit). A revisited page waits in K.revisit until it falls due, then joins the
queue through its site's budget like any request; K.revisit_late keeps its due time until it
is leased (how far behind schedule the crawl is). ]]
--- @include "util"
--- @include "sites"
--- @include "budgets"
--- @include "dupefilter"
--- @include "levels"

-- the dupefilter generation of `now`, and the generations before the previous one dropped
-- (a URL recorded in generation g is known until g + 2 begins: for rv to 2 * rv)
local function revisit_generation(P, rv, now)
  local gen = math.floor(now / rv)
  local cur = tonumber(redis.call('GET', K.seen_generation(P)))
  if cur == gen then return gen end
  if cur and cur > gen then return gen end -- a node with a shorter DISTCRAWL_REVISIT_FORGET
  if cur then
    for g = cur - 1, cur do
      if g < gen - 1 then
        local st = redis.call('HMGET', K.seen_gen_info(P, g), 'L', 'split')
        local n = 2 ^ (tonumber(st[1]) or 0) + (tonumber(st[2]) or 0)
        local drop = {K.bloom_gen(P, g)}
        for b = 0, n - 1 do drop[#drop + 1] = bucket_key(P, g, b) end
        call_chunked('UNLINK', K.seen_gen_info(P, g), drop, 1)
      end
    end
  end
  redis.call('SET', K.seen_generation(P), gen)
  return gen
end

-- which fingerprints generation g already holds (read only): a table i -> true
local function generation_has(P, fps, hs, bloom, g)
  local found = {}
  if bloom then
    local m, k = tonumber(bloom[1]), tonumber(bloom[2])
    local key = K.bloom_gen(P, g)
    if redis.call('EXISTS', key) == 0 then return found end
    for idx, fp in ipairs(fps) do
      if #fp >= 8 then
        local gets = {}
        for _, o in ipairs(bloom_offsets(fp, m, k)) do
          gets[#gets + 1] = 'GET'; gets[#gets + 1] = 'u1'; gets[#gets + 1] = o
        end
        local all = true
        for _, v in ipairs(redis.call('BITFIELD_RO', key, unpack(gets))) do
          if v == 0 then all = false end
        end
        if all then found[idx] = true end
      end
    end
    return found
  end
  local st = redis.call('HMGET', K.seen_gen_info(P, g), 'L', 'split', 'n')
  if not st[1] and not st[2] and not st[3] then return found end
  local size, split = 2 ^ (tonumber(st[1]) or 0), tonumber(st[2]) or 0
  for idx, fp in ipairs(fps) do
    if fp ~= '' then
      local b = bucket_of(hash_of(hs[idx], fp), size, split)
      if redis.call('SISMEMBER', bucket_key(P, g, b), fp) == 1 then found[idx] = true end
    end
  end
  return found
end

-- the dupefilter that forgets: new = in neither the current generation nor the previous one;
-- recorded in the current one
local function revisit_dupefilter(P, fps, hs, bloom, rv, now)
  local fresh = {}
  if #fps == 0 then return fresh end
  local gen = revisit_generation(P, rv, now)
  local known = generation_has(P, fps, hs, bloom, gen - 1)
  local sub_fps, sub_hs, map = {}, {}, {}
  for idx, fp in ipairs(fps) do
    if fp ~= '' and not known[idx] then
      sub_fps[#sub_fps + 1] = fp
      sub_hs[#sub_hs + 1] = hs[idx]
      map[#sub_fps] = idx
    end
  end
  for j in pairs(dupefilter(P, sub_fps, sub_hs, bloom, gen)) do fresh[map[j]] = true end
  return fresh
end

-- Acks of pages to visit again (the `revisits` section: rid site interval payload fp h), fenced
-- like acks: a lease the node holds leaves it for K.revisit, due in `interval` ms, with the new
-- payload (the validators of the page's last answer), and its fingerprint is recorded again
-- in the current dupefilter generation. Returns acked, stale.
local function revisit_acks(call, node, rv_records, now, rv, bloom)
  local P = call.P
  local held_key = K.held(P, node)
  local rids, sites = rv_records.rid, rv_records.site
  local entries = call_joined('HMGET', held_key, rids)
  local held, reqs, due, fps, hs, per_site = {}, {}, {}, {}, {}, {}
  for j, rid in ipairs(rids) do
    local prio = entries[j] and string.match(entries[j], '^[^\t]*')
    if prio then
      local site = sites[j]
      held[#held + 1] = rid
      reqs[#reqs + 1] = rid; reqs[#reqs + 1] = req_value(site, rv_records.payload[j])
      due[#due + 1] = now + (tonumber(rv_records.interval[j]) or 0)
      due[#due + 1] = prio .. ':' .. rid
      fps[#fps + 1] = rv_records.fp[j]; hs[#hs + 1] = rv_records.h[j]
      per_site[site] = (per_site[site] or 0) + 1
    end
  end
  if #held > 0 then
    call_chunked('HDEL', held_key, held, 1)
    call_chunked('HSET', K.requests(P), reqs, 2)
    call_chunked('ZADD', K.revisit(P), due, 2)
    for site, count in pairs(per_site) do site_done(call, site, count) end
    dupefilter(P, fps, hs, bloom, revisit_generation(P, rv, now))
    -- (their leases leave the status registry with the acks: counted in `acked`)
  end
  return #held, #rids - #held
end

-- Revisits fallen due go to the end of their priority's queue (bare rids: their values stay in
-- K.requests), first due first. Returns how many moved.
local function promote_revisits(P, lv, now, limit)
  local due = redis.call('ZRANGEBYSCORE', K.revisit(P), '-inf', now, 'WITHSCORES', 'LIMIT', 0,
    limit)
  local n = #due / 2
  if n == 0 then return 0 end
  local b, zl, members = new_batch(), {}, {}
  for j = 1, n do
    local member = due[2 * j - 1]
    local cut = string.find(member, ':', 1, true)
    local prio, rid = '0', member
    if cut then prio, rid = string.sub(member, 1, cut - 1), string.sub(member, cut + 1) end
    local ok, l = pcall(level_of, lv, prio)
    if not ok then l = level_of(lv, '0') end
    batch_add(b, l, rid)
    members[j] = member
    zl[#zl + 1] = due[2 * j]; zl[#zl + 1] = rid
  end
  call_chunked('ZREM', K.revisit(P), members, 1)
  push_batch(lv, b, false)
  call_chunked('ZADD', K.revisit_late(P), zl, 2)
  return n
end
