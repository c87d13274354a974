--[[
distcrawl frontier: the whole Redis protocol of the crawl in one script.

Every key of a crawl shares the hash tag {S} (S = spider name), so all of them live in one
hash slot and every command below is atomic, also on Redis Cluster. P below is "{S}".

  P:queue            ZSET  rid -> order score. Lowest score leaves first. The score is
                           -priority * 1e10 + seq, so higher priority first and, within one
                           priority, first in first out (seq grows with every accepted request).
  P:req              HASH  rid -> request JSON (the payload; never pickle)
  P:seq              STRING counter for rids and FIFO order
  P:dupefilter       SET   request fingerprints: recorded when a request is first accepted
  P:leases:<node>    ZSET  rid -> order score: requests handed to <node> and not yet acked.
                           A request lives in exactly one of queue / delayed / some leases set.
  P:nodes            ZSET  node -> last heartbeat (ms, Redis server clock)
  P:node:<node>      HASH  node info and its latest stats snapshot (JSON), written by heartbeats;
                           `dead_since` once recovered, `stopped_at` after a clean stop (both
                           then expire after a day)
  P:delayed          ZSET  rid -> due time (ms, server clock): parked retries
  P:delayed:score    HASH  rid -> the order score the request takes when it falls due
  P:dead             HASH  dead-letter id -> JSON record (request, reason, attempts, times, node)
  P:seeding:<node>   LIST  raw seeds taken from the start list by <node>, not yet in the frontier
  P:rejected         LIST  refused seeds and queue entries, JSON {raw, reason, at, node}; bounded
  P:pages:<site>     STRING pages the site has cost the cluster (the page budget, counted by
                           the nodes' PageLimitsMiddleware in reservations of a few pages)
  P:counters         HASH  crawl-wide counters kept by the script itself: requeued_dead_letters,
                           stale_acks (acks and dead letters for leases the node did not hold),
                           recovered_nodes (nodes declared dead by `recover`)
  P:paused           STRING present while the cluster is paused: no new leases are handed out
  P:req:site         HASH  rid -> site (host) of the request, for the per-site budget. A lease
                           of a request with a site took one slot (`active`) of that site, and
                           every way out of the lease (ack, release, recover, a grant without
                           payload) frees exactly that one slot; dead letters requeued get theirs
  P:site:<site>      HASH  the site's shared budget: tokens, ts (last refill, ms), active
                           (requests in flight on all nodes), factor (adaptive slow-down, 0-1],
                           cut_at (ms of the last cut), limit_rate / limit_conc (per-site limits
                           written by nodes from their settings and site profiles); while a
                           cut lasts also fts (ms the factor was set), recover_ms (a cut wears
                           off linearly: from 0 to 1 in recover_ms, idle or not) and base_rate
                           (the requests/s the factor applies to, for status)
  P:wait:<site>      ZSET  rid -> order score: requests taken off the queue while their site was
                           out of budget; they wait here, in priority order, without blocking
                           other sites and without being polled
  P:waiting          ZSET  site -> ms when the site may admit its next waiting request
  P:idle             SET   nodes whose last lease request got nothing: they sleep until a
                           message on the channel P:wake (or their poll backs off to 1 s)
  P:wake             channel: published when work arrives for idle nodes (links pushed,
                           leases returned or recovered, the cluster resumed)
  START              LIST  the user-facing seed list (e.g. catalog:start_urls; LPUSH to add)

Call: EVALSHA sha 1 P <command> <args...>. Node-specific keys are derived from P inside the
script (same hash tag, same slot). Times come from the server clock (TIME), so nodes with
skewed clocks still agree on heartbeats and due times.

Commands
  sync node n_children [fp, prio, dont_filter, delay_ms, site, payload]*n
       n_acks [rid]*n  n_dead [id, record, rid]*n  n_rejected [record]*n
       seeds_done(0|1) lease_n rate conc burst adaptive_rate recover_ms
       n_feedback [site, ok, throttled, slow]*n
       One round trip per flush: pushes children (dupefilter checked and recorded here),
       parks delayed ones, acks finished leases, writes dead letters and rejected entries,
       clears the node's seeding list, promotes due retries, heart-beats, applies the
       nodes' per-site feedback (429/503 or slow answers halve a site's shared rate, answers
       that are fine raise it again gradually), and leases up to lease_n requests (none
       while paused). A request whose site is out of budget (token bucket of `rate` per
       second and `burst` tokens, at most `conc` in flight cluster-wide; 0 = no limit;
       per-site limit_rate / limit_conc override) moves to P:wait:<site> instead; sites
       whose wait is over are served first. From the queue a node takes at most its share,
       queued / live nodes (rounded up), so a shallow queue is spread over the nodes. A node
       that asked for leases and got none joins P:idle; pushed links and due retries then
       wake the idle nodes through P:wake.
       Acks and dead letters are fenced: they count only for a lease <node> still holds (a
       dead letter with rid '' is written as is); any other is ignored but counted (stale,
       P:counters stale_acks), so a node presumed dead that was not changes nothing with its
       late reports, and the request's new holder finds its payload and site slot intact.
       Returns {added, filtered, parked, acked, {rid, payload, ...}, next_due_ms, paced,
       stale, site_events}:
       next_due_ms is how soon a parked retry or a waiting site falls due (-1: none); paced
       lists the leased rids that spent a rate token: the node sends them first, since their
       token is for now; site_events lists the adaptive cuts this call made and the cuts it
       found worn off, flat: site, 'cut'|'recovered', factor before, factor after, reason
       ('throttled'|'slow', or the ms since the cut), for the node's log.
  take_token site rate burst adaptive_rate
       Spends one of the site's tokens, at once and into debt if need be, for a request that
       never was in the queue (robots.txt fetched by a node's middleware).
  take_seeds node n start_key
       Moves up to n raw seeds from START to P:seeding:<node> (first pushed, first taken).
  release node start_key [rid]*
       Returns the given leases of <node> (all of them when none are named) to the queue with
       their order score, and its seeding list to the front of START. Clean stops and restarts.
  recover node timeout_ms start_key
       For every node (other than <node>) whose heartbeat is older than timeout_ms: returns its
       leases and seeds as `release` does and forgets the node. Atomic, so two live nodes
       racing to recover the same dead node recover each request once. Recovers nobody while
       the Redis server has been up for less than timeout_ms (INFO uptime): after a restart
       every heartbeat is old, so silence is measured from the server's start only (and each
       node waits timeout_ms after an outage it saw before it recovers anyone). Counts
       recovered_nodes in P:counters. Returns {nodes, reqs}.
  heartbeat node info_json
  drained start_key
       Returns {queued (incl. waiting for their site), delayed, leased, seeding, start}:
       all zero means nothing is left.
  requeue_dead max [id]*
       Moves dead letters (the named ones, or up to max) back to the queue (fresh order score,
       priority from the record) with their site in P:req:site (the record's `site`, else the
       host of its `url`), so they go through the site's budget like any request. Returns the
       number moved.
]]

