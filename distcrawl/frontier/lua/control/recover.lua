--[[ recover: claim the nodes presumed dead. Claims nobody while the Redis server has been up
for less than timeout (after a restart every heartbeat is old, and the nodes that are alive
need time to beat again). Else claims every node (other than the caller) whose heartbeat is
older than timeout, and every claim older than timeout (its claimer died too): they leave the
members and enter K.recovering. Atomic, so two live nodes never claim the same dead node. The
caller then returns the claimed nodes' leases in every shard (release_dead) and their seeds in
the seed list's slot (give_back), and calls `recovered`.

KEYS[1]  the control slot's prefix
ARGV     node (the caller), timeout (ms)
Returns the nodes claimed. ]]
--- @include "args"
--- @include "util"
--- @include "membership"
--- @include "status"

local function recover(keys, args)
  local P = keys[1]
  local a = named_args(args, ARGS.recover)
  local me, timeout = a.node, tonumber(a.timeout)
  local now = now_ms()
  -- (pcall: where INFO is not allowed in scripts, the nodes' own wait after an outage remains)
  local info = redis.pcall('INFO', 'server')
  if type(info) == 'string' then
    local uptime = tonumber(string.match(info, 'uptime_in_seconds:(%d+)'))
    if uptime and uptime * 1000 < timeout then return {} end
  end
  local claimed = {}
  for _, node in ipairs(redis.call('ZRANGEBYSCORE', K.nodes(P), '-inf', now - timeout)) do
    if node ~= me then
      redis.call('ZREM', K.nodes(P), node)
      redis.call('SREM', K.idle(P), node)
      redis.call('HSET', K.node(P, node), 'dead_since', now)
      redis.call('PEXPIRE', K.node(P, node), NODE_KEPT_MS)
      mark_gone(P, node, now) -- [status registry]
      claimed[#claimed + 1] = node
    end
  end
  if #claimed > 0 then redis.call('HINCRBY', K.counters(P), 'recovered_nodes', #claimed) end
  -- claims whose claimer did not finish (it died too) are taken over
  for _, node in ipairs(redis.call('ZRANGEBYSCORE', K.recovering(P), '-inf', now - timeout)) do
    if node ~= me then claimed[#claimed + 1] = node end
  end
  for _, node in ipairs(claimed) do redis.call('ZADD', K.recovering(P), now, node) end
  return claimed
end
