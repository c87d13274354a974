--[[ release_dead: the recovery of a node presumed dead, in one shard: all its leases back to the
queue, and the recovery's tombstone as its mark (see fencing), so that a node alive after all
learns it at its next call of this shard, whichever it is.

KEYS[1]  the shard's prefix
ARGV     node, wake (the wake channel), shard (what to publish on it), tombstone
Returns how many leases left the node. ]]
--- @include "args"
--- @include "util"
--- @include "queues"
--- @include "fencing"

local function release_dead(keys, args)
  local call = new_call(keys[1])
  local a = named_args(args, ARGS.release_dead)
  local moved = release_leases(call, a.node, EMPTY)
  bury(call.P, a.node, a.tombstone, clock(call))
  publish_wake(a.wake, a.shard, moved)
  return moved
end
