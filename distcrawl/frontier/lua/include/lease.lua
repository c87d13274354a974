--[[ lease: hand out the shard's best requests to a node, through their sites' budgets.

First the sites whose wait for budget is over, oldest wait first; then the queue, its best
priority first and each priority in order. A request whose site is out of budget steps aside
into the site's waiting room (K.wait) and the site into K.waiting, without blocking the other
sites. While the queue is shallow (a crawl widening from one seed, or draining) a node takes
its fair share only, queued / live (rounded up): the node that found the links would otherwise
lease them all and hold half in its prefetch buffer while the other nodes idle. ]]
--- @include "util"
--- @include "sites"
--- @include "budgets"
--- @include "levels"

-- A lease in progress: h is the sync header (lease, above, extra, live and the budget
-- defaults), lv the queue's levels (levels). `lines` are what the reply carries and the
-- node's held hash keeps, "<priority>\t<rid>\t<value>"; `held` the rid, line pairs to write
-- there
local function new_lease(call, h, lv)
  return {
    call = call,
    h = h,
    lv = lv,
    lines = {},
    held = {},
    paced = {}, -- the leased rids that spent a rate token (the node sends those first)
    into_wait = 0, -- [status registry] requests into (+) and out of (-) waiting rooms
    -- a request's site matters only to a budget (a rate, a limit, a cut) or to the in-flight
    -- counts, or where its value names it ("<site>\n<payload>"); else the node reads it from
    -- the payload's URL itself
    need_site = call.counting or h.rate > 0 or call.special,
  }
end

