--[[ staged: the requests of the node's taken seeds are in the crawl's shards (the node says so
once every shard took its push): its taken list goes.

KEYS[1]  the seed slot's prefix
ARGV     node
Returns 0. ]]
--- @include "args"
--- @include "util"

local function staged(keys, args)
  local P = keys[1]
  local a = named_args(args, ARGS.staged)
  redis.call('DEL', K.taken(P, a.node))
  return 0
end
