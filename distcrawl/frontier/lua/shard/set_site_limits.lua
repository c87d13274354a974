--[[ set_site_limits: a site's own limits, overriding every node's defaults (written by nodes
from their settings and site profiles). The library reads a site's budget hash only for the
sites in K.limits (or with a cut), and counts requests in flight once K.active exists.

KEYS[1]  the shard's prefix (the site's shard)
ARGV     site, rate (requests/s; '' = none of its own), conc (in flight; '' = none)
Returns 0. ]]
--- @include "args"
--- @include "util"

local function set_site_limits(keys, args)
  local P = keys[1]
  local a = named_args(args, ARGS.set_site_limits)
  local k = K.site(P, a.site)
  for _, limit in ipairs({{'limit_rate', a.rate}, {'limit_conc', a.conc}}) do
    if limit[2] == '' then
      redis.call('HDEL', k, limit[1])
    else
      redis.call('HSET', k, limit[1], limit[2])
    end
  end
  if a.rate == '' and a.conc == '' then
    redis.call('SREM', K.limits(P), a.site)
  else
    redis.call('SADD', K.limits(P), a.site)
    -- the in-flight counts a concurrency limit needs (and the status shows)
    redis.call('HSETNX', K.active(P), a.site, 0)
  end
  return 0
end
