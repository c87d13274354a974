--[[ recovered: the claims of a recovery end (every shard released the nodes' leases).

KEYS[1]  the control slot's prefix
ARGV     nodes...
Returns 0. ]]
--- @include "args"
--- @include "util"

local function recovered(keys, args)
  local P = keys[1]
  local a = named_args(args, ARGS.recovered)
  for _, node in ipairs(a.nodes) do redis.call('ZREM', K.recovering(P), node) end
  return 0
end
