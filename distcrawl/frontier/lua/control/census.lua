--[[ census: who holds what, crawl-wide.

KEYS[1]  the control slot's prefix
KEYS[2]  the start list
Returns {seeds held by nodes, seeds waiting in the start list, nodes}: the members and the
nodes claimed and not recovered yet (their leases are held until every shard has released
them, and a claimer that died leaves them so until the claim is taken over). ]]
--- @include "util"

local function census(keys, _)
  local P = keys[1]
  local nodes = redis.call('ZRANGE', K.nodes(P), 0, -1)
  local seeding = 0
  local named = {}
  for _, node in ipairs(nodes) do
    seeding = seeding + redis.call('LLEN', K.seeding(P, node))
    named[node] = true
  end
  for _, node in ipairs(redis.call('ZRANGE', K.recovering(P), 0, -1)) do
    if not named[node] then nodes[#nodes + 1] = node end
  end
  return {seeding, redis.call('LLEN', keys[2]), nodes}
end
