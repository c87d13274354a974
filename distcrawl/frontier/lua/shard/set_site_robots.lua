--[[ set_site_robots: what a site's robots.txt asks of its budget, written by the node that read
it: its Crawl-delay (one request at a time, the next no sooner than the delay after the last
one finished; the robots.txt fetch counts as the last one), and a hold while robots.txt cannot
be read (no request of the site starts before it ends; the node then fetching one of its
requests fetches robots.txt again).

KEYS[1]  the shard's prefix (the site's shard)
ARGV     site, delay (ms; 0: none; '': unchanged), source (where the delay came from),
         hold (ms from now; 0: end a hold of this cause; '': unchanged), why (the hold's cause)
Returns 0. ]]
--- @include "args"
--- @include "util"
--- @include "budgets"

-- the site's waiting requests may go now
local function serve_now(P, site)
  if redis.call('EXISTS', K.wait(P, site)) == 1 then redis.call('ZADD', K.waiting(P), 0, site) end
end

local function set_site_robots(keys, args)
  local call = new_call(keys[1])
  local P = call.P
  local a = named_args(args, ARGS.set_site_robots)
  local site = a.site
  local k = K.site(P, site)
  local now = clock(call)
  local delay = tonumber(a.delay)
  if delay and delay > 0 then
    redis.call('HSET', k, 'delay_ms', delay, DELAY_SOURCE, a.source)
    redis.call('HSET', K.delays(P), site, delay)
    local next_ok = tonumber(redis.call('HGET', k, 'next_ok')) or 0
    if next_ok < now + delay then redis.call('HSET', k, 'next_ok', now + delay) end
    redis.call('SADD', K.limits(P), site) -- a lease reads its budget hash
    redis.call('HSETNX', K.active(P), site, 0) -- its requests in flight are counted
  elseif delay and redis.call('HDEL', K.delays(P), site) == 1 then
    redis.call('HDEL', k, 'delay_ms', DELAY_SOURCE, 'next_ok')
    serve_now(P, site)
  end
  local hold = tonumber(a.hold)
  if hold and hold > 0 then
    hold_site(call, site, now + hold, a.why)
  elseif hold and (a.why == '' or redis.call('HGET', k, HOLD_CAUSE) == a.why) then
    redis.call('HDEL', k, 'hold_until', HOLD_CAUSE)
    redis.call('ZREM', K.holds(P), site) -- [status registry]
    serve_now(P, site)
  end
  return 0
end
