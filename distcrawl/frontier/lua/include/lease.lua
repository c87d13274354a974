--[[ lease: hand out the shard's best requests to a node, through their sites' budgets.

First the sites whose wait for budget is over, oldest wait first; then the queue, in order.
A request whose site is out of budget steps aside into the site's waiting room (K.wait) and
the site into K.waiting, without blocking the other sites. While the queue is shallow (a crawl
widening from one seed, or draining) a node takes its fair share only, queued / live (rounded
up): the node that found the links would otherwise lease them all and hold half in its
prefetch buffer while the other nodes idle. ]]
--- @include "util"
--- @include "sites"
--- @include "budgets"

-- A lease in progress: h is the sync header (lease, above, extra, live and the budget
-- defaults), qlen the queue's length. `lines` are what the reply carries and the node's held
-- hash keeps, "<order score>\t<rid>\t<value>"; `held` the rid, line pairs to write there
local function new_lease(call, h, qlen)
  return {
    call = call,
    h = h,
    qlen = qlen,
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

-- one string per request: a reply element costs the script more than the concatenation
local function grant(ls, rid, line, spent_token)
  if spent_token then ls.paced[#ls.paced + 1] = rid end
  ls.held[#ls.held + 1] = rid; ls.held[#ls.held + 1] = line
  ls.lines[#ls.lines + 1] = line
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
        grant(ls, rid, head[2] .. '\t' .. rid .. '\t' .. value, spent)
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

-- Entries popped off the queue (entry, score, ...), each through its site's budget. An inline
-- entry "<rid>\t<value>" carries its value; a bare rid's is in K.requests. The value is cut out
-- of an inline entry only where its site is read or it waits. Returns how many were looked at
local function take_all(ls, popped)
  local call = ls.call
  local P = call.P
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
  for k, rid in ipairs(rids) do
    local score, entry, value = popped[2 * k], entries[k], values[k]
    if entry or value then
      local site = sites[k]
      local ok, again, spent = true, 0, false
      if site ~= '' then ok, again, spent = admit(call, site, clock(call), ls.h) end
      if ok then
        if entry then
          grant(ls, rid, score .. '\t' .. entry, spent)
        else
          grant(ls, rid, score .. '\t' .. rid .. '\t' .. value, spent)
          from_req[#from_req + 1] = rid
        end
      else
        if entry then
          to_req[#to_req + 1] = rid
          to_req[#to_req + 1] = value or string.sub(entry, #rid + 2)
        end
        redis.call('ZADD', K.wait(P, site), score, rid)
        ls.into_wait = ls.into_wait + 1
        redis.call('ZADD', K.waiting(P), 'NX', again, site)
      end
    end
  end
  if #to_req > 0 then call_chunked('HSET', K.requests(P), to_req, 2) end
  if #from_req > 0 then call_chunked('HDEL', K.requests(P), from_req, 1) end
  return #rids
end

-- the common case first: an inline entry whose payload names its site is granted as it comes,
-- with no site read and no budget; from the first other entry on (a bare rid, a "<site>\n"
-- value), the rest as take_all does, so that the grants keep the queue's order
local function take(ls, popped)
  ls.qlen = ls.qlen - #popped / 2
  if ls.need_site then return take_all(ls, popped) end
  for j = 1, #popped, 2 do
    local entry = popped[j]
    local tab = string.find(entry, '\t', 1, true)
    if tab and string.byte(entry, tab + 1) == 123 then
      grant(ls, string.sub(entry, 1, tab - 1), popped[j + 1] .. '\t' .. entry, false)
    else
      local rest = {}
      for k = j, #popped do rest[#rest + 1] = popped[k] end
      take_all(ls, rest)
      break
    end
  end
  return #popped / 2
end

-- Lease up to h.lease requests, then up to h.extra more of a priority higher than h.above (the
-- worst the node leases elsewhere in this flush: a shard's second best is unknown to it until
-- now). has_waiting: whether the shard has sites waiting for budget
local function lease_requests(ls, has_waiting)
  local h, P = ls.h, ls.call.P
  local lease_n, above, extra = h.lease, h.above, h.extra
  if not above or ls.qlen == 0 then extra = 0 end
  if lease_n <= 0 and extra <= 0 then return end
  if has_waiting and lease_n > 0 then serve_waiting(ls, lease_n) end
  local share = math.max(1, math.ceil(ls.qlen / math.max(1, h.live)))
  local want = math.min(lease_n, #ls.lines + share)
  local looked = 0
  while #ls.lines < want and looked < 4 * lease_n do
    local popped = redis.call('ZPOPMIN', K.queue(P), want - #ls.lines)
    if #popped == 0 then break end
    looked = looked + take(ls, popped)
  end
  if extra > 0 then
    -- priority > above: an order score below the first score of priority `above`
    local bound = '(' .. string.format('%.17g', order_score(above, 0))
    local goal = #ls.lines + math.min(extra, share)
    looked = 0
    while #ls.lines < goal and looked < 4 * extra do
      local popped = redis.call('ZRANGE', K.queue(P), '-inf', bound, 'BYSCORE', 'LIMIT', 0,
        goal - #ls.lines, 'WITHSCORES')
      if #popped == 0 then break end
      local gone = {}
      for j = 1, #popped, 2 do gone[#gone + 1] = popped[j] end
      redis.call('ZREM', K.queue(P), unpack(gone))
      looked = looked + take(ls, popped)
    end
  end
end
