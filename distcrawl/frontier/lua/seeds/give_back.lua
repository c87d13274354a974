--[[ give_back: the seeds nodes took and did not say were in the crawl (a node that stopped, died
or starts again under its id) go to the returned list, taken again first. Their requests may be
in the shards already: taken again, they go through the dupefilter, so a repeat is harmless.
Moving an empty list is nothing: two recoveries of one node give its seeds back once.

KEYS[1]  the seed slot's prefix
ARGV     nodes...
Returns how many seeds went back. ]]
--- @include "args"
--- @include "util"

local function give_back(keys, args)
  local P = keys[1]
  local a = named_args(args, ARGS.give_back)
  local moved = 0
  for _, node in ipairs(a.nodes) do
    local taken = K.taken(P, node)
    -- oldest first again: the returned list is taken from its right end
    for _, raw in ipairs(redis.call('LRANGE', taken, 0, -1)) do
      redis.call('LPUSH', K.returned(P), raw)
      moved = moved + 1
    end
    redis.call('DEL', taken)
  end
  return moved
end
