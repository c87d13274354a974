--[[ budgets: the per-site politeness shared by every node of the crawl.

A site may start a request when its token bucket (`rate` per second, `burst` tokens) has a
token and fewer than `conc` of its requests are in flight cluster-wide (0 = no limit); a site's
own limit_rate / limit_conc override the node's defaults. 429/503 or slow answers cut the
site's rate (adaptive factor), which wears off linearly in recover_ms. A site whose robots.txt
asks for a Crawl-delay (delay_ms) has one request in flight at most, and the next starts no
sooner than delay_ms after the last one finished (next_ok); a held site (hold_until: its
robots.txt cannot be read, or it said Retry-After) starts none until then. Every budget a call
touches is read once and written back once (save_budgets), with its state in the call table. ]]
--- @include "util"

-- Requests in flight per site, cluster-wide: K.active (site -> n; no field: 0), read and
-- written once per call for all the sites it touches. Counted only once a limit has applied in
-- the shard (a node's default `conc` or `rate`, a site's limits of its own, whose
-- set_site_limits creates the hash): the hash exists from then on, and so the counting goes
-- on. A crawl without limits counts nothing per request (nothing would read the counts but the
-- status).

-- the site's requests in flight as this call sees them (only where a concurrency limit asks)
local function active_of(call, site)
  local n = call.act[site]
  if n == nil then
    n = tonumber(redis.call('HGET', K.active(call.P), site)) or 0
    call.act[site] = n
  end
  return n + (call.act_delta[site] or 0)
end

local function active_add(call, site, n)
  if call.counting == nil then call.counting = redis.call('EXISTS', K.active(call.P)) == 1 end
  if not call.counting then return end
  call.act_delta[site] = (call.act_delta[site] or 0) + n
  call.act_dirty = true
end

