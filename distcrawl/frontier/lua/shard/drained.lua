--[[ drained: what is left in the shard.

KEYS[1]  the shard's prefix
ARGV     nodes... (whose leases count)
Returns {queued (waiting for their site included), delayed, leased by the named nodes}. ]]
--- @include "args"
--- @include "util"

local function drained(keys, args)
  local P = keys[1]
  local a = named_args(args, ARGS.drained)
  local leased = 0
  for _, node in ipairs(a.nodes) do leased = leased + redis.call('HLEN', K.held(P, node)) end
  local queued = 0
  local levels = redis.call('ZRANGE', K.levels(P), 0, -1, 'WITHSCORES')
  for j = 2, #levels, 2 do
    local score = tonumber(levels[j])
    queued = queued + score + priority_of(score) * SCORE_SPAN
  end
  for _, site in ipairs(redis.call('ZRANGE', K.waiting(P), 0, -1)) do
    queued = queued + redis.call('ZCARD', K.wait(P, site))
  end
  return {queued, redis.call('ZCARD', K.delayed(P)), leased}
end
