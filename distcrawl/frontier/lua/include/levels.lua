--[[ levels: a shard's queue, one list per priority (K.queue(P, priority)), first in first out,
and K.levels, the priorities whose list holds requests, each with its count in its score
(-priority * SCORE_SPAN + n: the best priority first).

A call reads the best LEVELS_READ levels once (read_levels), pushes and pops through them, and
writes back the counts it changed once (save_levels): the queue costs a call one read and one
write, whatever the number of requests it moves. A request pushed to a level worse than those
read asks for that level's count alone; the levels beyond those read are served by later calls
(a call never leases past the first level it did not read). ]]
--- @include "util"

local function new_level(name, prio, count)
  return {name = name, prio = prio, count = count, changed = false, beyond = false}
end

-- The call's view of the levels: `list` best first, `by` level by its name (and by the texts
-- a call named it with), `total` the requests they hold (all of the queue when `all`)
local function read_levels(P)
  local got = redis.call('ZRANGE', K.levels(P), 0, LEVELS_READ - 1, 'WITHSCORES')
  local lv = {P = P, list = {}, by = {}, total = 0, all = #got < 2 * LEVELS_READ}
  for j = 1, #got, 2 do
    local score = tonumber(got[j + 1])
    local prio = priority_of(score)
    local l = new_level(got[j], prio, score + prio * SCORE_SPAN)
    lv.list[#lv.list + 1] = l
    lv.by[l.name] = l
    lv.total = lv.total + l.count
  end
  return lv
end

-- the level of a priority given as text (a child's spec, a held line, a parked retry's), made
-- where it holds nothing yet; raises on a text that is no priority
local function level_of(lv, text)
  local l = lv.by[text]
  if l then return l end
  local prio = tonumber(text)
  if not prio or prio ~= math.floor(prio) then error('not a priority: ' .. tostring(text)) end
  local name = string.format('%d', prio)
  l = lv.by[name]
  if not l then
    local list = lv.list
    local last = list[#list]
    l = new_level(name, prio, 0)
    if not lv.all and (not last or last.beyond or prio < last.prio) then
      -- worse than every level read: it may exist with requests of its own
      local score = redis.call('ZSCORE', K.levels(lv.P), name)
      if score then l.count = tonumber(score) + prio * SCORE_SPAN end
      l.beyond = true
      lv.total = lv.total + l.count
    end
    local at = #list + 1
    while at > 1 and list[at - 1].prio < prio do at = at - 1 end
    table.insert(list, at, l)
    lv.by[name] = l
  end
  lv.by[text] = l
  return l
end

-- entries onto a level's list: at its end, or at its front (`front`: leases given back, the
-- first of `entries` ending up first)
local function push_level(lv, l, entries, front)
  if #entries == 0 then return end
  local verb = 'RPUSH'
  if front then
    verb = 'LPUSH'
    local reversed = {}
    for j = #entries, 1, -1 do reversed[#reversed + 1] = entries[j] end
    entries = reversed
  end
  call_chunked(verb, K.queue(lv.P, l.name), entries, 1)
  l.count, l.changed = l.count + #entries, true
  lv.total = lv.total + #entries
end

-- up to n entries off the front of a level's list (fewer than asked: the list is empty now,
-- whatever its count said)
local function pop_level(lv, l, n)
  local got = redis.call('LPOP', K.queue(lv.P, l.name), n) or EMPTY
  local left = l.count - #got
  if #got < n then left = 0 end
  lv.total = lv.total - (l.count - left)
  l.count, l.changed = left, true
  return got
end

-- the counts this call changed, written back: one ZADD and, for levels emptied, one ZREM
local function save_levels(lv)
  local set, gone = {}, {}
  for _, l in ipairs(lv.list) do
    if l.changed then
      if l.count > 0 then
        set[#set + 1] = -l.prio * SCORE_SPAN + l.count; set[#set + 1] = l.name
      else
        gone[#gone + 1] = l.name
      end
      l.changed = false
    end
  end
  if #set > 0 then call_chunked('ZADD', K.levels(lv.P), set, 2) end
  if #gone > 0 then call_chunked('ZREM', K.levels(lv.P), gone, 1) end
end

-- the best LEVELS_TOLD levels that hold requests, flat: priority, count, ...
local function told_levels(lv)
  local out = {}
  for _, l in ipairs(lv.list) do
    if #out >= 2 * LEVELS_TOLD or l.beyond then break end
    if l.count > 0 then
      out[#out + 1] = l.name; out[#out + 1] = l.count
    end
  end
  return out
end

-- the seq a rid was made with ("<seq>.<tag>"; 0 for a rid of another form): a site's waiting
-- room orders its requests by it within a priority
local function seq_of(rid)
  return tonumber(string.match(rid, '^%d+')) or 0
end