local function save_active(call)
  if not call.act_dirty then return end
  local act, delta, active = call.act, call.act_delta, K.active(call.P)
  local unknown = {}
  for site, d in pairs(delta) do
    if d ~= 0 and act[site] == nil then unknown[#unknown + 1] = site end
  end
  local got = call_joined('HMGET', active, unknown)
  for j, site in ipairs(unknown) do act[site] = tonumber(got[j]) or 0 end
  local set = {}
  for site, d in pairs(delta) do
    if d ~= 0 then
      local n = math.max(0, act[site] + d) -- never below zero
      act[site] = n
      set[#set + 1] = site; set[#set + 1] = n
    end
  end
  call.act_delta, call.act_dirty = {}, false
  -- (a site back at 0 keeps its field: one command, and less than a hash per site)
  if #set > 0 then call_chunked('HSET', active, set, 2) end
end

-- Sites whose budget hash holds something a lease must read while the default rate is 0:
-- per-site limits (K.limits, written with them) or an adaptive cut (K.cuts). Other sites are
-- admitted without reading their hash.
local function mark_special(call, sites)
  if not call.special then return end
  local special_of = call.special_of
  local ask = {}
  for _, site in ipairs(sites) do
    if special_of[site] == nil and site ~= '' then ask[#ask + 1] = site end
  end
  if #ask == 0 then return end
  local lim = call_joined('SMISMEMBER', K.limits(call.P), ask)
  local cut = call_joined('ZMSCORE', K.cuts(call.P), ask)
  for j, site in ipairs(ask) do special_of[site] = lim[j] == 1 or cut[j] ~= false end
end

local function is_special(call, site)
  if not call.special then return false end
  if call.special_of[site] == nil then mark_special(call, {site}) end
  return call.special_of[site] == true
end

-- the site's budget as this call sees it, read once
local function budget(call, site)
  local b = call.budgets[site]
  if not b then
    local k = K.site(call.P, site)
    local st = redis.call('HMGET', k, 'tokens', 'ts', 'factor', 'limit_rate', 'limit_conc',
      'delay_ms', 'next_ok', 'hold_until')
    b = {tokens = tonumber(st[1]), ts = tonumber(st[2]), cut = st[3],
      limit_rate = tonumber(st[4]), limit_conc = tonumber(st[5]), delay = tonumber(st[6]),
      next_ok = tonumber(st[7]), hold = tonumber(st[8])}
    if b.cut then
      -- the rest of a cut only when there is one (most sites have none)
      local c = redis.call('HMGET', k, 'fts', 'recover_ms', 'cut_at')
      b.fts, b.recover_ms, b.cut_at = c[1], c[2], c[3]
    end
    call.budgets[site] = b
  end
  return b
end

local function save_budgets(call)
  for site, b in pairs(call.budgets) do
    if b.dirty and b.tokens then
      redis.call('HSET', K.site(call.P, site), 'tokens', tostring(b.tokens), 'ts', b.ts)
    end
  end
  save_active(call)
end

-- the Crawl-delay (ms) a site's robots.txt asks for, nil for none (K.delays: one EXISTS per
-- call, then one HGET per site, and only in a shard that has such sites)
local function delay_of(call, site)
  if call.has_delays == nil then call.has_delays = redis.call('EXISTS', K.delays(call.P)) == 1 end
  if not call.has_delays then return nil end
  return tonumber(redis.call('HGET', K.delays(call.P), site))
end

-- `count` requests of `site` left the nodes (acked or returned): slots free up. A site with a
-- Crawl-delay starts its next request no sooner than the delay after this one finished.
local function site_done(call, site, count)
  if site == '' then return end
  active_add(call, site, -count)
  local delay = delay_of(call, site)
  local due = 0 -- when the site may be served (0: now)
  if delay then
    due = clock(call) + delay
    redis.call('HSET', K.site(call.P, site), 'next_ok', due)
    local b = call.budgets[site]
    if b then b.next_ok = due end
  end
  if call.any_waiting == nil then
    call.any_waiting = redis.call('EXISTS', K.waiting(call.P)) == 1
  end
  if call.any_waiting and redis.call('EXISTS', K.wait(call.P, site)) == 1 then
    if delay then
      redis.call('ZADD', K.waiting(call.P), due, site)
    else
      redis.call('ZADD', K.waiting(call.P), 'LT', 0, site) -- a slot is free: serve it now
    end
  end
end

-- a cut is over: forgotten, and reported as recovered
local function cut_over(call, site, before, since)
  redis.call('HDEL', K.site(call.P, site), 'factor', 'fts', 'cut_at', 'recover_ms', 'base_rate',
    CUT_CAUSE)
  redis.call('ZREM', K.cuts(call.P), site) -- [status registry]
  local events = call.site_events
  events[#events + 1] = {site, 'recovered', before, '1', tostring(since)}
end

-- A site's adaptive factor now. A cut wears off with time, linearly (from 0 back to 1 in
-- recover_ms), whether requests of the site come by or not: a cut must not outlive the crawl
-- that caused it. Once back at 1 the cut is forgotten and reported as recovered (and so is a
-- factor this library did not write, without the time it was set or its recovery).
local function site_factor(call, site, factor, fts, recover_ms, cut_at, now)
  local f = tonumber(factor)
  if not f then return 1 end
  local rec, at = tonumber(recover_ms), tonumber(fts)
  if rec and at then
    local recovered = f
    if rec > 0 then recovered = f + (now - at) / rec end
    if recovered < 1 then return recovered end
  end
  cut_over(call, site, factor, now - (tonumber(cut_at) or now))
  return 1
end

-- the cached budget's factor now (a cut worn off is forgotten once, here)
local function budget_factor(call, site, b, now)
  local f = site_factor(call, site, b.cut, b.fts, b.recover_ms, b.cut_at, now)
  if f >= 1 then b.cut = nil end
  return f
end

-- May `site` start one more request now (the node's defaults `d`: rate, conc, burst,
-- adaptive)? Returns true, now and whether a rate token was spent; or false and when to look
-- again (ms)
local function admit(call, site, now, d)
  -- a site's budget hash only where it can matter: a default rate, or limits or a cut of its own
  local b = nil
  if d.rate > 0 or is_special(call, site) then b = budget(call, site) end
  local rate, conc, factor = d.rate, d.conc, 1
  if b then
    rate, conc = b.limit_rate or d.rate, b.limit_conc or d.conc
    if b.hold then
      if b.hold > now then return false, b.hold end
      -- the hold is over (a robots.txt that failed is fetched again by the node now leasing)
      redis.call('HDEL', K.site(call.P, site), 'hold_until', HOLD_CAUSE)
      redis.call('ZREM', K.holds(call.P), site) -- [status registry]
      b.hold = nil
    end
    if b.delay and b.delay > 0 then
      -- one request at a time, the next a delay after the last one finished (site_done)
      conc = 1
      if b.next_ok and b.next_ok > now then return false, b.next_ok end
    end
  end
  if conc > 0 and active_of(call, site) >= conc then return false, now + 1000 end
  if b then factor = budget_factor(call, site, b, now) end
  if rate <= 0 and factor < 1 then rate = d.adaptive end
  if rate > 0 then
    rate = rate * factor
    local tokens = b.tokens or d.burst
    tokens = math.min(d.burst, tokens + (now - (b.ts or now)) * rate / 1000)
    b.ts = now
    b.dirty = true
    if tokens < 1 then
      b.tokens = tokens
      return false, now + math.ceil((1 - tokens) * 1000 / rate)
    end
    b.tokens = tokens - 1
    active_add(call, site, 1)
    return true, now, true
  end
  active_add(call, site, 1)
  return true, now, false
end

-- Hold a site until `untl` (ms, server clock), for `why` (robots_unavailable, retry_after): none
-- of its requests starts before (admit); a later hold wins over an earlier one, and a
-- Retry-After wins a tie (robots.txt read again must not end it). K.holds lists the held sites
-- for the status.
local function hold_site(call, site, untl, why)
  local P = call.P
  local k = K.site(P, site)
  local was = tonumber(redis.call('HGET', k, 'hold_until')) or 0
  if untl < was or (untl == was and why ~= RETRY_AFTER_HOLD) then return end
  redis.call('HSET', k, 'hold_until', untl, HOLD_CAUSE, why)
  redis.call('SADD', K.limits(P), site) -- a lease reads its budget hash from now on
  redis.call('ZADD', K.holds(P), untl, site) -- [status registry]
  local b = call.budgets[site]
  if b then b.hold = untl end
  if call.special then call.special_of[site] = true end
end

-- How a site answered one node: throttled (429/503) or slow answers cut its rate, fine answers
-- raise a cut factor again. Throttled or slow answers are one incident per cut: they cut only
-- when the newest of them was sent after the last cut (`newest`: ms between its sending and
-- the node's flush; answers to requests sent before a cut belong to that cut's incident), and
-- never twice within a second. `hold`: ms the site asked every node to wait (Retry-After)
local function feedback(call, site, ok, throttled, slow, now, d, newest, hold)
  local k = K.site(call.P, site)
  local st = redis.call('HMGET', k, 'factor', 'cut_at', 'fts', 'recover_ms', 'limit_rate')
  local cut_at = tonumber(st[2]) or 0
  local factor = site_factor(call, site, st[1], st[3], st[4], st[2], now)
  local events = call.site_events
  if hold and hold > 0 then hold_site(call, site, now + hold, RETRY_AFTER_HOLD) end
  if throttled > 0 or slow > 0 then
    if now - cut_at >= 1000 and now - (newest or 0) >= cut_at then
      local cut, why = 0.8, 'slow'
      if throttled > 0 then cut, why = 0.5, 'throttled' end
      local rate = tonumber(st[5]) or d.rate
      if rate <= 0 then rate = d.adaptive end
      local new = tostring(math.max(0.05, factor * cut))
      redis.call('HSET', k, 'factor', new, 'fts', now, 'cut_at', now, 'recover_ms', d.recover,
        'base_rate', tostring(rate), CUT_CAUSE, why)
      redis.call('ZADD', K.cuts(call.P), now, site) -- [status registry]
      events[#events + 1] = {site, 'cut', tostring(factor), new, why}
    end
  elseif ok > 0 and factor < 1 then
    local new = factor + 0.01 * ok
    if new >= 1 then
      cut_over(call, site, tostring(factor), now - cut_at)
    else
      redis.call('HSET', k, 'factor', tostring(new), 'fts', now)
    end
  end
end
