--[[ stop: a node's clean stop: its seeding list back to the front of the start list, the node
out of the members. Its last stats stay readable for a day (cluster totals), marked stopped.

KEYS[1]  the control slot's prefix
KEYS[2]  the start list
ARGV     node
Returns how many seeds went back. ]]
--- @include "args"
--- @include "util"
--- @include "membership"
--- @include "status"

local function stop(keys, args)
  local P = keys[1]
  local a = named_args(args, ARGS.stop)
  local node = a.node
  local now = now_ms()
  local moved = return_seeds(P, keys[2], node)
  redis.call('ZREM', K.nodes(P), node)
  if redis.call('EXISTS', K.node(P, node)) == 1 then
    redis.call('HSET', K.node(P, node), 'stopped_at', now)
    redis.call('PEXPIRE', K.node(P, node), NODE_KEPT_MS)
    mark_gone(P, node, now) -- [status registry]
  end
  return moved
end
