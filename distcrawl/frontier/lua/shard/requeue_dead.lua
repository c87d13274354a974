--[[ requeue_dead: move dead letters back to the queue, with a fresh order score and the
priority of their record, through their site's budget like any request (a site that failed is
not flooded).

KEYS[1]  the shard's prefix
ARGV     max (how many at most when none are named), tag (into the new rids), ids... (none:
         up to max)
Returns how many moved. ]]
--- @include "args"
--- @include "util"
--- @include "sites"

local function requeue_dead(keys, args)
  local P = keys[1]
  local a = named_args(args, ARGS.requeue_dead)
  local ids = a.ids
  if #ids == 0 then
    ids = {}
    local all = redis.call('HKEYS', K.dead(P))
    for j = 1, math.min(tonumber(a.max), #all) do ids[j] = all[j] end
  end
  local moved = 0
  for _, id in ipairs(ids) do
    local record = redis.call('HGET', K.dead(P), id)
    if record then
      local ok, decoded = pcall(cjson.decode, record)
      if ok and type(decoded) == 'table' and type(decoded['request']) == 'string' then
        local prio = tonumber(decoded['priority']) or 0
        local seq = new_seqs(P, 1) + 1
        local rid = make_rid(seq, a.tag)
        redis.call('HSET', K.requests(P), rid, req_value(record_site(decoded), decoded['request']))
        redis.call('ZADD', K.queue(P), order_score(prio, seq), rid)
        redis.call('HDEL', K.dead(P), id)
        moved = moved + 1
      end
    end
  end
  return moved
end