local P = KEYS[1]
local cmd = ARGV[1]

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function order_score(prio)
  local seq = redis.call('INCR', P .. ':seq')
  return -prio * 1e10 + seq, seq
end

-- a request leaves a node (acked or returned): its site has one request fewer in flight
local function site_done(rid, requeued)
  local site = redis.call('HGET', P .. ':req:site', rid)
  if not site then return end
  local k = P .. ':site:' .. site
  if tonumber(redis.call('HINCRBY', k, 'active', -1)) < 0 then redis.call('HSET', k, 'active', 0) end
  if not requeued then redis.call('HDEL', P .. ':req:site', rid) end
  if redis.call('EXISTS', P .. ':wait:' .. site) == 1 then
    redis.call('ZADD', P .. ':waiting', 'LT', 0, site)  -- a slot is free: serve it now
  end
end

-- the site (host) of a dead-letter record: written by the node, else taken from its URL
local function record_site(decoded)
  if type(decoded['site']) == 'string' and decoded['site'] ~= '' then return decoded['site'] end
  if type(decoded['url']) ~= 'string' then return nil end
  local host = string.match(decoded['url'], '^%a[%w+.-]*://([^/?#]*)')
  if not host then return nil end
  host = string.gsub(host, '^.*@', '')
  local v6 = string.match(host, '^%[([^%]]*)%]')
  if v6 then host = v6 else host = string.gsub(host, ':%d*$', '') end
  host = string.lower(host)
  if host == '' then return nil end
  return host
