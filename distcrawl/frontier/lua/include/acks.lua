--[[ acks: what a sync does with the leases a node is done with (acks, dead letters), and when
its shard next has work falling due. ]]
--- @include "util"
--- @include "budgets"
--- @include "queues"

-- dead letters (the ack of the same request may travel in this very call), fenced like acks:
-- one that ends a lease (rid ~= '') is written only while the node holds it. Returns stale
local function write_dead(call, held_key, d)
  local dead, stale = {}, 0
  for j = 1, d.n do
    local rid = d.rid[j]
    if rid == '' or redis.call('HEXISTS', held_key, rid) == 1 then
      dead[#dead + 1] = d.id[j]; dead[#dead + 1] = d.record[j]
    else
      stale = stale + 1
    end
  end
  if #dead > 0 then call_chunked('HSET', K.dead(call.P), dead, 2) end
  return stale
end

-- acks: only leases this node still holds count; the rest changes nothing. A site is read only
-- where a count or a waiting room needs it. Returns acked
local function ack(call, held_key, a)
  local rids = a.rid
  if not (call.counting or call.any_waiting) then
    -- the common case: one HDEL of the rids as they came, its count the acks that held
    return call_chunked('HDEL', held_key, rids, 1)
  end
  -- which are held: their sites' in-flight counts and waiting rooms need them
  local got = call_joined('HMGET', held_key, rids)
  local held, per_site = {}, {}
  for j, rid in ipairs(rids) do
    if got[j] then
      held[#held + 1] = rid
      local site = a.site[j]
      per_site[site] = (per_site[site] or 0) + 1
    end
  end
  if #held > 0 then call_chunked('HDEL', held_key, held, 1) end
  for site, n in pairs(per_site) do site_done(call, site, n) end
  return #held
end

-- how soon the next parked retry, waiting site or revisit falls due (ms, -1: none)
local function next_due(call, has_waiting, has_delayed, rv)
  local P = call.P
  local out = -1
  local side = {}
  if has_waiting then side[#side + 1] = K.waiting(P) end
  if has_delayed then side[#side + 1] = K.delayed(P) end
  if rv then side[#side + 1] = K.revisit(P) end -- [revisit]
  for _, key in ipairs(side) do
    local first = head_score(key)
    if first then
      local ms = math.max(0, first - clock(call))
      if out < 0 or ms < out then out = ms end
    end
  end
  return out
end
