--[[ claim: at a node's open, one process per node id, claimed atomically (so of two started at
once, one wins). Makes `owner` (JSON: host, pid, run of the process) the owner of the node id
and heart-beats, unless (without force) another owner heart-beat within timeout. The first
node of a crawl writes the frontier format into K.format; a crawl written in another format is
refused.

KEYS[1]  the control slot's prefix
ARGV     node, owner, timeout (ms), force ('1': claim whatever the other owner does)
Returns {1, the previous owner or '', 0} when claimed; {0, the other owner, ms since its
heartbeat} when it is in use; {-1, the crawl's format} when the crawl is in another format. ]]
--- @include "args"
--- @include "util"

local function claim(keys, args)
  local P = keys[1]
  local a = named_args(args, ARGS.claim)
  local found = redis.call('GET', K.format(P))
  if found and found ~= FORMAT then return {-1, found} end
  if not found then redis.call('SET', K.format(P), FORMAT) end
  local node = a.node
  local now = now_ms()
  local k = K.node(P, node)
  local beat = tonumber(redis.call('ZSCORE', K.nodes(P), node))
  local cur = redis.call('HGET', k, 'owner')
  if a.force ~= '1' and beat and now - beat < tonumber(a.timeout) and cur and cur ~= a.owner then
    return {0, cur, now - beat}
  end
  redis.call('HSET', k, 'owner', a.owner)
  redis.call('PERSIST', k)
  redis.call('ZADD', K.nodes(P), now, node)
  return {1, cur or '', 0}
end
