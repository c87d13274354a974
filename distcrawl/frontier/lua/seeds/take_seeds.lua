--[[ take_seeds: move up to n raw seeds to the node's taken list: first those given back by
nodes that stopped or died holding them (they may be in the crawl already), then from the seed
list (first pushed, first taken). The list and its neighbours share one slot, wherever its
name hashes: the move is atomic on a Redis Cluster too.

KEYS[1]  the seed slot's prefix
KEYS[2]  the seed list
ARGV     node, n
Returns {seeds given back, seeds from the list}: both now in the node's taken list. ]]
--- @include "args"
--- @include "util"

local function take_seeds(keys, args)
  local P, start = keys[1], keys[2]
  local a = named_args(args, ARGS.take_seeds)
  local taken = K.taken(P, a.node)
  local n = tonumber(a.n)
  local again, fresh = {}, {}
  while #again < n do
    local raw = redis.call('RPOP', K.returned(P))
    if not raw then break end
    redis.call('RPUSH', taken, raw)
    again[#again + 1] = raw
  end
  while #again + #fresh < n do
    local raw = redis.call('RPOP', start)
    if not raw then break end
    redis.call('RPUSH', taken, raw)
    fresh[#fresh + 1] = raw
  end
  return {again, fresh}
end
