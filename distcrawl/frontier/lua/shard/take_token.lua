--[[ take_token: spend one of a site's rate tokens for a request that never was in the queue
(robots.txt fetched by a node's middleware), at once and into debt if need be: it must not
wait, since the node holds that site's leased requests until robots.txt is in and would then
send them in one burst. The queue pays the debt back.

KEYS[1]  the shard's prefix (the site's shard)
ARGV     site, rate (the node's default), burst
Returns 0. ]]
--- @include "args"
--- @include "util"
--- @include "budgets"

local function take_token(keys, args)
  local call = new_call(keys[1])
  local a = named_args(args, ARGS.take_token)
  local site, burst = a.site, tonumber(a.burst)
  local k = K.site(call.P, site)
  local now = clock(call)
  local st = redis.call('HMGET', k, 'tokens', 'ts', 'limit_rate', 'factor', 'fts', 'recover_ms',
    'cut_at')
  local factor = site_factor(call, site, st[4], st[5], st[6], st[7], now)
  local rate = (tonumber(st[3]) or tonumber(a.rate)) * factor
  if rate <= 0 then return 0 end
  local tokens = tonumber(st[1]) or burst
  tokens = math.min(burst, tokens + (now - (tonumber(st[2]) or now)) * rate / 1000)
  redis.call('HSET', k, 'tokens', tostring(tokens - 1), 'ts', now)
  return 0
end
