--[[ notice: claims the one notice of an event for the whole cluster, within the rate limit.

KEYS[1]  the control slot's prefix
ARGV     event (its id: the same on every node that sees it), record (JSON: kind, node, ...),
         rate (notices per minute, the whole cluster)
Returns 1 (this node sends it), 0 (claimed before: another node sends it) or -1 (over the
rate: claimed, and sent by nobody). ]]
--- @include "args"
--- @include "util"

local function notice(keys, args)
  local P = keys[1]
  local a = named_args(args, ARGS.notice)
  if redis.call('HEXISTS', K.notices(P), a.event) == 1 then return 0 end
  local minute = math.floor(now_ms() / 60000)
  local counter = redis.call('HGET', K.notices(P), '~rate') or ''
  local at, sent = string.match(counter, '^(%d+):(%d+)$')
  if tonumber(at) ~= minute then sent = 0 end
  sent = tonumber(sent) or 0
  if sent >= tonumber(a.rate) then
    redis.call('HSET', K.notices(P), a.event, a.record)
    return -1
  end
  redis.call('HSET', K.notices(P), '~rate', minute .. ':' .. (sent + 1))
  redis.call('HSET', K.notices(P), a.event, a.record)
  return 1
end
