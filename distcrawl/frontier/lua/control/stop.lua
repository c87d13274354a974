--[[ stop: a node's clean stop, once its seeds are given back (give_back, in the seed list's
slot): the node leaves the members and the idle set. Its last stats stay readable for a day
(cluster totals), marked stopped.

KEYS[1]  the control slot's prefix
ARGV     node
Returns 0. ]]
--- @include "args"
--- @include "util"
--- @include "membership"
--- @include "status"

local function stop(keys, args)
  local P = keys[1]
  local a = named_args(args, ARGS.stop)
  local node = a.node
  local now = now_ms()
  redis.call('ZREM', K.nodes(P), node)
  redis.call('SREM', K.idle(P), node)
  if redis.call('EXISTS', K.node(P, node)) == 1 then
    redis.call('HSET', K.node(P, node), 'stopped_at', now)
    redis.call('PEXPIRE', K.node(P, node), NODE_KEPT_MS)
    mark_gone(P, node, now) -- [status registry]
  end
  return 0
end
