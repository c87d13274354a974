--[[ sync: one node's flush to one shard. A node pipelines the calls of all the shards it has
work for into one round trip.

KEYS[1]  the shard's prefix
ARGV     node, header, then the sections the header counts, each column by column
         (SECTIONS.sync); a header field left out takes its default (HEADERS.sync)
  header    JSON. children, groups, grouped, acks, dead, feedback, revisits: the sections'
            record counts; lease: how many requests to lease (0: none), floor: none of a
            lower priority; above, extra: then up to `extra` more only of a priority higher
            than `above`; read: 1 to tell the queue's length and levels even if the call
            neither pushes nor leases; live: live nodes (a node takes at most queued / live);
            idle: 1 while some node sleeps (publish new work); wake, shard: the wake channel
            and what to publish on it; paused: 1 when the control slot says so; rate, conc,
            burst, adaptive, recover: the site budget defaults (see budgets); bloom: [m, k]
            with the Bloom dupefilter; [revisit] rv: the dupefilter's generation length (ms);
            for a fenced node mp, mn (the mark it wrote last here, its next one) and tag (into
            the rids of its children); flagged: 1 when a child's spec starts with "d" or "l";
            ls: the state of the dupefilter's buckets ("L.split") the node grouped the
            children with, order: the node's index of each grouped child (4 hex digits each)
  children  fp h spec payload: requests to push. fp "" = none; exact dupefilter: fp the
            fingerprint's first 8 bytes as a signed decimal, h its low 32 bits; bloom: fp the
            binary fingerprint, h "". spec "[d][l]prio[ delay_ms site]": "d" = dont_filter;
            "l" = the node's own: it already works on it, so it is written as its lease (into
            K.held of the node, as a lease of the queue's would be), never queued; delay 0
            and site "=" (the payload's URL names it) when left out. A filtered child is
            never read beyond fp, h and the first byte of its spec
  groups    bucket size: the exact dupefilter's buckets the grouped children fall in (state
            ls), each followed by that many of them
  grouped   fp spec payload: children as above (never flagged), in the order of their groups;
            a call sends either these or children
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
Returns one flat list: added, filtered, parked, acked, stale, next_due_ms, queued, revisited,
state, leased, paced, site_events, own, then levels. Lists are joined with "\0" into one
string ('' when empty): leased the lines "<priority>\t<rid>\t<value>" (a list instead where a
line holds a "\0"), paced the leased rids that spent a rate token, site_events site,
'cut'|'recovered', factor before, factor after, reason ('throttled'|'slow', or the ms since the
cut) for each, own the index among the children and the rid of each "l" child written (one
missing was filtered: the node drops it, or counts that it fetched a URL already seen).
next_due_ms is how soon a parked retry, waiting site or revisit falls due (-1: none), queued
the queue's length after the call (-1: a call that neither read, pushed nor leased, which does
not look at it), state the state of the dupefilter's buckets after the call ("L.split", ''
where no child was checked), levels the best LEVELS_TOLD priorities queued, each followed by
how many requests it holds. ]]
--- @include "args"
--- @include "util"
--- @include "sites"
--- @include "budgets"
--- @include "dupefilter"
--- @include "revisit"
--- @include "levels"
--- @include "queues"
--- @include "lease"
--- @include "fencing"
--- @include "status"
--- @include "acks"

-- Which children are new: one dupefilter check for the batch. The `grouped` form (g: the
-- groups' buckets and sizes; h.order the node's order of the children, 4 hex digits each)
-- checks each group with one command; the `children` form finds each fingerprint's bucket
-- here. Returns the positions kept (fresh, or marked "d": dont_filter), in the node's order,
-- how many were filtered, the node's index of each position (grouped form), and the state of
-- the buckets after
local function check_children(call, h, c, g)
  local P = call.P
  local fresh, state, index
  if g then
    fresh, state = seen_grouped(P, g.bucket, g.size, c.fp, h.ls)
    if not fresh then fresh, state = seen_add(P, c.fp, EMPTY, nil) end -- its state went on
  elseif h.rv then
    fresh = revisit_dupefilter(P, c.fp, c.h, h.bloom, h.rv, clock(call)) -- [revisit]
  else
    fresh, state = dupefilter(P, c.fp, c.h, h.bloom, nil)
  end
  local specs, flagged = c.spec, h.flagged == 1 -- some spec starts with 'd' or 'l'
  if g then flagged = false end -- (grouped children are never flagged)
  local kept, n = {}, 0
  for j = 1, c.n do
    if fresh[j] or (flagged and string.byte(specs[j], 1) == 100) then
      n = n + 1
      kept[n] = j
    end
  end
  if g and n > 0 then
    -- back to the node's order (first in, first out within a priority): each kept position
    -- in the slot of its node's index, then the slots read in order
    local order, slots = h.order, {}
    index = {}
    for k = 1, n do
      local j = kept[k]
      local i = tonumber(string.sub(order, 4 * j - 3, 4 * j), 16) + 1
      index[j], slots[i] = i, j
    end
    if n > 1 then
      local k = 0
      for i = 1, c.n do
        local j = slots[i]
        if j then
          k = k + 1
          kept[k] = j
        end
      end
    end
  end
  return kept, c.n - n, index, state
end

