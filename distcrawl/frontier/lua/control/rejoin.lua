--[[ rejoin: at a node's open, after its claim: the seeding list an earlier run of it left goes
back to the front of the start list, and the node stays a member (heart-beats), so that it is
one from before its first lease on: a node holding leases outside the members would be seen
neither by `recover` nor by `drained`.

KEYS[1]  the control slot's prefix
KEYS[2]  the start list
ARGV     node
Returns how many seeds went back. ]]
--- @include "args"
--- @include "util"
--- @include "membership"

local function rejoin(keys, args)
  local P = keys[1]
  local a = named_args(args, ARGS.rejoin)
  local moved = return_seeds(P, keys[2], a.node)
  redis.call('ZADD', K.nodes(P), now_ms(), a.node)
  return moved
end
