--[[ seeded: the node's seeds are in the shards: its seeding list goes; refused entries are
recorded (the rejected list keeps the latest REJECTED_KEPT).

KEYS[1]  the control slot's prefix
ARGV     node ('' = none: only record), rejected... (JSON records)
Returns 0. ]]
--- @include "args"
--- @include "util"

local REJECTED_KEPT = 10000

local function seeded(keys, args)
  local P = keys[1]
  local a = named_args(args, ARGS.seeded)
  if a.node ~= '' then redis.call('DEL', K.seeding(P, a.node)) end
  if #a.rejected > 0 then
    for _, entry in ipairs(a.rejected) do redis.call('LPUSH', K.rejected(P), entry) end
    redis.call('LTRIM', K.rejected(P), 0, REJECTED_KEPT - 1)
  end
  return 0
end