-- one string per request, and in the reply one string for all of them (lease_reply): a reply
-- element costs the script more than the concatenation
local function grant(ls, rid, line, spent_token)
  if spent_token then ls.paced[#ls.paced + 1] = rid end
  ls.held[#ls.held + 1] = rid; ls.held[#ls.held + 1] = line
  ls.lines[#ls.lines + 1] = line
  -- the reply joins the lines with "\0": a value written by hand may hold one
  if string.find(line, '\0', 1, true) then ls.unjoinable = true end
end

-- the sites whose wait is over, oldest wait first, up to `want` leases
local function serve_waiting(ls, want)
  local call = ls.call
  local P = call.P
  local due = redis.call('ZRANGEBYSCORE', K.waiting(P), '-inf', clock(call), 'LIMIT', 0, 64)
  for _, site in ipairs(due) do
    local wait = K.wait(P, site)
    while #ls.lines < want do
      local head = redis.call('ZRANGE', wait, 0, 0, 'WITHSCORES')
      if #head == 0 then
        redis.call('ZREM', K.waiting(P), site)
        break
      end
      local ok, again, spent = admit(call, site, clock(call), ls.h)
      if not ok then
        redis.call('ZADD', K.waiting(P), again, site)
        break
      end
      local rid = head[1]
      redis.call('ZREM', wait, rid)
      ls.into_wait = ls.into_wait - 1
      local value = redis.call('HGET', K.requests(P), rid)
      if value then
        redis.call('HDEL', K.requests(P), rid) -- its value moves into the node's held hash
        local prio = string.format('%d', priority_of(tonumber(head[2])))
        grant(ls, rid, prio .. '\t' .. rid .. '\t' .. value, spent)
      else
        -- a request without its payload (a reset dropped it): undo exactly what admit took
        if spent then
          local b = budget(call, site)
          b.tokens = (b.tokens or 0) + 1
        end
        site_done(call, site, 1)
      end
    end
  end
end

-- Entries popped off level l of the queue, each through its site's budget. An inline entry
-- "<rid>\t<value>" carries its value; a bare rid's is in K.requests. The value is cut out of an
-- inline entry only where its site is read or it waits
local function take_all(ls, popped, l)
  local call = ls.call
  local P = call.P
  local rids, entries, values, bare, to_req, from_req = {}, {}, {}, {}, {}, {}
  for j = 1, #popped do
    local entry = popped[j]
    local tab = string.find(entry, '\t', 1, true)
    if tab then
      rids[j], entries[j], values[j] = string.sub(entry, 1, tab - 1), entry, false
    else
      rids[j], entries[j], values[j] = entry, false, false
      bare[#bare + 1] = j
    end
  end
  if #bare > 0 then
    local names = {}
    for j, k in ipairs(bare) do names[j] = rids[k] end
    local got = redis.call('HMGET', K.requests(P), unpack(names))
    for j, k in ipairs(bare) do values[k] = got[j] end
  end
  local sites, found = {}, {}
  for k = 1, #rids do
    local entry, value = entries[k], values[k]
    local first -- the value's first byte
    if entry then
      first = string.byte(entry, #rids[k] + 2)
    elseif value then
      first = string.byte(value, 1)
    end
    sites[k] = ''
    if first and (ls.need_site or first ~= 123) then
      if entry then
        value = string.sub(entry, #rids[k] + 2)
        values[k] = value
      end
      sites[k] = split_req(value)
      found[#found + 1] = sites[k]
    end
  end
  if ls.h.rate <= 0 then mark_special(call, found) end -- one check for the batch's sites
  local prio = l.name
  for k, rid in ipairs(rids) do
    local entry, value = entries[k], values[k]
    if entry or value then
      local site = sites[k]
      local ok, again, spent = true, 0, false
      if site ~= '' then ok, again, spent = admit(call, site, clock(call), ls.h) end
      if ok then
        if entry then
          grant(ls, rid, prio .. '\t' .. entry, spent)
        else
          grant(ls, rid, prio .. '\t' .. rid .. '\t' .. value, spent)
          from_req[#from_req + 1] = rid
        end
      else
        if entry then
          to_req[#to_req + 1] = rid
          to_req[#to_req + 1] = value or string.sub(entry, #rid + 2)
        end
        -- a fresh seq: the waiting room is first in first out within a priority, as the
        -- queue is (a revisit keeps its old rid; by the rid's seq it would pass every request
        -- that joined after it, and a busy site's new links would wait for good)
        redis.call('ZADD', K.wait(P, site), order_score(l.prio, new_seqs(P, 1)), rid)
        ls.into_wait = ls.into_wait + 1
        redis.call('ZADD', K.waiting(P), 'NX', again, site)
      end
    end
  end
  if #to_req > 0 then call_chunked('HSET', K.requests(P), to_req, 2) end
  if #from_req > 0 then call_chunked('HDEL', K.requests(P), from_req, 1) end
end

-- the common case first: an inline entry whose payload names its site is granted as it comes,
-- with no site read and no budget; from the first other entry on (a bare rid, a "<site>\n"
-- value), the rest as take_all does, so that the grants keep the queue's order
local function take(ls, popped, l)
  if ls.need_site then return take_all(ls, popped, l) end
  local prio = l.name .. '\t'
  for j = 1, #popped do
    local entry = popped[j]
    local tab = string.find(entry, '\t', 1, true)
    if tab and string.byte(entry, tab + 1) == 123 then
      grant(ls, string.sub(entry, 1, tab - 1), prio .. entry, false)
    else
      local rest = {}
      for k = j, #popped do rest[#rest + 1] = popped[k] end
      take_all(ls, rest, l)
      break
    end
  end
end

-- the leased lines as the reply carries them: one string, joined with "\0", or where a line
-- holds one, the list of them
local function lease_reply(ls)
  if ls.unjoinable then return ls.lines end
  return table.concat(ls.lines, '\0')
end

-- Lease the best requests in order: h.lease of them (none of a priority below h.floor), and
-- while they are of a priority higher than h.above, up to h.extra more (the flush's cutoff:
-- what other nodes pushed here since the node looked is unknown to it). has_waiting: whether
-- the shard has sites waiting for budget
local function lease_requests(ls, has_waiting)
  local h, lv = ls.h, ls.lv
  local lease_n, above, extra, floor = h.lease, h.above, h.extra, h.floor
  if not above or lv.total == 0 then extra = 0 end
  if lease_n <= 0 and extra <= 0 then return end
  if has_waiting and lease_n > 0 then serve_waiting(ls, lease_n) end
  local share = math.max(1, math.ceil(lv.total / math.max(1, h.live)))
  local want = math.min(lease_n, #ls.lines + share)
  local most = want + math.min(extra, share)
  local looked, limit = 0, 4 * math.max(lease_n, extra)
  for _, l in ipairs(lv.list) do
    if l.beyond then break end
    local goal = want
    if floor and l.prio < floor then goal = #ls.lines end
    if extra > 0 and l.prio > above then goal = most end
    while #ls.lines < goal and l.count > 0 and looked < limit do
      local popped = pop_level(lv, l, math.min(goal - #ls.lines, l.count))
      if #popped == 0 then break end
      looked = looked + #popped
      take(ls, popped, l)
    end
    if #ls.lines >= most or looked >= limit then break end
    if #ls.lines >= want and not (extra > 0 and l.prio > above) then break end
  end
end
