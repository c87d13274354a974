--[[ heartbeat: a node is alive; stores its info and joins or leaves the idle set.

KEYS[1]  the control slot's prefix
ARGV     node, info (JSON; '' = keep the last), idle ('1': joins the idle set, '0': leaves it,
         '-1': neither)
Returns {now (ms, server clock), live nodes, idle nodes, paused (0|1)}. ]]
--- @include "args"
--- @include "util"

local function heartbeat(keys, args)
  local P = keys[1]
  local a = named_args(args, ARGS.heartbeat)
  local node = a.node
  local now = now_ms()
  redis.call('ZADD', K.nodes(P), now, node)
  if a.info ~= '' then
    redis.call('HSET', K.node(P, node), 'info', a.info, 'heartbeat', now)
    redis.call('HDEL', K.node(P, node), 'dead_since', 'stopped_at')
    redis.call('ZREM', K.gone(P), node) -- [status registry]
  end
  if a.idle == '1' then
    redis.call('SADD', K.idle(P), node)
  elseif a.idle == '0' then
    redis.call('SREM', K.idle(P), node)
  end
  return {now, redis.call('ZCARD', K.nodes(P)), redis.call('SCARD', K.idle(P)),
    redis.call('EXISTS', K.paused(P))}
end