-- The kept children pushed: one RPUSH per priority, their values inline. Returns how many were
-- queued and parked, and the rids of the node's own children written into its held hash
-- (flat: the node's index of the child, rid)
local function push_children(call, h, c, kept, index, held_key, lv)
  local P = call.P
  local own = {}
  if #kept == 0 then return 0, 0, own end
  local specs, payloads, flagged = c.spec, c.payload, h.flagged == 1
  local seq0 = new_seqs(P, #kept)
  local queued, reqs, zd, dp, held = new_batch(), {}, {}, {}, {}
  local n_queued = 0
  for n = 1, #kept do
    local j = kept[n]
    local rid = make_rid(seq0 + n, h.tag)
    local spec, value = specs[j], payloads[j]
    local mine = false
    if flagged then
      local first = string.byte(spec, 1)
      if first == 100 then -- 'd'
        spec = string.sub(spec, 2)
        first = string.byte(spec, 1)
      end
      mine = first == 108 -- 'l'
      if mine then spec = string.sub(spec, 2) end
    end
    local prio, delay, site = spec, 0, '='
    if string.find(spec, ' ', 1, true) then
      prio, delay, site = string.match(spec, '^(%S*) (%S*) (.*)$')
      delay = tonumber(delay) or 0
    end
    local l = level_of(lv, prio)
    -- site '=': the node checked that the payload's URL names its site
    if site ~= '=' then value = req_value(site, value) end
    if mine then
      -- leased as it is written: its ack, or the node's recovery, ends it like any lease
      held[#held + 1] = rid; held[#held + 1] = l.name .. '\t' .. rid .. '\t' .. value
      own[#own + 1] = index and index[j] or j; own[#own + 1] = rid
      if call.counting then
        local name = site
        if name == '=' then name = site_of_payload(value) or '' end
        if name ~= '' then active_add(call, name, 1) end
      end
    elseif delay > 0 then
      reqs[#reqs + 1] = rid; reqs[#reqs + 1] = value
      zd[#zd + 1] = clock(call) + delay; zd[#zd + 1] = rid
      dp[#dp + 1] = rid; dp[#dp + 1] = l.name
    else
      batch_add(queued, l, rid .. '\t' .. value) -- inline: no requests entry
      n_queued = n_queued + 1
    end
  end
  push_batch(lv, queued, false)
  if #reqs > 0 then call_chunked('HSET', key_of(call, 'requests'), reqs, 2) end
  if #zd > 0 then
    call_chunked('ZADD', key_of(call, 'delayed'), zd, 2)
    call_chunked('HSET', key_of(call, 'delayed_priority'), dp, 2)
  end
  if #held > 0 then call_chunked('HSET', held_key, held, 2) end
  return n_queued, #zd / 2, own
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
  local has = side_keys(call)
  call.any_waiting, call.special = has.waiting or false, has.special or false
  call.counting = has.active or h.conc > 0 or h.rate > 0
  local rv = h.rv -- [revisit] the dupefilter's generation length (ms), or nil
  -- the queue's levels, read once where the call pushes, promotes or leases
  local lv
  local pushing = sec.children.n > 0 or sec.grouped.n > 0
  if h.read == 1 or pushing or h.lease > 0 or h.extra > 0 or has.delayed or rv then
    lv = read_levels(call)
  end
  local queued_before = lv and lv.total

  local held_key = key_of(call, 'held', node)
  local added, filtered, parked, own, state = 0, 0, 0, EMPTY, ''
  local c, g = sec.children, nil
  if sec.grouped.n > 0 then c, g = sec.grouped, sec.groups end
  if c.n > 0 then
    local kept, index
    kept, filtered, index, state = check_children(call, h, c, g)
    added, parked, own = push_children(call, h, c, kept, index, held_key, lv)
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
  if has.delayed then promoted = promote_due(P, lv, clock(call), 500) end
  if rv then promoted = promoted + promote_revisits(P, lv, clock(call), 500) end -- [revisit]
  local leased, ls = 0, nil
  if lv then
    ls = new_lease(call, h, lv)
    if h.paused ~= 1 and not has.paused then lease_requests(ls, has.waiting) end
    leased = #ls.held / 2
    if leased > 0 then call_chunked('HSET', held_key, ls.held, 2) end
    if rv and leased > 0 then -- [revisit] leased: no longer behind schedule
      local granted = {}
      for j = 1, #ls.held, 2 do granted[#granted + 1] = ls.held[j] end
      call_chunked('ZREM', K.revisit_late(P), granted, 1)
    end
    save_levels(lv)
  end
  save_budgets(call)
  status_add(P, STATUS_LEASES .. node, leased + #own / 2 - acked) -- [status registry]
  if ls then status_add(P, STATUS_WAITING, ls.into_wait) end -- [status registry]
  if h.idle == 1 or (pushing and queued_before == 0) then
    publish_wake(h.wake, h.shard, added + promoted)
  end
  local into_wait = ls and ls.into_wait or 0
  local due = next_due(call, has.waiting or into_wait > 0, has.delayed or parked > 0, rv)
  -- one flat reply, lists joined with "\0": each element of a reply costs the script
  local out = {added, filtered, parked, acked, stale, due, -1, revisited, state or '', '', '',
    '', ''}
  if ls then out[10], out[11] = lease_reply(ls), table.concat(ls.paced, '\0') end
  local events = rawget(call, 'site_events')
  if events and #events > 0 then
    local flat = {}
    for _, e in ipairs(events) do
      for _, v in ipairs(e) do flat[#flat + 1] = v end
    end
    out[12] = table.concat(flat, '\0')
  end
  if #own > 0 then out[13] = table.concat(own, '\0') end
  if lv then
    out[7] = lv.total
    tell_levels(lv, out)
  end
  return out
end
