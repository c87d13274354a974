--[[ rejoin: at a node's open, after its claim (and the seeds an earlier run of it took given
back: give_back, in the seed list's slot): the node stays a member (heart-beats), so that it
is one from before its first lease on: a node holding leases outside the members would be seen
neither by `recover` nor by `drained`.

KEYS[1]  the control slot's prefix
ARGV     node
Returns 0. ]]
--- @include "args"
--- @include "util"

local function rejoin(keys, args)
  local P = keys[1]
  local a = named_args(args, ARGS.rejoin)
  redis.call('SREM', K.idle(P), a.node)
  redis.call('ZADD', K.nodes(P), now_ms(), a.node)
  return 0
end
