--[[ census: the nodes that may hold work: the members and the nodes claimed and not recovered
yet (their leases and seeds are held until every shard and the seed list's slot have taken
them back, and a claimer that died leaves them so until the claim is taken over).

KEYS[1]  the control slot's prefix
Returns the nodes. ]]
--- @include "util"

local function census(keys, _)
  local P = keys[1]
  local nodes = redis.call('ZRANGE', K.nodes(P), 0, -1)
  local named = {}
  for _, node in ipairs(nodes) do named[node] = true end
  for _, node in ipairs(redis.call('ZRANGE', K.recovering(P), 0, -1)) do
    if not named[node] then nodes[#nodes + 1] = node end
  end
  return nodes
end
