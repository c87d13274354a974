--[[ release: return leases of a node to the front of their priority's queue, oldest first (a
clean stop, a node's open, leases whose grant was lost). With none named, all of them, and the
node's mark goes (its own clean stop), or becomes `mark` (its open: a Redis that later comes
back with data older than the open, the node's membership lost with it, tells the node so at
its next call of any shard, before it leases).

KEYS[1]  the shard's prefix
ARGV     node, wake (the wake channel), shard (what to publish on it), mark (with no rids: the
         node's new mark, '' = none), rids... (none: all)
Returns how many leases left the node. ]]
--- @include "args"
--- @include "util"
--- @include "queues"

local function release(keys, args)
  local call = new_call(keys[1])
  local a = named_args(args, ARGS.release)
  local moved = release_leases(call, a.node, a.rids)
  if #a.rids == 0 then
    if a.mark ~= '' then
      redis.call('HSET', K.marks(call.P), a.node, a.mark)
    else
      redis.call('HDEL', K.marks(call.P), a.node)
    end
  end
  publish_wake(a.wake, a.shard, moved)
  return moved
end
