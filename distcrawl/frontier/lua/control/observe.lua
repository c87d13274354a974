--[[ observe: what a node saw since its last call, added to the crawl's error groups and to its
sites' field coverage. Sent in the same round trip as the node's heartbeat.

KEYS[1]  the control slot's prefix
ARGV     node; groups_max (DISTCRAWL_ERROR_GROUPS_MAX); snaps_max (DISTCRAWL_SNAPSHOTS_MAX);
         window (DISTCRAWL_QUALITY_WINDOW); delta: JSON {e: [[id, other, site, kind,
         template, count, [sample URLs], snapshot (0|1)], ...], ot: the template of the
         groups of others, q: {site: [[products, {field: products holding it}], ...], ...}:
         each site's products in chunks, oldest first, each at most a quarter of the window}.
         `other` is the id of the group a failure counts in once the crawl holds groups_max
         groups (its kind's, for any site); a snapshot of 1 offers the first occurrence this
         node keeps.
Returns {granted: the group ids whose snapshot this node writes, sites: [site, figures, ...]
of the sites whose products passed a quarter of the window (to be judged)}. ]]
--- @include "args"
--- @include "util"

local SAMPLES = 3 -- URLs kept per group

local function add_samples(meta, urls)
  local kept = meta.samples or {}
  for _, url in ipairs(urls) do
    if #kept >= SAMPLES then break end
    local known = false
    for _, have in ipairs(kept) do
      if have == url then known = true break end
    end
    if not known then kept[#kept + 1] = url end
  end
  meta.samples = kept
end

-- one failure group of the delta: counted, its group made if new, its snapshot granted
local function add_group(P, a, e, ot, now, granted)
  local id, other, site, kind, template = e[1], e[2], e[3], e[4], e[5]
  local count, samples, snap = tonumber(e[6]) or 0, e[7] or {}, tonumber(e[8]) or 0
  local raw = redis.call('HGET', K.errors(P), id)
  local meta
  if raw then
    meta = cjson.decode(raw)
  else
    local groups = tonumber(redis.call('HGET', K.error_totals(P), 'groups')) or 0
    if groups >= tonumber(a.groups_max) then
      id, site, template, snap = other, '', ot, 0
      raw = redis.call('HGET', K.errors(P), id)
    end
    if raw then
      meta = cjson.decode(raw)
    else
      meta = {site = site, kind = kind, template = template, first = now, samples = {}}
      redis.call('HINCRBY', K.error_totals(P), 'groups', 1)
      redis.call('HINCRBY', K.error_totals(P), 'groups:' .. kind, 1)
    end
  end
  meta.last = now
  add_samples(meta, samples)
  if snap == 1 and not meta.snap then
    local taken = tonumber(redis.call('HGET', K.error_totals(P), 'snapshots')) or 0
    if taken < tonumber(a.snaps_max) then
      redis.call('HINCRBY', K.error_totals(P), 'snapshots', 1)
      meta.snap = a.node
      granted[#granted + 1] = id
    end
  end
  redis.call('HSET', K.errors(P), id, cjson.encode(meta))
  redis.call('ZINCRBY', K.error_counts(P), count, id)
  redis.call('HINCRBY', K.error_totals(P), 'events:' .. kind, count)
end

-- one site's products of the delta, chunk by chunk: added, and a mark made each time they
-- pass a step (a quarter of the window)
local function add_products(P, window, site, chunks, rolled)
  local raw = redis.call('HGET', K.quality(P), site)
  local fig = raw and cjson.decode(raw) or {n = 0, f = {}, m = {}}
  if type(fig.m) ~= 'table' then fig.m = {} end
  if type(fig.f) ~= 'table' then fig.f = {} end
  local step = math.max(1, math.floor(window / 4))
  local marked = false
  for _, chunk in ipairs(chunks) do
    local before = tonumber(fig.n) or 0
    fig.n = before + (tonumber(chunk[1]) or 0)
    for name, n in pairs(chunk[2] or {}) do
      fig.f[name] = (tonumber(fig.f[name]) or 0) + (tonumber(n) or 0)
    end
    if math.floor(fig.n / step) > math.floor(before / step) then
      local copy = {}
      for name, n in pairs(fig.f) do copy[name] = n end
      fig.m[#fig.m + 1] = {fig.n, copy}
      -- the oldest mark is kept while no newer one starts a whole window
      while #fig.m >= 2 and fig.m[2][1] <= fig.n - window do table.remove(fig.m, 1) end
      marked = true
    end
  end
  local text = cjson.encode(fig)
  redis.call('HSET', K.quality(P), site, text)
  if marked then
    rolled[#rolled + 1] = site
    rolled[#rolled + 1] = text
  end
end

local function observe(keys, args)
  local P = keys[1]
  local a = named_args(args, ARGS.observe)
  local delta = cjson.decode(a.delta)
  local now = now_ms()
  local granted, rolled = {}, {}
  for _, e in ipairs(delta.e or {}) do add_group(P, a, e, delta.ot or '', now, granted) end
  local window = math.max(4, tonumber(a.window) or 200)
  for site, entry in pairs(delta.q or {}) do add_products(P, window, site, entry, rolled) end
  return {granted, rolled}
end