end

-- work arrived: wake the nodes sleeping for lack of it (one message, however many sleep;
-- they register again when their next lease still finds nothing)
local function wake_idle(n)
  if n > 0 and redis.call('SCARD', P .. ':idle') > 0 then
    redis.call('DEL', P .. ':idle')
    redis.call('PUBLISH', P .. ':wake', n)
  end
end

local function release(node, start_key, rids)
  local leases = P .. ':leases:' .. node
  local moved = 0
  if #rids == 0 then
    local all = redis.call('ZRANGE', leases, 0, -1, 'WITHSCORES')
    for i = 1, #all, 2 do
      redis.call('ZADD', P .. ':queue', all[i + 1], all[i])
      site_done(all[i], true)
      moved = moved + 1
    end
    redis.call('DEL', leases)
  else
    for _, rid in ipairs(rids) do
      local score = redis.call('ZSCORE', leases, rid)
      if score then
        redis.call('ZREM', leases, rid)
        redis.call('ZADD', P .. ':queue', score, rid)
        site_done(rid, true)
        moved = moved + 1
      end
    end
  end
  local seeding = P .. ':seeding:' .. node
  if #rids == 0 then
    -- seeds were taken oldest first; push them back so the oldest is taken first again
    local seeds = redis.call('LRANGE', seeding, 0, -1)
    for i = #seeds, 1, -1 do
      redis.call('RPUSH', start_key, seeds[i])
    end
    redis.call('DEL', seeding)
    moved = moved + #seeds
    redis.call('SREM', P .. ':idle', node)
  end
  wake_idle(moved)
  return moved
end

local function promote_due(now, limit)
  local due = redis.call('ZRANGEBYSCORE', P .. ':delayed', '-inf', now, 'LIMIT', 0, limit)
  for _, rid in ipairs(due) do
    local score = redis.call('HGET', P .. ':delayed:score', rid)
    redis.call('ZREM', P .. ':delayed', rid)
    redis.call('HDEL', P .. ':delayed:score', rid)
    redis.call('ZADD', P .. ':queue', score or 0, rid)
  end
  return #due
end

