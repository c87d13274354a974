--[[ requeue_dead: move dead letters back to the queue, at the end of the queue of their
record's priority, with a fresh rid; leased through their site's budget like any request (a
site that failed is not flooded).

KEYS[1]  the shard's prefix
ARGV     max (how many at most when none are named), tag (into the new rids), ids... (none:
         up to max)
Returns how many moved. ]]
--- @include "args"
--- @include "util"
--- @include "sites"
--- @include "levels"

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
  local lv = read_levels(new_call(P))
  for _, id in ipairs(ids) do
    local record = redis.call('HGET', K.dead(P), id)
    if record then
      local ok, decoded = pcall(cjson.decode, record)
      if ok and type(decoded) == 'table' and type(decoded['request']) == 'string' then
        local prio = tonumber(decoded['priority']) or 0
        local rid = make_rid(new_seqs(P, 1) + 1, a.tag)
        local value = req_value(record_site(decoded), decoded['request'])
        push_level(lv, level_of(lv, math.floor(prio)), {rid .. '\t' .. value}, false)
        redis.call('HDEL', K.dead(P), id)
        moved = moved + 1
      end
    end
  end
  save_levels(lv)
  return moved
end
