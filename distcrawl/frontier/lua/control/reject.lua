--[[ reject: records refused seeds and queue entries (the rejected list keeps the latest
REJECTED_KEPT), where an operator looks for what the crawl refused.

KEYS[1]  the control slot's prefix
ARGV     records... (JSON: raw, reason, kind, node, at)
Returns 0. ]]
--- @include "args"
--- @include "util"

local REJECTED_KEPT = 10000

local function reject(keys, args)
  local P = keys[1]
  local a = named_args(args, ARGS.reject)
  if #a.records > 0 then
    for _, entry in ipairs(a.records) do redis.call('LPUSH', K.rejected(P), entry) end
    redis.call('LTRIM', K.rejected(P), 0, REJECTED_KEPT - 1)
  end
  return 0
end
