--[[ note_servers: which server (IP address) each site answers from, as the nodes resolve them:
the status lists the servers with more than one site.

KEYS[1]  the control slot's prefix
ARGV     pairs: site, server (its address)
Returns how many sites changed server (or were new). ]]
--- @include "args"
--- @include "util"

local function note_servers(keys, args)
  local P = keys[1]
  local a = named_args(args, ARGS.note_servers)
  local pairs_ = a.pairs
  local changed = 0
  for j = 1, #pairs_ - 1, 2 do
    local site, server = pairs_[j], pairs_[j + 1]
    local was = redis.call('HGET', K.site_servers(P), site)
    if was ~= server then
      redis.call('HSET', K.site_servers(P), site, server)
      if was then
        redis.call('SREM', K.server_sites(P, was), site)
        if redis.call('ZINCRBY', K.servers(P), -1, was) + 0 <= 0 then
          redis.call('ZREM', K.servers(P), was)
        end
      end
      redis.call('SADD', K.server_sites(P, server), site)
      redis.call('ZINCRBY', K.servers(P), 1, server)
      changed = changed + 1
    end
  end
  return changed
end
