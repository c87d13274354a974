--[[ sync: one node's flush to one shard. A node pipelines the calls of all the shards it has
work for into one round trip.

KEYS[1]  the shard's prefix
ARGV     node, header, then the sections the header counts, each column by column
         (SECTIONS.sync); a header field left out takes its default (HEADERS.sync)
  header    JSON. children, acks, dead, feedback, revisits: the sections' record counts;
            lease: how many requests to lease (0: none); above, extra: then up to `extra` more
            only of a priority higher than `above`; live: live nodes (a node takes at most
            queued / live); idle: 1 while some node sleeps (publish new work); wake, shard: the
            wake channel and what to publish on it; paused: 1 when the control slot says so;
            rate, conc, burst, adaptive, recover: the site budget defaults (see budgets);
            bloom: [m, k] with the Bloom dupefilter; [revisit] rv: the dupefilter's generation
            length (ms); for a fenced node mp, mn (the mark it wrote last here, its next one)
            and tag (into the rids of its children)
  children  fp h spec payload: requests to push. fp "" = none; exact dupefilter: fp the
            fingerprint's first 8 bytes as a signed decimal, h its low 32 bits; bloom: fp the
            binary fingerprint, h "". spec "[d][l]prio[ delay_ms site]": "d" = dont_filter;
            "l" = the node's own: it already works on it, so it is written as its lease (into
            K.held of the node, as a lease of the queue's would be), never queued; delay 0
            and site "=" (the payload's URL names it) when left out. A filtered child is
            never read beyond fp, h and the first byte of its spec
  acks      rid site: leases done
  dead      id record site rid: dead letters (rid: the lease it ends, "" = none)
  feedback  site ok throttled slow newest hold: how sites answered the node (newest: ms from
            the sending of the newest throttled or slow one to this flush; hold: ms the site
            asked every node to wait, Retry-After)
  revisits  rid site interval payload fp h: [revisit] acks whose request comes back in
            `interval` ms with this payload; fp h recorded again
Fenced (mn not ''): K.marks[node] must be mp (or mn: a call that ran but whose reply was lost)
or, with mp '' (the node's first sync of the shard), anything but a tombstone; else nothing is
done and the reply is {'rewound', mark found}.
Acks and dead letters count only for leases the node still holds (a late report from a node
presumed dead changes nothing and counts as stale_acks in the shard's K.counters).
Returns {added, filtered, parked, acked, stale, leased, next_due_ms, paced, queued, head,
at_head, site_events, revisited, own}: leased the lines "<order score>\t<rid>\t<value>", paced the
leased rids that spent a rate token, next_due_ms how soon a parked retry, waiting site or
revisit falls due (-1: none), queued, head and at_head the queue's length, best order score
('' when empty) and how many queued requests share the best priority, after the call;
site_events, flat: site, 'cut'|'recovered', factor before, factor after, reason ('throttled'|
'slow', or the ms since the cut); own, flat: the index among the children and the rid of each
"l" child written (one missing was filtered: the node drops it, or counts that it fetched a URL
already seen). ]]
--- @include "args"
--- @include "util"
--- @include "sites"
--- @include "budgets"
--- @include "dupefilter"
--- @include "revisit"
--- @include "queues"
--- @include "lease"
--- @include "fencing"
--- @include "status"

-- children: one dupefilter check for the batch, one write per key. Returns how many were
-- queued, filtered out and parked, how many joined the queue (new members), and the rids of
-- the node's own children written into its held hash (flat: child index, rid)
local function push_children(call, h, c, held_key)
  local P = call.P
  local fresh
  if h.rv then
    fresh = revisit_dupefilter(P, c.fp, c.h, h.bloom, h.rv, clock(call)) -- [revisit]
  else
    fresh = dupefilter(P, c.fp, c.h, h.bloom)
  end
  local specs, payloads = c.spec, c.payload
  local kept = {}
  for j = 1, c.n do
    if fresh[j] or string.byte(specs[j], 1) == 100 then kept[#kept + 1] = j end -- 'd'
  end
  local filtered = c.n - #kept
  local own = {}
  if #kept == 0 then return 0, filtered, 0, 0, own end
  local seq0 = new_seqs(P, #kept)
  local reqs, zq, zd, ds, held = {}, {}, {}, {}, {}
  for n = 1, #kept do
    local j = kept[n]
    local seq = seq0 + n
    local rid = make_rid(seq, h.tag)
    local spec = specs[j]
    local first = string.byte(spec, 1)
    if first == 100 then -- 'd'
      spec = string.sub(spec, 2)
      first = string.byte(spec, 1)
    end
    local mine = first == 108 -- 'l'
    if mine then spec = string.sub(spec, 2) end
    local prio, delay, site = spec, 0, '='
    if string.find(spec, ' ', 1, true) then
      prio, delay, site = string.match(spec, '^(%S*) (%S*) (.*)$')
      delay = tonumber(delay) or 0
    end
    local score = order_score(prio, seq) -- (prio coerced once: cheaper than tonumber)
    local value = payloads[j] -- site '=': the node checked that its URL names its site
    if site ~= '=' then value = req_value(site, value) end
    if mine then
      -- leased as it is written: its ack, or the node's recovery, ends it like any lease
      held[#held + 1] = rid; held[#held + 1] = score .. '\t' .. rid .. '\t' .. value
      own[#own + 1] = j; own[#own + 1] = rid
      if call.counting then
        local name = site
        if name == '=' then name = site_of_payload(value) or '' end
        if name ~= '' then active_add(call, name, 1) end
      end
    elseif delay > 0 then
      reqs[#reqs + 1] = rid; reqs[#reqs + 1] = value
      zd[#zd + 1] = clock(call) + delay; zd[#zd + 1] = rid
      ds[#ds + 1] = rid; ds[#ds + 1] = score
    else
      zq[#zq + 1] = score; zq[#zq + 1] = rid .. '\t' .. value -- inline: no requests entry
    end
  end
  if #reqs > 0 then call_chunked('HSET', K.requests(P), reqs, 2) end
  local joined = 0
  if #zq > 0 then joined = call_chunked('ZADD', K.queue(P), zq, 2) end
  if #zd > 0 then
    call_chunked('ZADD', K.delayed(P), zd, 2)
    call_chunked('HSET', K.delayed_score(P), ds, 2)
  end
  if #held > 0 then call_chunked('HSET', held_key, held, 2) end
  return #zq / 2, filtered, #zd / 2, joined, own
end

-- dead letters (the ack of the same request may travel in this very call), fenced like acks:
-- one that ends a lease (rid ~= '') is written only while the node holds it. Returns stale
local function write_dead(call, held_key, d)
  local dead, stale = {}, 0
  for j = 1, d.n do
    local rid = d.rid[j]
    if rid == '' or redis.call('HEXISTS', held_key, rid) == 1 then
      dead[#dead + 1] = d.id[j]; dead[#dead + 1] = d.record[j]
    else
      stale = stale + 1
    end
  end
  if #dead > 0 then call_chunked('HSET', K.dead(call.P), dead, 2) end
  return stale
end

-- acks: only leases this node still holds count; the rest changes nothing. A site is read only
-- where a count or a waiting room needs it. Returns acked
local function ack(call, held_key, a)
  local rids = a.rid
  if not (call.counting or call.any_waiting) then
    -- the common case: one HDEL of the rids as they came, its count the acks that held
    return call_chunked('HDEL', held_key, rids, 1)
  end
  -- which are held: their sites' in-flight counts and waiting rooms need them
  local got = call_joined('HMGET', held_key, rids)
  local held, per_site = {}, {}
  for j, rid in ipairs(rids) do
    if got[j] then
      held[#held + 1] = rid
      local site = a.site[j]
      per_site[site] = (per_site[site] or 0) + 1
    end
  end
  if #held > 0 then call_chunked('HDEL', held_key, held, 1) end
  for site, n in pairs(per_site) do site_done(call, site, n) end
  return #held
end

-- how soon the next parked retry, waiting site or revisit falls due (ms, -1: none)
local function next_due(call, has_waiting, has_delayed, rv)
  local P = call.P
  local out = -1
  local side = {}
  if has_waiting then side[#side + 1] = K.waiting(P) end
  if has_delayed then side[#side + 1] = K.delayed(P) end
  if rv then side[#side + 1] = K.revisit(P) end -- [revisit]
  for _, key in ipairs(side) do
    local first = head_score(key)
    if first then
      local ms = math.max(0, first - clock(call))
      if out < 0 or ms < out then out = ms end
    end
  end
  return out
end

local function sync(keys, args)
  local call = new_call(keys[1])
  local P = call.P
  local a, at = named_args(args, ARGS.sync)
  local node = a.node
  local h = read_header(a.header, HEADERS.sync)
  if h.mn ~= '' then
    local found = fence(P, node, h.mp, h.mn)
    if found then return {'rewound', found} end
  end
  local sec = read_sections(args, at, h, SECTIONS.sync)
  if type(h.bloom) ~= 'table' then h.bloom = nil end
  local queue = K.queue(P)
  -- the queue's length, kept up to date below instead of asked again
  local qlen = redis.call('ZCARD', queue)
  local queued_before = qlen
  local has = side_keys(P)
  call.any_waiting, call.special = has.waiting or false, has.special or false
  call.counting = has.active or h.conc > 0 or h.rate > 0
  local rv = h.rv -- [revisit] the dupefilter's generation length (ms), or nil

  local held_key = K.held(P, node)
  local added, filtered, parked, own = 0, 0, 0, {}
  if sec.children.n > 0 then
    local joined
    added, filtered, parked, joined, own = push_children(call, h, sec.children, held_key)
    qlen = qlen + joined
  end
  -- feedback first: it changes site budgets outside the cache the acks and leases share
  local f = sec.feedback
  for j = 1, f.n do
    local throttled, slow = tonumber(f.throttled[j]) or 0, tonumber(f.slow[j]) or 0
    local hold = tonumber(f.hold[j]) or 0
    -- fine answers only raise a cut factor: with no cut in the shard they change nothing
    if throttled > 0 or slow > 0 or hold > 0 or has.cuts then
      feedback(call, f.site[j], tonumber(f.ok[j]) or 0, throttled, slow, clock(call), h,
        tonumber(f.newest[j]) or 0, hold)
    end
  end
  local stale, acked, revisited = 0, 0, 0
  if sec.dead.n > 0 then stale = write_dead(call, held_key, sec.dead) end
  if sec.acks.n > 0 then
    acked = ack(call, held_key, sec.acks)
    stale = stale + sec.acks.n - acked
  end
  if sec.revisits.n > 0 and rv then -- [revisit] acks of pages to visit again
    local done, late = revisit_acks(call, node, sec.revisits, clock(call), rv, h.bloom)
    revisited, acked, stale = done, acked + done, stale + late
  end
  if stale > 0 then redis.call('HINCRBY', K.counters(P), 'stale_acks', stale) end

  local promoted = 0
  if has.delayed then
    local n, moved = promote_due(P, clock(call), 500)
    promoted, qlen = n, qlen + moved
  end
  if rv then -- [revisit]
    local n, moved = promote_revisits(P, clock(call), 500)
    promoted, qlen = promoted + n, qlen + moved
  end
  local ls = new_lease(call, h, qlen)
  if h.paused ~= 1 and not has.paused then lease_requests(ls, has.waiting) end
  qlen = ls.qlen
  local leased = #ls.held / 2
  if leased > 0 then call_chunked('HSET', held_key, ls.held, 2) end
  if rv and leased > 0 then -- [revisit] leased: no longer behind schedule
    local granted = {}
    for j = 1, #ls.held, 2 do granted[#granted + 1] = ls.held[j] end
    call_chunked('ZREM', K.revisit_late(P), granted, 1)
  end
  save_budgets(call)
  status_add(P, STATUS_LEASES .. node, leased + #own / 2 - acked) -- [status registry]
  status_add(P, STATUS_WAITING, ls.into_wait) -- [status registry]
  if h.idle == 1 or (sec.children.n > 0 and queued_before == 0) then
    publish_wake(h.wake, h.shard, added + promoted)
  end
  local due = next_due(call, has.waiting or ls.into_wait > 0, has.delayed or parked > 0, rv)
  local head = {}
  if qlen > 0 then head = redis.call('ZRANGE', queue, 0, 0, 'WITHSCORES') end
  local at_head = 0
  if #head == 2 then
    -- how many share the head's priority: a node's next lease takes those before lower ones
    local bound = order_score(priority_of(tonumber(head[2])) - 1, 0)
    at_head = redis.call('ZCOUNT', queue, '-inf', '(' .. string.format('%.17g', bound))
  end
  local events = {}
  for _, e in ipairs(call.site_events) do
    for _, v in ipairs(e) do events[#events + 1] = v end
  end
  return {added, filtered, parked, acked, stale, ls.lines, due, ls.paced, qlen, head[2] or '',
    at_head, events, revisited, own}
end
