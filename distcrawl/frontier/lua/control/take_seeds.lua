--[[ take_seeds: move up to n raw seeds from the start list to the node's seeding list (first
pushed, first taken). Heart-beats too: seeds held by a node that is not a member would escape
recovery.

KEYS[1]  the control slot's prefix
KEYS[2]  the start list
ARGV     node, n
Returns the seeds taken. ]]
--- @include "args"
--- @include "util"

local function take_seeds(keys, args)
  local P, start = keys[1], keys[2]
  local a = named_args(args, ARGS.take_seeds)
  redis.call('ZADD', K.nodes(P), now_ms(), a.node)
  local taken = {}
  for _ = 1, tonumber(a.n) do
    local raw = redis.call('RPOP', start)
    if not raw then break end
    redis.call('RPUSH', K.seeding(P, a.node), raw)
    taken[#taken + 1] = raw
  end
  return taken
end
