--[[ run: the crawl's run, made by its first node: an id and when it started.

KEYS[1]  the control slot's prefix
ARGV     id (a new random id, kept if the crawl has none), node
Returns {id, started (ms, server clock), by, finished (ms; '' while it runs)}. ]]
--- @include "args"
--- @include "util"

local function run(keys, args)
  local P = keys[1]
  local a = named_args(args, ARGS.run)
  if redis.call('HSETNX', K.run(P), 'id', a.id) == 1 then
    redis.call('HSET', K.run(P), 'started', now_ms(), 'by', a.node)
  end
  local got = redis.call('HMGET', K.run(P), 'id', 'started', 'by', 'finished')
  return {got[1] or '', got[2] or '', got[3] or '', got[4] or ''}
end
