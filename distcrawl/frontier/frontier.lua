--[[
distcrawl frontier: the whole Redis protocol of the crawl in one script.

A crawl (S = spider name) is split into N shards (DISTCRAWL_SHARDS). A request belongs to the
shard of its site (crc32 of the host, modulo N), so everything about a site (its queue entries,
seen URLs, leases, parked retries, dead letters and politeness budget) shares one hash tag and
every command below stays atomic, also on Redis Cluster, where the shards spread over the
masters by their tags. Crawl-wide state lives in one control slot.

  C = "{S}"      the control slot
  Q = "{S:k.d}"  shard k (0 <= k < N), d five digits that put the tag on the middle slot of
                 the k-th of N equal slot ranges (keys.py); with N = 1 the one shard is "{S}"

Control slot
  C:nodes            ZSET  node -> last heartbeat (ms, Redis server clock)
  C:node:<node>      HASH  node info and its latest stats snapshot (JSON), written by heartbeats,
                           and `owner`, the process that claimed the node id (see `claim`);
                           `dead_since` once recovered, `stopped_at` after a clean stop (both
                           then expire after a day)
  C:recovering       ZSET  node -> ms: dead nodes claimed by a live node that is returning their
                           leases shard by shard; claimed again by anyone after a timeout
  C:seeding:<node>   LIST  raw seeds taken from the start list by <node>, not yet in the frontier
  C:rejected         LIST  refused seeds and queue entries, JSON {raw, reason, at, node}; bounded
  C:counters         HASH  crawl-wide counters: requeued_dead_letters, recovered_nodes (nodes
                           declared dead by `recover`)
  C:gone             ZSET  node -> ms it stopped cleanly or was claimed as dead, kept a day
                           [status registry]: the status finds their last stats without SCAN
  C:paused           STRING present while the cluster is paused (copied into every Q:paused)
  C:idle             SET   nodes whose last lease request got nothing in any shard they read
  C:wake             channel: "<shard>" published when work arrives in a shard that was empty
                           or while nodes are idle (links pushed, leases returned, resumed)
  C:pages:<site>     STRING pages the site has cost the cluster (PageLimitsMiddleware)
  C:robots:<netloc>  STRING robots.txt shared by the nodes (SharedRobotsTxt)
  START              LIST  the user-facing seed list (e.g. catalog:start_urls; LPUSH to add).
                           On Redis Cluster name it inside the control slot ({S}:start_urls).

Shard slot (per shard)
  Q:queue            ZSET  entry -> order score. Lowest score leaves first. The score is
                           -priority * 1e10 + seq: higher priority first and, within one
                           priority and one shard, first in first out. An entry is
                           "<rid>\t<value>" (a pushed child: its Q:req value inline, one
                           copy of the rid and no hash entry while it is queued) or a bare
                           rid whose value is in Q:req (a request back from a lease, a retry,
                           a revisit or a dead letter; and every entry of older versions).
                           A rid never holds a tab; a waiting request's value is in Q:req,
                           a leased one's in its node's Q:held
  Q:req              HASH  rid -> payload (compact request JSON, never pickle; codec.py), or
                           "<site>\n<payload>" when the payload's URL does not name its site,
                           for a request waiting, parked, revisited or queued as a bare rid.
                           A rid is "<seq>.<tag>": seq from Q:seq, tag chosen by the node that
                           pushed the request (new after every rewind it sees), so a rid stays
                           unique when Redis comes back with older state and Q:seq goes back
  Q:marks            HASH  node -> the mark its last sync of this shard wrote; a node that does
                           not find its last mark knows Redis lost its writes (restarted from
                           older data, a failover to a lagging replica, a reset). Cleared when
                           the node's leases are all released by its own clean stop or open;
                           a recovery writes a tombstone instead ("!<ms>.<id>", the same in
                           every shard), so that a node presumed dead is told so by the first shard
                           it calls, one it never called before included. With N = 1 this is
                           {S}:marks
  Q:seq              STRING counter for rids and FIFO order (one INCRBY per batch)
  Q:seen:<b>         SET   the exact dupefilter (the default): 64-bit request fingerprints as
                           integers (compact intsets), bucket b by linear hashing (see seen_add)
  Q:seen:info        HASH  L, split (the buckets' linear-hashing state), n (fingerprints seen)
  Q:bloom            STRING Bloom filter bits (DISTCRAWL_DUPEFILTER=bloom): k bits per URL at
                           (h1 + j * h2) mod m, h1 and h2 the first 8 bytes of the fingerprint;
                           created at its full size (m / 8 bytes) by its first write
  Q:held:<node>      HASH  rid -> "<order score>\t<rid>\t<value>" (the line its lease reply
                           carried): requests handed to <node> and not yet acked, each with
                           its Q:req value, so an ack is one HDEL. A request lives in
                           exactly one of queue / wait / delayed / a held hash
  Q:leases:<node>    ZSET  rid -> order score, the value in Q:req: the leases of versions before
                           2026-12-02, read by release, drained and reset (a node that died
                           holding them is recovered), never written
  Q:delayed          ZSET  rid -> due time (ms, server clock): parked retries
  Q:delayed:score    HASH  rid -> the order score the request takes when it falls due
  Q:dead             HASH  dead-letter id -> JSON record (request, reason, attempts, times, node)
  Q:counters         HASH  the shard's counters: stale_acks (acks and dead letters for leases
                           the node did not hold)
  Q:paused           STRING copy of C:paused (written by `control pause` in every shard)
  Q:site:<site>      HASH  the site's shared budget: tokens, ts (last refill, ms),
                           factor (adaptive slow-down, 0-1],
                           cut_at (ms of the last cut), limit_rate / limit_conc (per-site limits
                           written by nodes from their settings and site profiles); while a
                           cut lasts also fts (ms the factor was set), recover_ms (a cut wears
                           off linearly: from 0 to 1 in recover_ms, idle or not) and base_rate
                           (the requests/s the factor applies to, for status)
  Q:active           HASH  site -> requests of the site in flight on all nodes (no field: 0);
                           one read and one write per call for all the sites it touches.
                           Counted once a limit applies in the shard (a header's rate or conc
                           above 0, or a site's limits: set_site_limits creates the hash) and
                           from then on; a crawl without limits counts nothing
  Q:limits           SET   sites with a limit_rate or limit_conc of their own (set_site_limits):
                           with no default rate, a lease reads the budget hash only of these
                           and of the sites in Q:cuts
  Q:wait:<site>      ZSET  rid -> order score: requests taken off the queue while their site was
                           out of budget; they wait here, in priority order, without blocking
                           other sites and without being polled
  Q:waiting          ZSET  site -> ms when the site may admit its next waiting request
  Q:cuts             ZSET  site -> ms of its last adaptive cut, while the cut lasts (status
                           reads the latest cuts without a SCAN; a cut that wore off leaves
                           when a call next looks at the site)
  Q:revisit          ZSET  [revisit] "<priority>:<rid>" -> due time (ms): fetched pages that
                           come back as queued work when due (DISTCRAWL_REVISIT); the payload
                           stays in Q:req under its rid, with the validators (ETag,
                           Last-Modified), content hash and backoff of the page's last answer.
                           A request lives in one of queue / wait / delayed / leases / revisit
  Q:revisit:late     ZSET  [revisit] rid -> due time: revisits promoted to the queue and not
                           leased yet (how far behind schedule the crawl is)
  Q:seen:gen         STRING [revisit] the dupefilter's current generation, floor(now / rv)
  Q:seen:g<n>:<b>    SET   [revisit] the exact dupefilter of generation n (buckets and
  Q:seen:g<n>:info   HASH  info as Q:seen:<b>, Q:seen:info); Q:bloom:g<n> the Bloom filter's.
                           A URL is new when neither generation n nor n - 1 holds it: it is
                           forgotten rv to 2 rv after it was last recorded (at its first push,
                           and again at every revisit); older generations are dropped
  Q:status           HASH  [status registry] `waiting`: requests in the shard's waiting rooms;
                           `leases:<node>`: requests the node holds in this shard. The status
                           reads one hash per shard instead of a key per node or per site

Call: FCALL distcrawl_frontier_<hash> 1 Q|C <command> <args...> (control commands: FCALL ... 2
C START ...) where Redis has FUNCTION: store.py loads this file as a function library (it
registers `frontier`, defined at the end); else EVALSHA sha 1 Q|C ..., the file then ending in
a call of `frontier` with KEYS and ARGV. Either way every call starts from a fresh state.
Node-specific keys are derived from the prefix inside the script. Times come from the server
clock (TIME), so nodes with skewed clocks still agree on heartbeats and due times.

Shard commands (KEYS[1] = Q)
  sync node header [child]* [ack]* [dead]* [feedback]*
       One call per shard and flush; a node pipelines the calls of all shards it has work for
       into one round trip. `header` is JSON (a field left out takes its default): c, a, d,
       f (how many children, acks, dead letters and feedback records follow, in that order),
       lease (how many to lease, 0 = none), live (live nodes, for the fair share), idle (1:
       some node sleeps, publish new work), wake (the wake channel), paused (1: the control
       slot says so), rate, conc, burst, adaptive (the site budget defaults), recover (ms a
       cut takes to wear off), bloom ([m, k] when the Bloom dupefilter is on), [revisit] rv
       (the dupefilter's generation length in ms: revisit mode) and r (how many revisit
       records follow the feedback), and for a fenced node mp, mn (the mark it wrote last to
       this shard, its next one) and tag (into the rids of its children).
       First, unless mn is '': Q:marks[node] must be mp (or mn: a call that ran but whose
       reply was lost) or, with mp '' (the node's first sync of the shard), anything but a
       recovery's tombstone; else nothing is done and the reply is {'rewound', found}: the
       node forgets what it pushed, takes a new tag and reconciles its leases. A found
       tombstone ("!...") means the node was presumed dead: it heart-beats (a member again)
       before it sends the tombstone as mp to any shard. Records:
         child    fp h spec payload   (spec: "[d]prio[ delay_ms site]", "d" = dont_filter,
                  delay_ms 0 and site "=" when left out; site "=": the payload's URL names
                  it; fp "" = none; exact: fp the fingerprint's first 8 bytes as a signed
                  decimal and h its low 32 bits; bloom: fp the binary fingerprint, h ""; a
                  child filtered out is never parsed beyond fp, h and its first byte)
         ack      rid (all the acks' rids first, then their sites in the same order)
         dead     id record site rid   (rid: the lease it ends, "" = none)
         feedback site ok throttled slow
         revisit  rid site interval_ms payload fp h   [revisit] an ack whose request moves to
                  Q:revisit, due in interval_ms, with this payload; fp h recorded again
       Pushes children (dupefilter checked and recorded here), parks delayed ones, acks
       finished leases and writes dead letters, fenced: only for leases the node still holds (a
       late report from a node presumed dead changes nothing and counts as stale, in the
       shard's Q:counters stale_acks), applies the per-site
       feedback (429/503 or slow answers cut a site's shared rate, fine answers raise it),
       promotes due retries and leases up to `lease` requests (none while paused). A request
       whose site is out of budget (token bucket of `rate` per second and `burst` tokens, at
       most `conc` in flight cluster-wide; 0 = no limit; per-site limit_rate / limit_conc
       override) moves to Q:wait:<site>; sites whose wait is over are served first. A node
       takes at most its share of the shard, queued / live (rounded up).
       Returns {added, filtered, parked, acked, stale, leased, next_due_ms, paced, queued,
       head, at_head, site_events, revisited}. leased holds one string per leased request,
       "<order score>\t<rid>\t<value>", value as in Q:req (one reply element costs the script
       more than the concatenation): the node reads the site from "<site>\n" before the
       payload, else from the payload's URL, as the script does. site_events lists the
       adaptive cuts this call made and the cuts it found worn off, flat: site,
       'cut'|'recovered', factor before, factor after, reason ('throttled'|'slow', or the ms
       since the cut);
       next_due_ms is how soon a parked retry or a waiting site falls due (-1: none), paced
       lists the leased rids that spent a rate token, queued, head and at_head are the
       queue's length, best order score ("" when empty) and how many queued requests share
       the best priority, after the call.
  mark_seen options [fp h]*
       Records fingerprints in the shard's dupefilter (options: JSON, bloom as in sync).
       Returns how many were new.
  take_token site rate burst adaptive_rate
       Spends one of the site's tokens, at once and into debt if need be, for a request that
       never was in the queue (robots.txt fetched by a node's middleware).
  release node wake [rid]*
       Returns the given leases of <node> (all of them when none are named) to the queue with
       their order score. Clean stops, restarts, leases whose grant was lost.
  release_dead node wake tombstone
       Recovery of a node presumed dead: all its leases back to the queue, and the tombstone
       ("!<ms>.<id>", ms the recovery's time) as its mark (see Q:marks). Tombstones older
       than a day go (a node back after that long is told by the shards it called, whose
       marks are gone, but not by one it never called).
  drained node*
       Returns {queued (incl. waiting for their site), delayed, leased by the named nodes}.
  revisit_status grace_ms
       [revisit] Returns {scheduled, due within grace_ms, ms until the next revisit falls due
       ('' = none; < 0 = overdue, not promoted yet), ms the crawl is behind schedule (the
       oldest revisit due and not leased yet), revisits due and queued but not leased}.
  requeue_dead max tag [id]*
       Moves dead letters (the named ones, or up to max) back to the queue (fresh order score,
       priority from the record) through their site's budget. Returns the number moved.

Control commands (KEYS[1] = C, KEYS[2] = START)
  heartbeat node info_json idle(-1|0|1)
       Heart-beats, stores the node's info, and joins (1) or leaves (0) C:idle.
       Returns {now_ms, live nodes, idle nodes, paused(0|1)}.
  take_seeds node n
       Moves up to n raw seeds from START to C:seeding:<node> (first pushed, first taken).
  seeded node [rejected]*
       The node's seeds are in the shards: clears C:seeding:<node>; records rejected entries.
  stop node
       A clean stop: the seeding list back to the front of START, the node out of C:nodes.
  rejoin node
       At a node's open, after its claim: the seeding list an earlier run of it left goes back
       to the front of START, and the node stays in C:nodes (heart-beats), so that it is a
       member from before its first lease on: a node holding leases outside C:nodes would be
       seen neither by `recover` nor by `drained`.
  recover node timeout_ms
       Claims nobody while the Redis server has been up for less than timeout_ms (after a
       restart every heartbeat is old). Else claims every node (other than <node>) whose
       heartbeat is older than timeout_ms, and
       every claim older than timeout_ms: their seeds go back to START, they leave C:nodes and
       enter C:recovering. Atomic, so two live nodes never claim the same dead node. The caller
       then `release`s the claimed nodes' leases in every shard (each request once: `release`
       is atomic per shard) and calls `recovered`. Returns {nodes, seeds}.
  claim node owner_json timeout_ms force(0|1)
       At a node's open: makes owner_json (host, pid, run of the process) the owner of the
       node id in C:node:<node> `owner` and heart-beats, unless (without force) another owner
       heart-beat within timeout_ms: then returns {0, that owner, ms since its heartbeat} and
       the process refuses to start (or forces the claim once it knows the other is dead).
       Returns {1, previous owner or '', 0}.
  recovered node*
       Ends the claims.
  census
       Returns {seeding, start, {node*}}: seeds held by nodes, seeds waiting, the nodes, and
       the nodes claimed and not recovered yet (their leases are held until every shard has
       released them, and a claimer that died leaves them so until the claim is taken over).
]]

-- The call's keys and arguments, its key prefix and command: set by `frontier` (the end of
-- this file) at every call, like the per-call state below, so that the functions are made once
-- when the script runs as a Redis function library (store.py: FUNCTION LOAD, then FCALL) and
-- the whole file still runs as one EVAL script (where FUNCTION is missing: Redis before 7)
local KEYS, ARGV, P, cmd
local BATCH = 1000 -- most arguments handed to one command (Lua's unpack has a stack limit)
local TOMBSTONE_KEPT_MS = 86400000 -- a recovery's tombstone, in Q:marks, is kept a day

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- redis.call(verb, key, unpack(items)) in chunks of BATCH items (width items per record)
local function call_chunked(verb, key, items, width, extra)
  local n = #items
  local out = 0
  local i = 1
  while i <= n do
    local last = math.min(n, i + BATCH * width - 1)
    if extra then
      out = out + redis.call(verb, key, extra, unpack(items, i, last))
    else
      out = out + redis.call(verb, key, unpack(items, i, last))
    end
    i = last + 1
  end
  return out
end

-- redis.call(verb, key, ARGV[first], ..., ARGV[first + n - 1]) in chunks of BATCH; the sum
local function call_chunked_args(verb, key, first, n)
  local out = 0
  local k = 1
  while k <= n do
    local last = math.min(n, k + BATCH - 1)
    out = out + redis.call(verb, key, unpack(ARGV, first + k - 1, first + last - 1))
    k = last + 1
  end
  return out
end

-- the host of a payload's URL as the node names a site (lower case, no user, no port)
local function site_of_payload(payload)
  -- most URLs: a plain host name (no user, port or IPv6 literal), already in lower case
  local host = string.match(payload, '^{"u":"[%a][%w+.-]*://([%w.-]*)[/?#"\\]')
  if host then
    if string.find(host, '%u') then return string.lower(host) end
    return host
  end
  local netloc = string.match(payload, '^{"u":"[%a][%w+.-]*://([^/?#"\\]*)')
  if not netloc then return nil end
  netloc = string.match(netloc, '([^@]*)$')
  local v6 = string.match(netloc, '^%[([^%]]*)%]')
  if v6 then return string.lower(v6) end
  return string.lower((string.gsub(netloc, ':%d*$', '')))
end

-- what Q:req holds for a request: the payload alone when its URL names its site, else
-- "<site>\n<payload>" (a payload starts with "{", a site never does)
local function req_value(site, payload)
  if string.byte(payload, 1) == 123 and site_of_payload(payload) == site then return payload end
  return site .. '\n' .. payload
end

local function split_req(value)
  if string.byte(value, 1) == 123 then return site_of_payload(value) or '', value end
  local cut = string.find(value, '\n', 1, true)
  -- anything else (a hostile entry written by hand) is handed over whole, to be refused
  if not cut or string.byte(value, cut + 1) ~= 123 then return '', value end
  return string.sub(value, 1, cut - 1), string.sub(value, cut + 1)
end

-- Requests in flight per site, cluster-wide: Q:active (site -> n; no field: 0), read and
-- written once per call for all the sites it touches (not once per site). Counted only once a
-- limit has applied in the shard (a node's default `conc` or `rate`, a site's limits of its own,
-- whose set_site_limits creates Q:active): Q:active exists from then on, and so the counting
-- goes on. A crawl without limits counts nothing per request (nothing would read the counts
-- but the status).
local ACTIVE         -- P .. ':active'
local counting       -- whether this call counts (nil: Q:active not asked yet)
local act            -- site -> its count in Q:active as read by this call
local act_delta      -- site -> what this call changed
local act_dirty

-- only where a concurrency limit needs it
local function active_of(site)
  local n = act[site]
  if n == nil then
    n = tonumber(redis.call('HGET', ACTIVE, site)) or 0
    act[site] = n
  end
  return n + (act_delta[site] or 0)
end

local function active_add(site, n)
  if counting == nil then counting = redis.call('EXISTS', ACTIVE) == 1 end
  if not counting then return end
  act_delta[site] = (act_delta[site] or 0) + n
  act_dirty = true
end

local function save_active()
  if not act_dirty then return end
  local unknown = {}
  for site, d in pairs(act_delta) do
    if d ~= 0 and act[site] == nil then unknown[#unknown + 1] = site end
  end
  local i = 1
  while i <= #unknown do
    local last = math.min(#unknown, i + BATCH - 1)
    local got = redis.call('HMGET', ACTIVE, unpack(unknown, i, last))
    for j = i, last do act[unknown[j]] = tonumber(got[j - i + 1]) or 0 end
    i = last + 1
  end
  local set = {}
  for site, d in pairs(act_delta) do
    if d ~= 0 then
      local n = math.max(0, act[site] + d) -- never below zero
      act[site] = n
      set[#set + 1] = site; set[#set + 1] = n
    end
  end
  act_delta, act_dirty = {}, false
  -- (a site back at 0 keeps its field: one command, and less than the hash per site it was)
  if #set > 0 then call_chunked('HSET', ACTIVE, set, 2) end
end

-- Sites whose budget hash holds something a lease must read while the default rate is 0:
-- per-site limits (Q:limits, written with them) or an adaptive cut (Q:cuts). Other sites are
-- admitted without reading their hash.
local special     -- whether the shard has any such site (sync reads it: side_keys)
local special_of  -- site -> true / false

local function mark_special(sites)
  if not special then return end
  local ask = {}
  for _, site in ipairs(sites) do
    if special_of[site] == nil and site ~= '' then ask[#ask + 1] = site end
  end
  if #ask == 0 then return end
  local i = 1
  while i <= #ask do
    local last = math.min(#ask, i + BATCH - 1)
    local lim = redis.call('SMISMEMBER', P .. ':limits', unpack(ask, i, last))
    local cut = redis.call('ZMSCORE', P .. ':cuts', unpack(ask, i, last))
    for j = i, last do special_of[ask[j]] = lim[j - i + 1] == 1 or cut[j - i + 1] ~= false end
    i = last + 1
  end
end

local function is_special(site)
  if not special then return false end
  if special_of[site] == nil then mark_special({site}) end
  return special_of[site] == true
end

-- the site budgets touched by this call, read once and written back once
local budgets -- site -> its budget as read by this call

local function budget(site)
  local b = budgets[site]
  if not b then
    local k = P .. ':site:' .. site
    local st = redis.call('HMGET', k, 'tokens', 'ts', 'factor', 'limit_rate', 'limit_conc')
    b = {tokens = tonumber(st[1]), ts = tonumber(st[2]), cut = st[3],
      limit_rate = tonumber(st[4]), limit_conc = tonumber(st[5]), dirty = false}
    if b.cut then
      -- the rest of a cut only when there is one (most sites have none)
      local c = redis.call('HMGET', k, 'fts', 'recover_ms', 'cut_at')
      b.fts, b.recover_ms, b.cut_at = c[1], c[2], c[3]
    end
    budgets[site] = b
  end
  return b
end

local function save_budgets()
  for site, b in pairs(budgets) do
    if b.dirty and b.tokens then
      redis.call('HSET', P .. ':site:' .. site, 'tokens', tostring(b.tokens), 'ts', b.ts)
    end
  end
  save_active()
end

-- whether the shard has sites waiting for budget (read once per call: a site's waiting
-- room is never without its entry in Q:waiting, and most calls find none)
local any_waiting -- (nil: not asked yet)

-- `count` requests of `site` left the nodes (acked or returned): slots free up
local function site_done(site, count)
  if site == '' then return end
  active_add(site, -count)
  if any_waiting == nil then any_waiting = redis.call('EXISTS', P .. ':waiting') == 1 end
  if any_waiting and redis.call('EXISTS', P .. ':wait:' .. site) == 1 then
    redis.call('ZADD', P .. ':waiting', 'LT', 0, site) -- a slot is free: serve it now
  end
end

-- adaptive cuts made or worn off during this call (see `sync`'s return)
local site_events

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
  redis.call('ZREM', P .. ':cuts', site) -- [status registry]
  local since = now - (tonumber(cut_at) or now)
  site_events[#site_events + 1] = {site, 'recovered', factor, '1', tostring(since)}
  return 1
end

-- the cached budget's factor now (a cut worn off is forgotten once, here)
local function budget_factor(site, b, now)
  local f = site_factor(site, b.cut, b.fts, b.recover_ms, b.cut_at, now)
  if f >= 1 then b.cut = nil end
  return f
end

-- may `site` start one more request now? Returns true, or false and when to look again (ms)
local function admit(site, now, def_rate, def_conc, burst, adaptive_rate)
  -- a site's budget hash only where it can matter: a default rate, or limits or a cut of its own
  local b = nil
  if def_rate > 0 or is_special(site) then b = budget(site) end
  local rate, conc, factor = def_rate, def_conc, 1
  if b then
    rate, conc = b.limit_rate or def_rate, b.limit_conc or def_conc
  end
  if conc > 0 and active_of(site) >= conc then return false, now + 1000 end
  if b then factor = budget_factor(site, b, now) end
  if rate <= 0 and factor < 1 then rate = adaptive_rate end
  if rate > 0 then
    rate = rate * factor
    local tokens = b.tokens or burst
    tokens = math.min(burst, tokens + (now - (b.ts or now)) * rate / 1000)
    b.ts = now
    b.dirty = true
    if tokens < 1 then
      b.tokens = tokens
      return false, now + math.ceil((1 - tokens) * 1000 / rate)
    end
    b.tokens = tokens - 1
    active_add(site, 1)
    return true, now, true
  end
  active_add(site, 1)
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
      redis.call('ZADD', P .. ':cuts', now, site) -- [status registry]
      site_events[#site_events + 1] = {site, 'cut', tostring(factor), new, why}
    end
  elseif ok > 0 and factor < 1 then
    local new = factor + 0.01 * ok
    if new >= 1 then
      redis.call('HDEL', k, 'factor', 'fts', 'cut_at', 'recover_ms', 'base_rate')
      redis.call('ZREM', P .. ':cuts', site) -- [status registry]
      site_events[#site_events + 1] = {site, 'recovered', tostring(factor), '1',
        tostring(now - cut_at)}
    else
      redis.call('HSET', k, 'factor', tostring(new), 'fts', now)
    end
  end
end

-- seq alone repeats when Redis comes back with older state; the writer's tag (changed by a
-- node whenever it sees its own writes gone) keeps every rid unique anyway
local function make_rid(seq, tag)
  if tag == nil or tag == '' then return string.format('%d', seq) end
  return string.format('%d.%s', seq, tag) -- one string, not two ('%d': no float formatting)
end

-- new rids for n requests: one INCRBY per batch; seq also orders them within a priority
local function new_seqs(n)
  return redis.call('INCRBY', P .. ':seq', n) - n
end

local function publish_wake(channel, n)
  if n > 0 and channel and channel ~= '' then
    redis.call('PUBLISH', channel, string.match(P, ':(%d+)[.%d]*}$') or '0')
  end
end

-- the Bloom filter's bit offsets of a fingerprint (first 8 bytes: h1, h2)
local function bloom_offsets(fp, m, k)
  local a, b, c, d, e, f, g, h = string.byte(fp, 1, 8)
  local h1 = ((a * 256 + b) * 256 + c) * 256 + d
  local h2 = ((e * 256 + f) * 256 + g) * 256 + h
  if h2 % 2 == 0 then h2 = h2 + 1 end
  local offs = {}
  for j = 0, k - 1 do offs[j + 1] = (h1 + j * h2) % m end
  return offs
end

-- The exact dupefilter: fingerprints as 64-bit integers (decimal strings, so Redis keeps
-- them in compact intsets of 8 bytes each) in buckets Q:seen:<b>, grown by linear hashing
-- so a bucket holds SEEN_SPLIT fingerprints on average (intsets stay compact up to 512).
-- The bucket of a fingerprint comes from its low 32 bits (h): b = h mod 2^L, or
-- h mod 2^(L+1) for buckets already split (b < split). Q:seen:info holds L, split, count.
local SEEN_SPLIT = 200

local function low32(dec)
  local neg = string.byte(dec, 1) == 45
  local acc = 0
  local first = 1
  if neg then first = 2 end
  for i = first, #dec do acc = (acc * 10 + string.byte(dec, i) - 48) % 4294967296 end
  if neg and acc ~= 0 then acc = 4294967296 - acc end
  return acc
end

-- h mod `mod` (a power of two up to 2^26) of a fingerprint in decimal, as low32(dec) % mod:
-- from two numbers of at most 10 digits each, exact in a double (what a split reads of
-- every member of the bucket it splits: a digit loop costs several times more)
local function low_bits(dec, mod)
  if mod <= 32768 then
    -- mod divides 10^15 (10^9 when mod <= 2^9), so the last 15 (9) digits decide: one
    -- string.byte and Horner's rule on the character codes, exact in a double, less than
    -- half of what a substring and tonumber cost (a number of 15 digits or fewer is read
    -- whole: Lua's % of a negative one is the two's complement's, as here)
    local n = #dec
    if n <= 15 then return tonumber(dec) % mod end
    local r
    if mod <= 512 then
      local a, b, c, d, e, f, g, h, i = string.byte(dec, n - 8, n)
      -- the character codes' share: 48 * 111111111 (5333333328)
      r = (((((((((a * 10 + b) * 10 + c) * 10 + d) * 10 + e) * 10 + f) * 10 + g) * 10 + h)
        * 10 + i) - 5333333328) % mod
    else
      local a, b, c, d, e, f, g, h, i, j, k, l, m, o, q = string.byte(dec, n - 14, n)
      -- (below 2^53 all along; 48 * 111111111111111 is 5333333333333328)
      r = (((((((((((((((a * 10 + b) * 10 + c) * 10 + d) * 10 + e) * 10 + f) * 10 + g) * 10
        + h) * 10 + i) * 10 + j) * 10 + k) * 10 + l) * 10 + m) * 10 + o) * 10 + q)
        - 5333333333333328) % mod
    end
    if r ~= 0 and string.byte(dec, 1) == 45 then r = mod - r end
    return r
  end
  if mod > 67108864 then return low32(dec) % mod end
  local neg = string.byte(dec, 1) == 45
  if neg then dec = string.sub(dec, 2) end
  local n = #dec
  local r
  if n > 10 then
    r = ((tonumber(string.sub(dec, 1, n - 10)) % mod) * (1e10 % mod)
      + tonumber(string.sub(dec, n - 9))) % mod
  else
    r = tonumber(dec) % mod
  end
  if neg and r ~= 0 then r = mod - r end
  return r
end

-- Bucket key names ("<base>:<b>") by base and bucket number: a number's decimal costs Lua
-- ~4,000 instructions, a table read ~100. Kept between calls where the script runs as a
-- function library (made again per call as an EVAL script); at most NAMES_MAX of them
local NAMES, NAMES_N, NAMES_MAX = {}, 0, 20000

local function bucket_key(base, b)
  local names = NAMES[base]
  if not names then
    names = {}
    NAMES[base] = names
  end
  local key = names[b]
  if not key then
    if NAMES_N >= NAMES_MAX then
      NAMES, NAMES_N, names = {}, 0, {}
      NAMES[base] = names
    end
    key = base .. ':' .. string.format('%d', b)
    names[b] = key
    NAMES_N = NAMES_N + 1
  end
  return key
end

-- a fingerprint's low 32 bits as the node sent them ("" where it did not: read from fp)
local function low_of(h, fp)
  if h and h ~= '' then return h + 0 end -- coerced once: cheaper than tonumber's two reads
  return low32(fp)
end

-- SMISMEMBER then SADD of the new ones: two commands per bucket touched, not one per URL
local function seen_add(fps, hs, base)
  base = base or (P .. ':seen') -- [revisit] a generation's own buckets
  local fresh = {}
  local info = base .. ':info'
  local st = redis.call('HMGET', info, 'L', 'split', 'n')
  local level, split, count = tonumber(st[1]) or 0, tonumber(st[2]) or 0, tonumber(st[3]) or 0
  local size = 2 ^ level
  local added = 0
  -- a bucket's first fingerprint by its index, a table of them only from a second one on
  -- (most buckets get one: a shard's buckets outnumber a call's links)
  local first, groups, order = {}, {}, {}
  for idx, fp in ipairs(fps) do
    if fp ~= '' then
      local h = low_of(hs[idx], fp)
      local b = h % size
      if b < split then b = h % (2 * size) end
      local one = first[b]
      if not one then
        first[b] = idx
        order[#order + 1] = b
      else
        local g = groups[b]
        if g then g[#g + 1] = idx else groups[b] = {one, idx} end
      end
    end
  end
  for _, b in ipairs(order) do
    local g = groups[b]
    local key = bucket_key(base, b)
    if not g then
      local one = first[b]
      if redis.call('SADD', key, fps[one]) == 1 then
        fresh[one] = true
        added = added + 1
      end
    else
      local new, in_batch = {}, {}
      local k = 1
      while k <= #g do
        local last = math.min(#g, k + BATCH - 1)
        local members = {}
        for j = k, last do members[#members + 1] = fps[g[j]] end
        local hit = redis.call('SMISMEMBER', key, unpack(members))
        for j = k, last do
          local fp = fps[g[j]]
          if hit[j - k + 1] == 0 and not in_batch[fp] then
            in_batch[fp] = true
            fresh[g[j]] = true
            new[#new + 1] = fp
          end
        end
        k = last + 1
      end
      if #new > 0 then
        call_chunked('SADD', key, new, 1)
        added = added + #new
      end
    end
  end
  if added == 0 then return fresh end
  count = count + added
  while count > SEEN_SPLIT * (size + split) do
    -- split bucket `split` into itself and split + 2^L by the next bit of h
    local src = bucket_key(base, split)
    local move = {}
    for _, m in ipairs(redis.call('SMEMBERS', src)) do
      if low_bits(m, 2 * size) ~= split then move[#move + 1] = m end
    end
    if #move > 0 then
      call_chunked('SREM', src, move, 1)
      call_chunked('SADD', bucket_key(base, split + size), move, 1)
    end
    split = split + 1
    if split == size then
      level, split, size = level + 1, 0, size * 2
    end
  end
  redis.call('HSET', info, 'L', level, 'split', split, 'n', count)
  return fresh
end

-- which of the fingerprints are new; records them. Returns a table i -> true for fresh ones
-- ([revisit] gen: the dupefilter generation to record them in; nil = the one dupefilter)
local function dupefilter(fps, hs, bloom, gen)
  local fresh = {}
  if #fps == 0 then return fresh end
  local in_batch = {}
  if bloom then
    local m, k = tonumber(bloom[1]), tonumber(bloom[2])
    local key = P .. ':bloom'
    if gen then key = key .. ':g' .. gen end
    local gets, sets, offsets = {}, {}, {}
    for i, fp in ipairs(fps) do
      if #fp >= 8 then
        offsets[i] = bloom_offsets(fp, m, k)
        for _, o in ipairs(offsets[i]) do
          gets[#gets + 1] = 'GET'; gets[#gets + 1] = 'u1'; gets[#gets + 1] = o
        end
      end
    end
    local bits = {}
    local i = 1
    while i <= #gets do
      local last = math.min(#gets, i + 3 * BATCH - 1)
      local got = redis.call('BITFIELD', key, unpack(gets, i, last))
      for _, v in ipairs(got) do bits[#bits + 1] = v end
      i = last + 1
    end
    local pos = 0
    for idx, fp in ipairs(fps) do
      if offsets[idx] then
        local all = true
        for _ = 1, k do
          pos = pos + 1
          if bits[pos] == 0 then all = false end
        end
        if not all and not in_batch[fp] then
          fresh[idx] = true
          for _, o in ipairs(offsets[idx]) do
            sets[#sets + 1] = 'SET'; sets[#sets + 1] = 'u1'; sets[#sets + 1] = o
            sets[#sets + 1] = 1
          end
        end
        in_batch[fp] = true
      elseif fp ~= '' then
        fresh[idx] = true
      end
    end
    if #sets > 0 and redis.call('EXISTS', key) == 0 then
      -- created at its full size once: a string grown by BITFIELD at rising offsets is
      -- over-allocated (up to twice its length)
      redis.call('SETRANGE', key, math.ceil(m / 8) - 1, '\0')
    end
    i = 1
    while i <= #sets do
      local last = math.min(#sets, i + 4 * BATCH - 1)
      redis.call('BITFIELD', key, unpack(sets, i, last))
      i = last + 1
    end
    return fresh
  end
  if gen then return seen_add(fps, hs, P .. ':seen:g' .. gen) end
  return seen_add(fps, hs)
end

-- [status registries] kept for `scrapy status` and the progress line, which read
-- O(shards + nodes + top sites) keys and never SCAN. Per batch, never per request.
local function status_add(field, n)
  if n == 0 then return end
  if redis.call('HINCRBY', P .. ':status', field, n) <= 0 then
    redis.call('HDEL', P .. ':status', field)
  end
end

local function mark_gone(node, now)
  redis.call('ZADD', P .. ':gone', now, node)
  redis.call('ZREMRANGEBYSCORE', P .. ':gone', '-inf', now - 86400000)
end
-- [/status registries]

local function release(node, rids)
  local held = P .. ':held:' .. node
  local leases = P .. ':leases:' .. node -- older versions' leases (values in Q:req)
  local zadd, reqs, per_site = {}, {}, {}
  local n = 0
  -- back to the queue as a bare rid, its value in Q:req (a value-less one is dropped by take)
  local function back(rid, score, value)
    n = n + 1
    zadd[#zadd + 1] = score; zadd[#zadd + 1] = rid
    if value then
      reqs[#reqs + 1] = rid; reqs[#reqs + 1] = value
      local site = split_req(value)
      per_site[site] = (per_site[site] or 0) + 1
    end
  end
  local mine, old = {}, {}
  if #rids == 0 then
    local all = redis.call('HGETALL', held)
    for i = 1, #all, 2 do mine[#mine + 1] = {all[i], all[i + 1]} end
    local zs = redis.call('ZRANGE', leases, 0, -1, 'WITHSCORES')
    for i = 1, #zs, 2 do old[#old + 1] = {zs[i], zs[i + 1]} end
  else
    local got = {}
    local i = 1
    while i <= #rids do
      local last = math.min(#rids, i + BATCH - 1)
      for _, v in ipairs(redis.call('HMGET', held, unpack(rids, i, last))) do got[#got + 1] = v end
      i = last + 1
    end
    for j, rid in ipairs(rids) do
      if got[j] then
        mine[#mine + 1] = {rid, got[j]}
      else
        local score = redis.call('ZSCORE', leases, rid)
        if score then old[#old + 1] = {rid, score} end
      end
    end
  end
  if #mine == 0 and #old == 0 then return 0 end
  local gone = {}
  for _, e in ipairs(mine) do
    local score, value = string.match(e[2], '^([^\t]*)\t[^\t]*\t(.*)$')
    if score and tonumber(score) then
      back(e[1], score, value)
    else
      n = n + 1 -- not written by this script (by hand): nothing to return
    end
    gone[#gone + 1] = e[1]
  end
  if #old > 0 then
    local ids = {}
    for j, e in ipairs(old) do ids[j] = e[1] end
    local values = {}
    local i = 1
    while i <= #ids do
      local last = math.min(#ids, i + BATCH - 1)
      for _, v in ipairs(redis.call('HMGET', P .. ':req', unpack(ids, i, last))) do
        values[#values + 1] = v
      end
      i = last + 1
    end
    for j, e in ipairs(old) do
      n = n + 1
      zadd[#zadd + 1] = e[2]; zadd[#zadd + 1] = e[1] -- its value stays in Q:req
      if values[j] then
        local site = split_req(values[j])
        per_site[site] = (per_site[site] or 0) + 1
      end
    end
    call_chunked('ZREM', leases, ids, 1)
  end
  if #gone > 0 then call_chunked('HDEL', held, gone, 1) end
  if #reqs > 0 then call_chunked('HSET', P .. ':req', reqs, 2) end
  call_chunked('ZADD', P .. ':queue', zadd, 2)
  for site, count in pairs(per_site) do site_done(site, count) end
  save_budgets()
  if #rids == 0 then
    redis.call('HDEL', P .. ':status', 'leases:' .. node) -- [status registry]
  else
    status_add('leases:' .. node, -n) -- [status registry]
  end
  return n
end

-- the site (host) of a dead-letter record: written by the node, else taken from its URL
local function record_site(decoded)
  if type(decoded['site']) == 'string' and decoded['site'] ~= '' then return decoded['site'] end
  if type(decoded['url']) ~= 'string' then return '' end
  return site_of_payload('{"u":"' .. decoded['url']) or ''
end

-- due retries into the queue; returns how many moved and how many joined the queue
local function promote_due(now, limit)
  local due = redis.call('ZRANGEBYSCORE', P .. ':delayed', '-inf', now, 'LIMIT', 0, limit)
  if #due == 0 then return 0, 0 end
  local scores = redis.call('HMGET', P .. ':delayed:score', unpack(due))
  local zadd = {}
  for j, rid in ipairs(due) do
    zadd[#zadd + 1] = scores[j] or 0; zadd[#zadd + 1] = rid
  end
  redis.call('ZREM', P .. ':delayed', unpack(due))
  redis.call('HDEL', P .. ':delayed:score', unpack(due))
  return #due, redis.call('ZADD', P .. ':queue', unpack(zadd))
end

-- which of the shard's waiting rooms, parked retries, pause flag, per-site limits, adaptive
-- cuts and in-flight counts exist: one EXISTS of the six, as most calls of a crawl without
-- limits find none; else one more, key j named 2^(j-1) times, whose count says which
local SIDE = {'waiting', 'delayed', 'paused', 'limits', 'cuts', 'active'}
local function side_keys()
  local keys = {}
  for j, name in ipairs(SIDE) do keys[j] = P .. ':' .. name end
  local n = redis.call('EXISTS', unpack(keys))
  if n == 0 then return false, false, false, false, false, false end
  local args = {}
  for j, key in ipairs(keys) do
    for _ = 1, 2 ^ (j - 1) do args[#args + 1] = key end
  end
  n = redis.call('EXISTS', unpack(args))
  local out = {}
  for j = 1, #SIDE do
    out[j] = n % 2 == 1
    n = math.floor(n / 2)
  end
  return out[1], out[2], out[3], out[4] or out[5], out[6], out[5]
end

local function head_score(key)
  local first = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
  if #first == 2 then return tonumber(first[2]) end
  return nil
end

-- [revisit] -----------------------------------------------------------------------------------
-- Scheduled re-crawls (DISTCRAWL_REVISIT). Nothing in this section runs unless a call's header
-- carries rv (the dupefilter's generation length, ms): a crawl without the setting keeps the
-- keys and the work of the sections above, call for call.

-- the dupefilter generation of `now`, and the generations before the previous one dropped
-- (a URL recorded in generation g is known until g + 2 begins: for rv to 2 * rv)
local function revisit_generation(rv, now)
  local gen = math.floor(now / rv)
  local cur = tonumber(redis.call('GET', P .. ':seen:gen'))
  if cur == gen then return gen end
  if cur and cur > gen then return gen end -- a node with a shorter DISTCRAWL_REVISIT_FORGET
  if cur then
    for g = cur - 1, cur do
      if g < gen - 1 then
        local base = P .. ':seen:g' .. g
        local st = redis.call('HMGET', base .. ':info', 'L', 'split')
        local n = 2 ^ (tonumber(st[1]) or 0) + (tonumber(st[2]) or 0)
        local drop = {P .. ':bloom:g' .. g}
        for b = 0, n - 1 do drop[#drop + 1] = bucket_key(base, b) end
        call_chunked('UNLINK', base .. ':info', drop, 1)
      end
    end
  end
  redis.call('SET', P .. ':seen:gen', gen)
  return gen
end

-- which fingerprints generation g already holds (read only): a table i -> true
local function generation_has(fps, hs, bloom, g)
  local found = {}
  if bloom then
    local m, k = tonumber(bloom[1]), tonumber(bloom[2])
    local key = P .. ':bloom:g' .. g
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
  local base = P .. ':seen:g' .. g
  local st = redis.call('HMGET', base .. ':info', 'L', 'split')
  if not st[1] and not st[2] then return found end
  local size, split = 2 ^ (tonumber(st[1]) or 0), tonumber(st[2]) or 0
  for idx, fp in ipairs(fps) do
    if fp ~= '' then
      local h = low_of(hs[idx], fp)
      local b = h % size
      if b < split then b = h % (2 * size) end
      if redis.call('SISMEMBER', bucket_key(base, b), fp) == 1 then found[idx] = true end
    end
  end
  return found
end

-- the dupefilter that forgets: new = in neither the current generation nor the previous one;
-- recorded in the current one
local function revisit_dupefilter(fps, hs, bloom, rv, now)
  local fresh = {}
  if #fps == 0 then return fresh end
  local gen = revisit_generation(rv, now)
  local known = generation_has(fps, hs, bloom, gen - 1)
  local sub_fps, sub_hs, map = {}, {}, {}
  for idx, fp in ipairs(fps) do
    if fp ~= '' and not known[idx] then
      sub_fps[#sub_fps + 1] = fp
      sub_hs[#sub_hs + 1] = hs[idx]
      map[#sub_fps] = idx
    end
  end
  for j in pairs(dupefilter(sub_fps, sub_hs, bloom, gen)) do fresh[map[j]] = true end
  return fresh
end

-- acks of pages to visit again (records `rid site interval_ms payload fp h` from ARGV[first]):
-- fenced like acks; a held lease leaves the node for Q:revisit, due in interval_ms, with the
-- new payload (the validators of the page's last answer) in Q:req, and its fingerprint is
-- recorded again in the current dupefilter generation. Returns acked, stale.
local function revisit_acks(node, first, n, now, rv, bloom)
  local leases = P .. ':held:' .. node
  local rids = {}
  for j = 1, n do rids[j] = ARGV[first + (j - 1) * 6] end
  local held, reqs, due, fps, hs, per_site = {}, {}, {}, {}, {}, {}
  local k = 1
  while k <= n do
    local last = math.min(n, k + BATCH - 1)
    local entries = redis.call('HMGET', leases, unpack(rids, k, last))
    for j = k, last do
      local entry = entries[j - k + 1]
      local score = entry and string.match(entry, '^[^\t]*')
      if score then
        local base = first + (j - 1) * 6
        local rid, site = rids[j], ARGV[base + 1]
        local prio = -math.floor(tonumber(score) / 1e10)
        held[#held + 1] = rid
        reqs[#reqs + 1] = rid; reqs[#reqs + 1] = req_value(site, ARGV[base + 3])
        due[#due + 1] = now + (tonumber(ARGV[base + 2]) or 0)
        due[#due + 1] = string.format('%d', prio) .. ':' .. rid
        fps[#fps + 1] = ARGV[base + 4]; hs[#hs + 1] = ARGV[base + 5]
        per_site[site] = (per_site[site] or 0) + 1
      end
    end
    k = last + 1
  end
  if #held > 0 then
    call_chunked('HDEL', leases, held, 1)
    call_chunked('HSET', P .. ':req', reqs, 2)
    call_chunked('ZADD', P .. ':revisit', due, 2)
    for site, count in pairs(per_site) do site_done(site, count) end
    dupefilter(fps, hs, bloom, revisit_generation(rv, now))
    -- (their leases leave the status registry with the acks: counted in `acked`)
  end
  return #held, n - #held
end

-- revisits fallen due go to the queue, in priority order (a fresh seq: first due, first out
-- within a priority) and through their site's budget like any request; Q:revisit:late keeps
-- their due time until they are leased (status: how far behind schedule the crawl is).
-- Returns how many moved and how many joined the queue.
local function promote_revisits(now, limit)
  local due = redis.call('ZRANGEBYSCORE', P .. ':revisit', '-inf', now, 'WITHSCORES', 'LIMIT', 0,
    limit)
  local n = #due / 2
  if n == 0 then return 0, 0 end
  local seq0 = new_seqs(n)
  local zq, zl, members = {}, {}, {}
  for j = 1, n do
    local member = due[2 * j - 1]
    local cut = string.find(member, ':', 1, true)
    local prio, rid = 0, member
    if cut then prio, rid = tonumber(string.sub(member, 1, cut - 1)) or 0, string.sub(member, cut + 1) end
    members[j] = member
    zq[#zq + 1] = -prio * 1e10 + seq0 + j; zq[#zq + 1] = rid
    zl[#zl + 1] = due[2 * j]; zl[#zl + 1] = rid
  end
  call_chunked('ZREM', P .. ':revisit', members, 1)
  local joined = call_chunked('ZADD', P .. ':queue', zq, 2)
  call_chunked('ZADD', P .. ':revisit:late', zl, 2)
  return n, joined
end
-- [/revisit] ----------------------------------------------------------------------------------

local function sync_command()
  local node = ARGV[2]
  local h = cjson.decode(ARGV[3])
  local mark_prev, mark_new = h['mp'] or '', h['mn'] or ''
  if mark_new ~= '' then
    -- this node's last write to this shard must be here; if not, Redis came back with older
    -- state: nothing is done
    local cur = redis.call('HGET', P .. ':marks', node)
    if cur ~= mark_prev and cur ~= mark_new
        and (mark_prev ~= '' or (cur and string.byte(cur) == 33)) then -- 33: '!', a tombstone
      return {'rewound', cur or ''}
    end
    redis.call('HSET', P .. ':marks', node, mark_new)
  end
  local tag = h['tag'] or ''
  -- the server's clock, read once and only by a call that needs it (most need none)
  local now
  local function clock()
    if not now then now = now_ms() end
    return now
  end
  local i = 4
  local added, filtered, parked, acked, stale = 0, 0, 0, 0, 0
  local queue = P .. ':queue'
  -- the queue's length, kept up to date below instead of asked again
  local qlen = redis.call('ZCARD', queue)
  local queued_before = qlen
  local has_waiting, has_delayed, has_paused, has_special, has_active, has_cuts = side_keys()
  any_waiting = has_waiting
  special = has_special
  counting = has_active or (tonumber(h['conc']) or 0) > 0 or (tonumber(h['rate']) or 0) > 0
  local rv = tonumber(h['rv']) -- [revisit] the dupefilter's generation length (ms), or nil

  -- children: one dupefilter check for the batch, one write per key
  local nc = tonumber(h['c']) or 0
  if nc > 0 then
    local fps, hs = {}, {}
    for j = 1, nc do
      fps[j] = ARGV[i + (j - 1) * 4]
      hs[j] = ARGV[i + (j - 1) * 4 + 1]
    end
    local bloom = h['bloom']
    if type(bloom) ~= 'table' then bloom = nil end
    local fresh
    if rv then
      fresh = revisit_dupefilter(fps, hs, bloom, rv, clock()) -- [revisit]
    else
      fresh = dupefilter(fps, hs, bloom)
    end
    local take = {}
    for j = 1, nc do
      local base = i + (j - 1) * 4 + 1
      if fresh[j] or string.byte(ARGV[base + 1], 1) == 100 then -- 'd': dont_filter
        take[#take + 1] = base
      else
        filtered = filtered + 1
      end
    end
    if #take > 0 then
      local seq0 = new_seqs(#take)
      local reqs, zq, zd, ds = {}, {}, {}, {}
      for j, base in ipairs(take) do
        local seq = seq0 + j
        local rid = make_rid(seq, tag)
        local spec = ARGV[base + 1]
        if string.byte(spec, 1) == 100 then spec = string.sub(spec, 2) end
        local prio, delay, site = spec, 0, '='
        if string.find(spec, ' ', 1, true) then
          prio, delay, site = string.match(spec, '^(%S*) (%S*) (.*)$')
          delay = tonumber(delay) or 0
        end
        local score = -prio * 1e10 + seq -- (prio coerced once: cheaper than tonumber)
        local value = ARGV[base + 2] -- site '=': the node checked that its URL names its site
        if site ~= '=' then value = req_value(site, value) end
        if delay > 0 then
          reqs[#reqs + 1] = rid; reqs[#reqs + 1] = value
          zd[#zd + 1] = clock() + delay; zd[#zd + 1] = rid
          ds[#ds + 1] = rid; ds[#ds + 1] = score
          parked = parked + 1
        else
          zq[#zq + 1] = score; zq[#zq + 1] = rid .. '\t' .. value -- inline: no Q:req entry
          added = added + 1
        end
      end
      if #reqs > 0 then call_chunked('HSET', P .. ':req', reqs, 2) end
      if #zq > 0 then qlen = qlen + call_chunked('ZADD', queue, zq, 2) end
      if #zd > 0 then
        call_chunked('ZADD', P .. ':delayed', zd, 2)
        call_chunked('HSET', P .. ':delayed:score', ds, 2)
      end
    end
    i = i + nc * 4
  end

  -- feedback first: it changes site budgets outside the cache the acks and leases share
  local na, nd, nf = tonumber(h['a']) or 0, tonumber(h['d']) or 0, tonumber(h['f']) or 0
  local fb = i + na * 2 + nd * 4
  for j = 1, nf do
    local base = fb + (j - 1) * 4
    local throttled, slow = tonumber(ARGV[base + 2]) or 0, tonumber(ARGV[base + 3]) or 0
    -- fine answers only raise a cut factor: with no cut in the shard they change nothing
    if throttled > 0 or slow > 0 or has_cuts then
      feedback(ARGV[base], tonumber(ARGV[base + 1]) or 0, throttled, slow, clock(),
        tonumber(h['rate']) or 0, tonumber(h['adaptive']) or 8, tonumber(h['recover']) or 120000)
    end
  end

  local leases = P .. ':held:' .. node
  -- dead letters first (the ack of the same request may travel in this very call), fenced
  -- like acks: one that ends a lease (rid ~= '') is written only while the node holds it
  if nd > 0 then
    local at = i + na * 2
    local dead = {}
    for j = 1, nd do
      local base = at + (j - 1) * 4
      local rid = ARGV[base + 3]
      if rid == '' or redis.call('HEXISTS', leases, rid) == 1 then
        dead[#dead + 1] = ARGV[base]; dead[#dead + 1] = ARGV[base + 1]
      else
        stale = stale + 1
      end
    end
    if #dead > 0 then call_chunked('HSET', P .. ':dead', dead, 2) end
  end
  -- acks (na rids, then their na sites): only leases this node still holds count; the rest
  -- changes nothing. A site is read only where a count or a waiting room needs it
  if na > 0 then
    local held = {}
    local k = 1
    if counting or any_waiting then
      -- which are held: their sites' in-flight counts and waiting rooms need them
      while k <= na do
        local last = math.min(na, k + BATCH - 1)
        local got = redis.call('HMGET', leases, unpack(ARGV, i + k - 1, i + last - 1))
        for j = k, last do
          if got[j - k + 1] then held[#held + 1] = j end
        end
        k = last + 1
      end
      acked = #held
      if acked == na then
        call_chunked_args('HDEL', leases, i, na)
      elseif acked > 0 then
        local rids = {}
        for n, j in ipairs(held) do rids[n] = ARGV[i + j - 1] end
        call_chunked('HDEL', leases, rids, 1)
      end
    else
      -- the common case: one HDEL of the rids as they came, its count the acks that held
      acked = call_chunked_args('HDEL', leases, i, na)
    end
    if acked > 0 and (counting or any_waiting) then
      local per_site = {}
      for _, j in ipairs(held) do
        local site = ARGV[i + na + j - 1]
        per_site[site] = (per_site[site] or 0) + 1
      end
      for site, n in pairs(per_site) do site_done(site, n) end
    end
    stale = stale + na - acked
    i = i + na * 2
  end
  i = i + nd * 4
  local revisited = 0
  local nr = tonumber(h['r']) or 0
  if nr > 0 and rv then -- [revisit] acks of pages to visit again, after the feedback records
    local bloom = h['bloom']
    if type(bloom) ~= 'table' then bloom = nil end
    local done, late = revisit_acks(node, i + nf * 4, nr, clock(), rv, bloom)
    revisited = done
    acked = acked + done
    stale = stale + late
  end
  if stale > 0 then redis.call('HINCRBY', P .. ':counters', 'stale_acks', stale) end


  local promoted = 0
  if has_delayed then
    local joined
    promoted, joined = promote_due(clock(), 500)
    qlen = qlen + joined
  end
  if rv then -- [revisit]
    local n, joined = promote_revisits(clock(), 500)
    promoted, qlen = promoted + n, qlen + joined
  end
  local lease_n = tonumber(h['lease']) or 0
  -- then up to `extra` more, only of a higher priority than `above` (the worst the node
  -- leases elsewhere in this flush: a shard's second best is unknown to it until now)
  local above, extra = tonumber(h['above']), tonumber(h['extra']) or 0
  if not above or qlen == 0 then extra = 0 end
  local def_rate, def_conc = tonumber(h['rate']) or 0, tonumber(h['conc']) or 0
  local burst, adaptive_rate = tonumber(h['burst']) or 1, tonumber(h['adaptive']) or 8
  local out, paced, held_new = {}, {}, {}
  local into_wait = 0 -- [status registry]: requests into (+) and out of (-) waiting rooms
  -- line: "<order score>\t<rid>\t<value>", what the node's Q:held keeps and the reply carries
  -- (one string per request: a reply element costs the script more than the concatenation)
  local function grant(rid, line, spent_token)
    if spent_token then paced[#paced + 1] = rid end
    held_new[#held_new + 1] = rid; held_new[#held_new + 1] = line
    out[#out + 1] = line
  end
  if (lease_n > 0 or extra > 0) and h['paused'] ~= 1 and not has_paused then
    -- first the sites whose wait is over, oldest wait first
    local due = {}
    if has_waiting and lease_n > 0 then
      due = redis.call('ZRANGEBYSCORE', P .. ':waiting', '-inf', clock(), 'LIMIT', 0, 64)
    end
    for _, site in ipairs(due) do
      local wait = P .. ':wait:' .. site
      while #out < lease_n do
        local head = redis.call('ZRANGE', wait, 0, 0, 'WITHSCORES')
        if #head == 0 then
          redis.call('ZREM', P .. ':waiting', site)
          break
        end
        local ok, again, spent = admit(site, clock(), def_rate, def_conc, burst, adaptive_rate)
        if not ok then
          redis.call('ZADD', P .. ':waiting', again, site)
          break
        end
        redis.call('ZREM', wait, head[1])
        into_wait = into_wait - 1
        local value = redis.call('HGET', P .. ':req', head[1])
        if value then
          redis.call('HDEL', P .. ':req', head[1]) -- its value moves into the node's Q:held
          grant(head[1], head[2] .. '\t' .. head[1] .. '\t' .. value, spent)
        else
          -- a request without its payload (a reset dropped it): undo exactly what admit took
          if spent then
            local b = budget(site)
            b.tokens = (b.tokens or 0) + 1
          end
          site_done(site, 1)
        end
      end
    end
    -- then the queue; requests of sites out of budget step aside into their site's wait.
    -- While the queue is shallow (a crawl widening from one seed, or draining) a node takes
    -- its fair share only: the node that found the links would otherwise lease them all
    -- and hold half in its prefetch buffer while the other nodes idle.
    local live = math.max(1, tonumber(h['live']) or 1)
    local share = math.max(1, math.ceil(qlen / live))
    local want = math.min(lease_n, #out + share)
    -- a request's site matters here only to a budget (a rate, a limit, a cut) or to the
    -- in-flight counts, or where its value names it ("<site>\n<payload>"); else the node
    -- reads it from the payload's URL itself
    local need_site = counting or def_rate > 0 or special
    local function take_all(popped)
      -- an inline entry "<rid>\t<value>" carries its value; a bare rid's is in Q:req. A
      -- leased request's line "<order score>\t<rid>\t<value>" goes into its node's Q:held and
      -- the reply as it is; a waiting one's value into Q:req (written below). The value itself
      -- is cut out of an inline entry only where its site is read or it waits
      local rids, entries, values, bare, to_req, from_req = {}, {}, {}, {}, {}, {}
      for j = 1, #popped, 2 do
        local entry = popped[j]
        local k = #rids + 1
        local tab = string.find(entry, '\t', 1, true)
        if tab then
          rids[k], entries[k], values[k] = string.sub(entry, 1, tab - 1), entry, false
        else
          rids[k], entries[k], values[k] = entry, false, false
          bare[#bare + 1] = k
        end
      end
      if #bare > 0 then
        local names = {}
        for j, k in ipairs(bare) do names[j] = rids[k] end
        local got = redis.call('HMGET', P .. ':req', unpack(names))
        for j, k in ipairs(bare) do values[k] = got[j] end
      end
      local sites, found = {}, {}
      for k = 1, #rids do
        local entry, value = entries[k], values[k]
        local first -- the value's first byte
        if entry then first = string.byte(entry, #rids[k] + 2) elseif value then
          first = string.byte(value, 1)
        end
        sites[k] = ''
        if first and (need_site or first ~= 123) then
          if entry then
            value = string.sub(entry, #rids[k] + 2)
            values[k] = value
          end
          sites[k] = split_req(value)
          found[#found + 1] = sites[k]
        end
      end
      if def_rate <= 0 then mark_special(found) end -- one check for the batch's sites
      for k, rid in ipairs(rids) do
        local score, entry, value = popped[2 * k], entries[k], values[k]
        if entry or value then
          local site = sites[k]
          local ok, again, spent = true, 0, false
          if site ~= '' then
            ok, again, spent = admit(site, clock(), def_rate, def_conc, burst, adaptive_rate)
          end
          if ok then
            if entry then
              grant(rid, score .. '\t' .. entry, spent)
            else
              grant(rid, score .. '\t' .. rid .. '\t' .. value, spent)
              from_req[#from_req + 1] = rid
            end
          else
            if entry then
              to_req[#to_req + 1] = rid
              to_req[#to_req + 1] = value or string.sub(entry, #rid + 2)
            end
            redis.call('ZADD', P .. ':wait:' .. site, score, rid)
            into_wait = into_wait + 1
            redis.call('ZADD', P .. ':waiting', 'NX', again, site)
          end
        end
      end
      if #to_req > 0 then call_chunked('HSET', P .. ':req', to_req, 2) end
      if #from_req > 0 then call_chunked('HDEL', P .. ':req', from_req, 1) end
      return #rids
    end
    local function take(popped)
      qlen = qlen - #popped / 2
      if need_site then return take_all(popped) end
      -- the common case first: an inline entry whose payload names its site is granted as it
      -- comes, with no site read and no budget; the rest (bare rids, "<site>\n" values) as above
      local rest
      for j = 1, #popped, 2 do
        local entry = popped[j]
        local tab = string.find(entry, '\t', 1, true)
        if tab and string.byte(entry, tab + 1) == 123 then
          grant(string.sub(entry, 1, tab - 1), popped[j + 1] .. '\t' .. entry, false)
        else
          rest = rest or {}
          rest[#rest + 1] = entry; rest[#rest + 1] = popped[j + 1]
        end
      end
      if rest then take_all(rest) end
      return #popped / 2
    end
    local looked = 0
    while #out < want and looked < 4 * lease_n do
      local popped = redis.call('ZPOPMIN', queue, want - #out)
      if #popped == 0 then break end
      looked = looked + take(popped)
    end
    if extra > 0 then
      -- priority > above: an order score below -above * 1e10 (seq < 1e10)
      local bound = '(' .. string.format('%.17g', -above * 1e10)
      local goal = #out + math.min(extra, share)
      looked = 0
      while #out < goal and looked < 4 * extra do
        local popped = redis.call('ZRANGE', queue, '-inf', bound, 'BYSCORE', 'LIMIT', 0,
          goal - #out, 'WITHSCORES')
        if #popped == 0 then break end
        local gone = {}
        for j = 1, #popped, 2 do gone[#gone + 1] = popped[j] end
        redis.call('ZREM', queue, unpack(gone))
        looked = looked + take(popped)
      end
    end
  end
  if #held_new > 0 then call_chunked('HSET', leases, held_new, 2) end
  if rv and #held_new > 0 then -- [revisit] leased: no longer behind schedule
    local granted = {}
    for j = 1, #held_new, 2 do granted[#granted + 1] = held_new[j] end
    call_chunked('ZREM', P .. ':revisit:late', granted, 1)
  end
  save_budgets()
  status_add('leases:' .. node, #held_new / 2 - acked) -- [status registry]
  status_add('waiting', into_wait) -- [status registry]
  if h['idle'] == 1 or (nc > 0 and queued_before == 0) then
    publish_wake(h['wake'], added + promoted)
  end
  -- when the next parked retry or waiting site falls due, so an idle node sleeps just that long
  local next_due = -1
  local side = {}
  if has_waiting or into_wait > 0 then side[#side + 1] = P .. ':waiting' end
  if has_delayed or parked > 0 then side[#side + 1] = P .. ':delayed' end
  if rv then side[#side + 1] = P .. ':revisit' end -- [revisit]
  for _, key in ipairs(side) do
    local first = head_score(key)
    if first then
      local ms = math.max(0, first - clock())
      if next_due < 0 or ms < next_due then next_due = ms end
    end
  end
  local head = {}
  if qlen > 0 then head = redis.call('ZRANGE', queue, 0, 0, 'WITHSCORES') end
  local at_head = 0
  if #head == 2 then
    -- how many share the head's priority: a node's next lease takes those before lower ones
    local prio = -math.floor(tonumber(head[2]) / 1e10)
    at_head = redis.call('ZCOUNT', queue, '-inf', '(' .. string.format('%.17g', -prio * 1e10 + 1e10))
  end
  local events = {}
  for _, e in ipairs(site_events) do
    for _, v in ipairs(e) do events[#events + 1] = v end
  end
  return {added, filtered, parked, acked, stale, out, next_due, paced,
    qlen, head[2] or '', at_head, events, revisited}
end

local function other_command()
  if cmd == 'mark_seen' then
    local h = cjson.decode(ARGV[2])
    local fps, hs = {}, {}
    for j = 3, #ARGV, 2 do
      fps[#fps + 1] = ARGV[j]
      hs[#hs + 1] = ARGV[j + 1]
    end
    local bloom = h['bloom']
    if type(bloom) ~= 'table' then bloom = nil end
    local added = 0
    local fresh
    if tonumber(h['rv']) then -- [revisit]
      fresh = revisit_dupefilter(fps, hs, bloom, tonumber(h['rv']), now_ms())
    else
      fresh = dupefilter(fps, hs, bloom)
    end
    for _ in pairs(fresh) do added = added + 1 end
    return added

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

  elseif cmd == 'release' then
    local node, channel = ARGV[2], ARGV[3]
    local rids = {}
    for j = 4, #ARGV do rids[#rids + 1] = ARGV[j] end
    local moved = release(node, rids)
    -- all of them: the node's own clean stop or open
    if #rids == 0 then redis.call('HDEL', P .. ':marks', node) end
    publish_wake(channel, moved)
    return moved

  elseif cmd == 'release_dead' then
    local node, channel, tombstone = ARGV[2], ARGV[3], ARGV[4]
    local moved = release(node, {})
    -- a node alive after all learns it at its next call of this shard, whichever it is
    local marks = P .. ':marks'
    redis.call('HSET', marks, node, tombstone)
    -- tombstones of nodes that never came back do not pile up (default node ids are new
    -- for every process): a recovery, rare, reads the marks (one per node) and drops them
    local all, old = redis.call('HGETALL', marks), now_ms() - TOMBSTONE_KEPT_MS
    for j = 1, #all, 2 do
      local at = tonumber(string.match(all[j + 1], '^!(%d+)%.'))
      if at and at < old then redis.call('HDEL', marks, all[j]) end
    end
    publish_wake(channel, moved)
    return moved

  elseif cmd == 'drained' then
    local leased = 0
    for j = 2, #ARGV do
      leased = leased + redis.call('HLEN', P .. ':held:' .. ARGV[j])
        + redis.call('ZCARD', P .. ':leases:' .. ARGV[j]) -- [older versions' leases]
    end
    local queued = redis.call('ZCARD', P .. ':queue')
    for _, site in ipairs(redis.call('ZRANGE', P .. ':waiting', 0, -1)) do
      queued = queued + redis.call('ZCARD', P .. ':wait:' .. site)
    end
    return {queued, redis.call('ZCARD', P .. ':delayed'), leased}

  elseif cmd == 'revisit_status' then -- [revisit]
    local grace = tonumber(ARGV[2]) or 0
    local now = now_ms()
    local revisit, late = P .. ':revisit', P .. ':revisit:late'
    local first = redis.call('ZRANGE', revisit, 0, 0, 'WITHSCORES')
    local oldest = redis.call('ZRANGE', late, 0, 0, 'WITHSCORES')
    local next_in, behind = '', 0
    if #first == 2 then
      next_in = tostring(tonumber(first[2]) - now)
      behind = math.max(0, now - tonumber(first[2]))
    end
    if #oldest == 2 then behind = math.max(behind, now - tonumber(oldest[2])) end
    return {redis.call('ZCARD', revisit), redis.call('ZCOUNT', revisit, '-inf', now + grace),
      next_in, behind, redis.call('ZCARD', late)}

  elseif cmd == 'requeue_dead' then
    local max, tag = tonumber(ARGV[2]), ARGV[3]
    local ids = {}
    for j = 4, #ARGV do ids[#ids + 1] = ARGV[j] end
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
          -- back through the site's budget like any request (a site that failed is not flooded)
          local site = record_site(decoded)
          local seq = new_seqs(1) + 1
          local rid = make_rid(seq, tag)
          redis.call('HSET', P .. ':req', rid, req_value(site, decoded['request']))
          redis.call('ZADD', P .. ':queue', -prio * 1e10 + seq, rid)
          redis.call('HDEL', P .. ':dead', id)
          moved = moved + 1
        end
      end
    end
    return moved

  -- control commands ------------------------------------------------------------------------------

  elseif cmd == 'heartbeat' then
    local node, info, idle = ARGV[2], ARGV[3], ARGV[4]
    local now = now_ms()
    redis.call('ZADD', P .. ':nodes', now, node)
    if info ~= '' then
      redis.call('HSET', P .. ':node:' .. node, 'info', info, 'heartbeat', now)
      redis.call('HDEL', P .. ':node:' .. node, 'dead_since', 'stopped_at')
      redis.call('ZREM', P .. ':gone', node) -- [status registry]
    end
    if idle == '1' then
      redis.call('SADD', P .. ':idle', node)
    elseif idle == '0' then
      redis.call('SREM', P .. ':idle', node)
    end
    return {now, redis.call('ZCARD', P .. ':nodes'), redis.call('SCARD', P .. ':idle'),
      redis.call('EXISTS', P .. ':paused')}

  elseif cmd == 'take_seeds' then
    local node, n, start_key = ARGV[2], tonumber(ARGV[3]), KEYS[2]
    -- heart-beat too: seeds held by a node that is not in C:nodes would escape recovery
    redis.call('ZADD', P .. ':nodes', now_ms(), node)
    local taken = {}
    for _ = 1, n do
      local raw = redis.call('RPOP', start_key)
      if not raw then break end
      redis.call('RPUSH', P .. ':seeding:' .. node, raw)
      taken[#taken + 1] = raw
    end
    return taken

  elseif cmd == 'seeded' then
    local node = ARGV[2]
    if node ~= '' then redis.call('DEL', P .. ':seeding:' .. node) end
    if #ARGV > 2 then
      for j = 3, #ARGV do redis.call('LPUSH', P .. ':rejected', ARGV[j]) end
      redis.call('LTRIM', P .. ':rejected', 0, 9999)
    end
    return 0

  elseif cmd == 'stop' or cmd == 'rejoin' or cmd == 'recover' then
    local start_key = KEYS[2]
    local now = now_ms()
    local function return_seeds(node)
      -- seeds were taken oldest first; push them back so the oldest is taken first again
      local seeding = P .. ':seeding:' .. node
      local seeds = redis.call('LRANGE', seeding, 0, -1)
      for i = #seeds, 1, -1 do redis.call('RPUSH', start_key, seeds[i]) end
      redis.call('DEL', seeding)
      redis.call('SREM', P .. ':idle', node)
      return #seeds
    end
    if cmd == 'rejoin' then
      local node = ARGV[2]
      local moved = return_seeds(node)
      redis.call('ZADD', P .. ':nodes', now, node)
      return moved
    end
    if cmd == 'stop' then
      local node = ARGV[2]
      local moved = return_seeds(node)
      -- the node's last stats stay readable for a day (cluster totals), marked as stopped
      redis.call('ZREM', P .. ':nodes', node)
      if redis.call('EXISTS', P .. ':node:' .. node) == 1 then
        redis.call('HSET', P .. ':node:' .. node, 'stopped_at', now)
        redis.call('PEXPIRE', P .. ':node:' .. node, 86400000)
        mark_gone(node, now) -- [status registry]
      end
      return moved
    end
    local me, timeout = ARGV[2], tonumber(ARGV[3])
    -- Silence counts only from this server's start: after a restart (an outage, a failover)
    -- every heartbeat is old, and the nodes that are alive need time to beat again.
    -- (pcall: where INFO is not allowed in scripts, the nodes' own wait after an outage remains)
    local info = redis.pcall('INFO', 'server')
    if type(info) == 'string' then
      local uptime = tonumber(string.match(info, 'uptime_in_seconds:(%d+)'))
      if uptime and uptime * 1000 < timeout then return {{}, 0} end
    end
    local claimed, seeds = {}, 0
    for _, node in ipairs(redis.call('ZRANGEBYSCORE', P .. ':nodes', '-inf', now - timeout)) do
      if node ~= me then
        seeds = seeds + return_seeds(node)
        redis.call('ZREM', P .. ':nodes', node)
        redis.call('HSET', P .. ':node:' .. node, 'dead_since', now)
        redis.call('PEXPIRE', P .. ':node:' .. node, 86400000)
        mark_gone(node, now) -- [status registry]
        claimed[#claimed + 1] = node
      end
    end
    if #claimed > 0 then redis.call('HINCRBY', P .. ':counters', 'recovered_nodes', #claimed) end
    -- claims whose claimer did not finish (it died too) are taken over
    local stuck = redis.call('ZRANGEBYSCORE', P .. ':recovering', '-inf', now - timeout)
    for _, node in ipairs(stuck) do
      if node ~= me then claimed[#claimed + 1] = node end
    end
    for _, node in ipairs(claimed) do redis.call('ZADD', P .. ':recovering', now, node) end
    return {claimed, seeds}

  elseif cmd == 'claim' then
    -- one process per node id: claimed atomically, so of two started at once one wins
    local node, owner, timeout, force = ARGV[2], ARGV[3], tonumber(ARGV[4]), ARGV[5]
    local now = now_ms()
    local k = P .. ':node:' .. node
    local beat = tonumber(redis.call('ZSCORE', P .. ':nodes', node))
    local cur = redis.call('HGET', k, 'owner')
    if force ~= '1' and beat and now - beat < timeout and cur and cur ~= owner then
      return {0, cur, now - beat}
    end
    redis.call('HSET', k, 'owner', owner)
    redis.call('PERSIST', k)
    redis.call('ZADD', P .. ':nodes', now, node)
    return {1, cur or '', 0}

  elseif cmd == 'recovered' then
    for j = 2, #ARGV do redis.call('ZREM', P .. ':recovering', ARGV[j]) end
    return 0

  elseif cmd == 'census' then
    local nodes = redis.call('ZRANGE', P .. ':nodes', 0, -1)
    local seeding = 0
    for _, node in ipairs(nodes) do seeding = seeding + redis.call('LLEN', P .. ':seeding:' .. node) end
    local named = {}
    for _, node in ipairs(nodes) do named[node] = true end
    for _, node in ipairs(redis.call('ZRANGE', P .. ':recovering', 0, -1)) do
      if not named[node] then nodes[#nodes + 1] = node end
    end
    return {seeding, redis.call('LLEN', KEYS[2]), nodes}
  end

  return redis.error_reply('distcrawl frontier: unknown command ' .. tostring(cmd))
end

-- one call: the per-call state reset, then the command (EVAL: the last line store.py appends
-- calls it with KEYS and ARGV; a function library registers it instead)
local function frontier(keys, args)
  KEYS, ARGV = keys, args
  P, cmd = keys[1], args[1]
  ACTIVE = P .. ':active'
  counting, act, act_delta, act_dirty = nil, {}, {}, false
  special, special_of, budgets, any_waiting, site_events = false, {}, {}, nil, {}
  if cmd == 'sync' then return sync_command() end
  return other_command()
end
