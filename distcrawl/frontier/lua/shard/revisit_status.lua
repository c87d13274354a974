--[[ revisit_status: [revisit] how the shard's revisits stand.

KEYS[1]  the shard's prefix
ARGV     grace (ms)
Returns {scheduled, due within grace, ms until the next revisit falls due ('' = none; < 0:
overdue, not promoted yet), ms the crawl is behind schedule (the oldest revisit due and not
leased yet), revisits due and queued but not leased}. ]]
--- @include "args"
--- @include "util"

local function revisit_status(keys, args)
  local P = keys[1]
  local a = named_args(args, ARGS.revisit_status)
  local grace = tonumber(a.grace) or 0
  local now = now_ms()
  local revisit, late = K.revisit(P), K.revisit_late(P)
  local first = redis.call('ZRANGE', revisit, 0, 0, 'WITHSCORES')
  local oldest = redis.call('ZRANGE', late, 0, 0, 'WITHSCORES')
  local next_in, behind = '', 0
  if #first == 2 then
    next_in = tostring(tonumber(first[2]) - now)
    behind = math.max(0, now - tonumber(first[2]))
  end
  if #oldest == 2 then behind = math.max(behind, now - tonumber(oldest[2])) end
  return {redis.call('ZCARD', revisit), redis.call('ZCOUNT', revisit, '-inf', now + grace),
    next_in, behind, redis.call('ZCARD', late)}
end