-- adaptive cuts made or worn off during this call (see `sync`'s return)
local site_events = {}

-- A site's adaptive factor now. A cut wears off with time, linearly (from 0 back to 1 in
-- recover_ms), whether requests of the site come by or not: a cut must not outlive the crawl
-- that caused it. Once back at 1 the cut is forgotten and reported as recovered.
-- (A cut stored before cuts wore off has no recover_ms or fts: it wears off from its cut_at
-- over the default DISTCRAWL_SITE_RECOVERY, 120 s.)
local function site_factor(site, factor, fts, recover_ms, cut_at, now)
  local f = tonumber(factor)
  if not f then return 1 end
  local rec = tonumber(recover_ms) or 120000
  local since_ms = now - (tonumber(fts) or tonumber(cut_at) or now)
  local recovered = f
  if rec > 0 then recovered = f + since_ms / rec end
  if recovered < 1 then return recovered end
  redis.call('HDEL', P .. ':site:' .. site, 'factor', 'fts', 'cut_at', 'recover_ms', 'base_rate')
  local since = now - (tonumber(cut_at) or now)
  site_events[#site_events + 1] = {site, 'recovered', factor, '1', tostring(since)}
  return 1
end

-- may `site` start one more request now? Returns true, or false and when to look again (ms)
local function admit(site, now, def_rate, def_conc, burst, adaptive_rate)
  local k = P .. ':site:' .. site
  local st = redis.call('HMGET', k, 'tokens', 'ts', 'active', 'factor', 'limit_rate', 'limit_conc',
    'fts', 'recover_ms', 'cut_at')
  local rate = tonumber(st[5]) or def_rate
  local conc = tonumber(st[6]) or def_conc
  local factor = site_factor(site, st[4], st[7], st[8], st[9], now)
  local active = tonumber(st[3]) or 0
  if conc > 0 and active >= conc then return false, now + 1000 end
  if rate <= 0 and factor < 1 then rate = adaptive_rate end
  if rate > 0 then
    rate = rate * factor
    local tokens = tonumber(st[1]) or burst
    local ts = tonumber(st[2]) or now
    tokens = math.min(burst, tokens + (now - ts) * rate / 1000)
    if tokens < 1 then
      redis.call('HSET', k, 'tokens', tostring(tokens), 'ts', now)
      return false, now + math.ceil((1 - tokens) * 1000 / rate)
    end
    redis.call('HSET', k, 'tokens', tostring(tokens - 1), 'ts', now, 'active', active + 1)
    return true, now, true
  end
  redis.call('HSET', k, 'active', active + 1)
  return true, now, false
end

local function feedback(site, ok, throttled, slow, now, def_rate, adaptive_rate, recover_ms)
  local k = P .. ':site:' .. site
  local st = redis.call('HMGET', k, 'factor', 'cut_at', 'fts', 'recover_ms', 'limit_rate')
  local cut_at = tonumber(st[2]) or 0
  local factor = site_factor(site, st[1], st[3], st[4], st[2], now)
  if throttled > 0 or slow > 0 then
    if now - cut_at >= 1000 then
      local cut, why = 0.8, 'slow'
      if throttled > 0 then cut, why = 0.5, 'throttled' end
      local rate = tonumber(st[5]) or def_rate
      if rate <= 0 then rate = adaptive_rate end
      local new = tostring(math.max(0.05, factor * cut))
      redis.call('HSET', k, 'factor', new, 'fts', now, 'cut_at', now, 'recover_ms', recover_ms,
        'base_rate', tostring(rate))
      site_events[#site_events + 1] = {site, 'cut', tostring(factor), new, why}
    end
  elseif ok > 0 and factor < 1 then
    local new = factor + 0.01 * ok
    if new >= 1 then
      redis.call('HDEL', k, 'factor', 'fts', 'cut_at', 'recover_ms', 'base_rate')
      site_events[#site_events + 1] = {site, 'recovered', tostring(factor), '1',
        tostring(now - cut_at)}
    else
      redis.call('HSET', k, 'factor', tostring(new), 'fts', now)
    end
  end
end

if cmd == 'sync' then
  local node = ARGV[2]
  local now = now_ms()
  local i = 3
  local added, filtered, parked, acked = 0, 0, 0, 0
  local n = tonumber(ARGV[i]); i = i + 1
  for _ = 1, n do
    local fp, prio, dont_filter, delay, site, payload =
      ARGV[i], tonumber(ARGV[i + 1]), ARGV[i + 2], tonumber(ARGV[i + 3]), ARGV[i + 4], ARGV[i + 5]
    i = i + 6
    local fresh = 1
    if fp ~= '' then fresh = redis.call('SADD', P .. ':dupefilter', fp) end
    if fresh == 0 and dont_filter ~= '1' then
      filtered = filtered + 1
    else
      local score, seq = order_score(prio)
      local rid = tostring(seq)
      redis.call('HSET', P .. ':req', rid, payload)
      if site ~= '' then redis.call('HSET', P .. ':req:site', rid, site) end
      if delay > 0 then
        redis.call('ZADD', P .. ':delayed', now + delay, rid)
        redis.call('HSET', P .. ':delayed:score', rid, score)
        parked = parked + 1
      else
        redis.call('ZADD', P .. ':queue', score, rid)
        added = added + 1
      end
    end
  end
  local leases = P .. ':leases:' .. node
  -- fenced: an ack or a dead letter counts only for a lease this node still holds. A node
  -- presumed dead whose leases went to another node (or back to the queue) changes nothing
  -- with its late reports but the stale counter: the new holder's ack frees the site slot.
  local stale = 0
  local n_acks, acks_at = tonumber(ARGV[i]), i + 1
  i = acks_at + n_acks
  n = tonumber(ARGV[i]); i = i + 1
  for _ = 1, n do
    -- dead letters first: the ack of the same request may travel in this very call
    local rid = ARGV[i + 2]
    if rid == '' or redis.call('ZSCORE', leases, rid) then
      redis.call('HSET', P .. ':dead', ARGV[i], ARGV[i + 1])
    else
      stale = stale + 1
    end
    i = i + 3
  end
  for j = acks_at, acks_at + n_acks - 1 do
    local rid = ARGV[j]
    if redis.call('ZREM', leases, rid) == 1 then
      acked = acked + 1
      site_done(rid, false)
      redis.call('HDEL', P .. ':req', rid)
    else
      stale = stale + 1
    end
  end
  if stale > 0 then redis.call('HINCRBY', P .. ':counters', 'stale_acks', stale) end
  n = tonumber(ARGV[i]); i = i + 1
  for _ = 1, n do
    redis.call('LPUSH', P .. ':rejected', ARGV[i])
    i = i + 1
  end
  if n > 0 then redis.call('LTRIM', P .. ':rejected', 0, 9999) end
  if ARGV[i] == '1' then redis.call('DEL', P .. ':seeding:' .. node) end
  local lease_n = tonumber(ARGV[i + 1])
  local def_rate, def_conc = tonumber(ARGV[i + 2]), tonumber(ARGV[i + 3])
  local burst, adaptive_rate = tonumber(ARGV[i + 4]), tonumber(ARGV[i + 5])
  local recover_ms = tonumber(ARGV[i + 6])
  i = i + 7
  n = tonumber(ARGV[i]); i = i + 1
  for _ = 1, n do
    feedback(ARGV[i], tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2]), tonumber(ARGV[i + 3]), now,
      def_rate, adaptive_rate, recover_ms)
    i = i + 4
  end
  redis.call('ZADD', P .. ':nodes', now, node)
  local promoted = promote_due(now, 500)
  local out, paced = {}, {}
  local function grant(rid, score, spent_token)
    local payload = redis.call('HGET', P .. ':req', rid)
    if payload then
      if spent_token then paced[#paced + 1] = rid end
      redis.call('ZADD', leases, score, rid)
      out[#out + 1] = rid
      out[#out + 1] = payload
    else
      -- a request without its payload (a reset dropped it): undo exactly what admit took
      local site = redis.call('HGET', P .. ':req:site', rid)
      if site and spent_token then
        redis.call('HINCRBYFLOAT', P .. ':site:' .. site, 'tokens', 1)
      end
      site_done(rid, false)
    end
  end
  if lease_n > 0 and redis.call('EXISTS', P .. ':paused') == 0 then
    -- first the sites whose wait is over, oldest wait first
    local due = redis.call('ZRANGEBYSCORE', P .. ':waiting', '-inf', now, 'LIMIT', 0, 64)
    for _, site in ipairs(due) do
      while #out < 2 * lease_n do
        local head = redis.call('ZRANGE', P .. ':wait:' .. site, 0, 0, 'WITHSCORES')
        if #head == 0 then
          redis.call('ZREM', P .. ':waiting', site)
          break
        end
        local ok, again, spent = admit(site, now, def_rate, def_conc, burst, adaptive_rate)
        if not ok then
          redis.call('ZADD', P .. ':waiting', again, site)
          break
        end
        redis.call('ZREM', P .. ':wait:' .. site, head[1])
        grant(head[1], head[2], spent)
      end
    end
    -- then the queue; requests of sites out of budget step aside into their site's wait.
    -- While the queue is shallow (a crawl widening from one seed, or draining) a node takes
    -- its fair share only: the node that found the links would otherwise lease them all
    -- and hold half in its prefetch buffer while the other nodes idle.
    local live = math.max(1, redis.call('ZCARD', P .. ':nodes'))
    local share = math.max(1, math.ceil(redis.call('ZCARD', P .. ':queue') / live))
    local want = math.min(lease_n, #out / 2 + share)
    local looked = 0
    while #out < 2 * want and looked < 4 * lease_n do
      local popped = redis.call('ZPOPMIN', P .. ':queue', want - #out / 2)
      if #popped == 0 then break end
      for j = 1, #popped, 2 do
        local rid, score = popped[j], popped[j + 1]
        looked = looked + 1
        local site = redis.call('HGET', P .. ':req:site', rid)
        local ok, again, spent = true, now, false
        if site then ok, again, spent = admit(site, now, def_rate, def_conc, burst, adaptive_rate) end
        if ok then
          grant(rid, score, spent)
        else
          redis.call('ZADD', P .. ':wait:' .. site, score, rid)
          redis.call('ZADD', P .. ':waiting', 'NX', again, site)
        end
      end
    end
  end
  if lease_n > 0 then
    if #out == 0 then
      redis.call('SADD', P .. ':idle', node)
    else
      redis.call('SREM', P .. ':idle', node)
    end
  end
  wake_idle(added + promoted)
  -- when the next parked retry or waiting site falls due, so an idle node sleeps just that long
  local next_due = -1
  for _, key in ipairs({P .. ':waiting', P .. ':delayed'}) do
    local first = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
    if #first == 2 then
      local ms = math.max(0, tonumber(first[2]) - now)
      if next_due < 0 or ms < next_due then next_due = ms end
    end
  end
  local events = {}
  for _, e in ipairs(site_events) do
    for _, v in ipairs(e) do events[#events + 1] = v end
  end
  return {added, filtered, parked, acked, out, next_due, paced, stale, events}

elseif cmd == 'take_token' then
  -- A request that never was in the queue (robots.txt) spends a token at once, going into
  -- debt if need be: it must not wait, since the node holds that site's leased requests until
  -- robots.txt is in, and would then send them in one burst. The queue pays the debt back.
  local site, def_rate, burst = ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
  local k = P .. ':site:' .. site
  local now = now_ms()
  local st = redis.call('HMGET', k, 'tokens', 'ts', 'limit_rate', 'factor', 'fts', 'recover_ms',
    'cut_at')
  local rate = (tonumber(st[3]) or def_rate) * site_factor(site, st[4], st[5], st[6], st[7], now)
  if rate <= 0 then return 0 end
  local tokens = tonumber(st[1]) or burst
  tokens = math.min(burst, tokens + (now - (tonumber(st[2]) or now)) * rate / 1000)
  redis.call('HSET', k, 'tokens', tostring(tokens - 1), 'ts', now)
  return 0

elseif cmd == 'take_seeds' then
  local node, n, start_key = ARGV[2], tonumber(ARGV[3]), ARGV[4]
  -- heart-beat too: seeds held by a node that is not in P:nodes would escape recovery
  redis.call('ZADD', P .. ':nodes', now_ms(), node)
  local taken = {}
  for _ = 1, n do
    local raw = redis.call('RPOP', start_key)
    if not raw then break end
    redis.call('RPUSH', P .. ':seeding:' .. node, raw)
    taken[#taken + 1] = raw
  end
  return taken

elseif cmd == 'release' then
  local node, start_key = ARGV[2], ARGV[3]
  local rids = {}
  for j = 4, #ARGV do rids[#rids + 1] = ARGV[j] end
  local moved = release(node, start_key, rids)
  if #rids == 0 then
    -- the node's last stats stay readable for a day (cluster totals), marked as stopped
    redis.call('ZREM', P .. ':nodes', node)
    if redis.call('EXISTS', P .. ':node:' .. node) == 1 then
      redis.call('HSET', P .. ':node:' .. node, 'stopped_at', now_ms())
      redis.call('PEXPIRE', P .. ':node:' .. node, 86400000)
    end
  end
  return moved

elseif cmd == 'recover' then
  local me, timeout, start_key = ARGV[2], tonumber(ARGV[3]), ARGV[4]
  local now = now_ms()
  -- Silence counts only from this server's start: after a restart (an outage, a failover)
  -- every heartbeat is old, and the nodes that are alive need time to beat again.
  local uptime = tonumber(string.match(redis.call('INFO', 'server'), 'uptime_in_seconds:(%d+)'))
  if uptime and uptime * 1000 < timeout then return {{}, 0} end
  local dead = redis.call('ZRANGEBYSCORE', P .. ':nodes', '-inf', now - timeout)
  local nodes, reqs = {}, 0
  for _, node in ipairs(dead) do
    if node ~= me then
      reqs = reqs + release(node, start_key, {})
      redis.call('ZREM', P .. ':nodes', node)
      redis.call('HSET', P .. ':node:' .. node, 'dead_since', now)
      redis.call('PEXPIRE', P .. ':node:' .. node, 86400000)
      nodes[#nodes + 1] = node
    end
  end
  if #nodes > 0 then redis.call('HINCRBY', P .. ':counters', 'recovered_nodes', #nodes) end
  return {nodes, reqs}

elseif cmd == 'heartbeat' then
  local node, info = ARGV[2], ARGV[3]
  local now = now_ms()
  redis.call('ZADD', P .. ':nodes', now, node)
  redis.call('HSET', P .. ':node:' .. node, 'info', info, 'heartbeat', now)
  redis.call('HDEL', P .. ':node:' .. node, 'dead_since', 'stopped_at')
  return now

elseif cmd == 'drained' then
  local start_key = ARGV[2]
  local leased, seeding = 0, 0
  local nodes = redis.call('ZRANGE', P .. ':nodes', 0, -1)
  for _, node in ipairs(nodes) do
    leased = leased + redis.call('ZCARD', P .. ':leases:' .. node)
    seeding = seeding + redis.call('LLEN', P .. ':seeding:' .. node)
  end
  local queued = redis.call('ZCARD', P .. ':queue')
  for _, site in ipairs(redis.call('ZRANGE', P .. ':waiting', 0, -1)) do
    queued = queued + redis.call('ZCARD', P .. ':wait:' .. site)
  end
  return {queued, redis.call('ZCARD', P .. ':delayed'), leased, seeding, redis.call('LLEN', start_key)}

elseif cmd == 'requeue_dead' then
  local max = tonumber(ARGV[2])
  local ids = {}
  for j = 3, #ARGV do ids[#ids + 1] = ARGV[j] end
  if #ids == 0 then
    local all = redis.call('HKEYS', P .. ':dead')
    for j = 1, math.min(max, #all) do ids[#ids + 1] = all[j] end
  end
  local moved = 0
  for _, id in ipairs(ids) do
    local record = redis.call('HGET', P .. ':dead', id)
    if record then
      local ok, decoded = pcall(cjson.decode, record)
      if ok and type(decoded) == 'table' and type(decoded['request']) == 'string' then
        local prio = tonumber(decoded['priority']) or 0
        local score, seq = order_score(prio)
        local rid = tostring(seq)
        redis.call('HSET', P .. ':req', rid, decoded['request'])
        -- back through the site's budget like any request (a site that failed is not flooded)
        local site = record_site(decoded)
        if site then redis.call('HSET', P .. ':req:site', rid, site) end
        redis.call('ZADD', P .. ':queue', score, rid)
        redis.call('HDEL', P .. ':dead', id)
        redis.call('HINCRBY', P .. ':counters', 'requeued_dead_letters', 1)
        moved = moved + 1
      end
    end
  end
  return moved
end

return redis.error_reply('distcrawl frontier: unknown command ' .. tostring(cmd))
