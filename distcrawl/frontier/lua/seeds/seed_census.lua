--[[ seed_census: the seeds not in the crawl yet.

KEYS[1]  the seed slot's prefix
KEYS[2]  the seed list
ARGV     nodes... (the members, and the nodes claimed and not recovered yet)
Returns {seeds taken by those nodes or given back, seeds waiting in the seed list}. ]]
--- @include "args"
--- @include "util"

local function seed_census(keys, args)
  local P = keys[1]
  local a = named_args(args, ARGS.seed_census)
  local held = redis.call('LLEN', K.returned(P))
  for _, node in ipairs(a.nodes) do held = held + redis.call('LLEN', K.taken(P, node)) end
  return {held, redis.call('LLEN', keys[2])}
end
