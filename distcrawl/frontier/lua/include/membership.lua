--[[ membership: the control slot's view of the nodes (heart-beats, seeds held, recoveries). ]]
--- @include "util"

local NODE_KEPT_MS = 86400000 -- a stopped or recovered node's last stats stay a day

-- Seeds taken by `node` and not yet in the frontier go back to the front of the start list
-- (taken oldest first: pushed back so the oldest is taken first again); the node leaves the
-- idle set. Returns how many went back
local function return_seeds(P, start_key, node)
  local seeding = K.seeding(P, node)
  local seeds = redis.call('LRANGE', seeding, 0, -1)
  for i = #seeds, 1, -1 do redis.call('RPUSH', start_key, seeds[i]) end
  redis.call('DEL', seeding)
  redis.call('SREM', K.idle(P), node)
  return #seeds
end
