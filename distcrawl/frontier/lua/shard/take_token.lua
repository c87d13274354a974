--[[ take_token: one of a site's rate tokens for a request that never was in the queue: the
node's robots.txt fetch, or a request that reached the downloader by another path (a
middleware's own download, a request kept in a node's memory).

A robots.txt fetch (debt 1) spends its token at once and into debt if need be: it must not wait,
since the node holds that site's leased requests until robots.txt is in (each of them takes a
new token once released); the queue pays the debt back. Only a Retry-After hold and the site's
Crawl-delay make it wait. Any other request (debt 0) waits as a leased one would: for a hold,
for the Crawl-delay after the site's last request, and for a token.

KEYS[1]  the shard's prefix (the site's shard)
ARGV     site, rate (the node's default), burst, debt (1: robots.txt)
Returns 0 (go now: the token is spent), or the ms to wait before asking again. ]]
--- @include "args"
--- @include "util"
--- @include "budgets"

local function take_token(keys, args)
  local call = new_call(keys[1])
  local a = named_args(args, ARGS.take_token)
  local site, burst, debt = a.site, tonumber(a.burst), a.debt == '1'
  local k = K.site(call.P, site)
  local now = clock(call)
  local st = redis.call('HMGET', k, 'tokens', 'ts', 'limit_rate', 'factor', 'fts', 'recover_ms',
    'cut_at', 'hold_until', HOLD_CAUSE, 'delay_ms', 'next_ok')
  local hold = tonumber(st[8])
  if hold and hold > now and (not debt or st[9] == RETRY_AFTER_HOLD) then return hold - now end
  local delay, next_ok = tonumber(st[10]), tonumber(st[11])
  if delay and delay > 0 then
    -- a Crawl-delay binds robots.txt fetched again (its shared copy expired) as well
    if next_ok and next_ok > now then return next_ok - now end
    redis.call('HSET', k, 'next_ok', now + delay)
  end
  local factor = site_factor(call, site, st[4], st[5], st[6], st[7], now)
  local rate = (tonumber(st[3]) or tonumber(a.rate)) * factor
  if rate <= 0 then return 0 end
  local tokens = tonumber(st[1]) or burst
  tokens = math.min(burst, tokens + (now - (tonumber(st[2]) or now)) * rate / 1000)
  if tokens < 1 and not debt then
    redis.call('HSET', k, 'tokens', tostring(tokens), 'ts', now)
    return math.ceil((1 - tokens) * 1000 / rate)
  end
  redis.call('HSET', k, 'tokens', tostring(tokens - 1), 'ts', now)
  return 0
end
