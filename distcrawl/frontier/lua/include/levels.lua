--[[ levels: a shard's queue, one list per priority (K.queue(P, priority)), first in first out,
and K.levels, the priorities whose list holds requests, each with its count in its score
(-priority * SCORE_SPAN + n: the best priority first).

A call reads the best LEVELS_READ levels once (read_levels), pushes and pops through them, and
writes back the counts it changed once (save_levels): the queue costs a call one read and one
write, whatever the number of requests it moves. A request pushed to a level worse than those
read asks for that level's count alone; the levels beyond those read are served by later calls
(a call never leases past the first level it did not read). ]]
--- @include "util"

-- A level as a call sees it: name (its priority in decimal), prio, count; changed once the call
-- changed its count, beyond where it lies past the levels read
local function new_level(name, prio, count)
  return {name = name, prio = prio, count = count}
end

-- The call's view of the levels: `list` best first, `by` level by its name (and by the texts
-- a call named it with), `total` the requests they hold (all of the queue when `all`). A
-- score -prio * SCORE_SPAN + n gives n as its remainder (Lua's % floors) and prio from both
local function read_levels(call)
  local got = redis.call('ZRANGE', key_of(call, 'levels'), 0, LEVELS_READ - 1, 'WITHSCORES')
  local list, by, total = {}, {}, 0
  for j = 1, #got, 2 do
    local name, score = got[j], got[j + 1] + 0
    local count = score % SCORE_SPAN
    local l = new_level(name, (count - score) / SCORE_SPAN, count)
    list[#list + 1] = l
    by[name] = l
    total = total + count
  end
  return {call = call, list = list, by = by, total = total, all = #got < 2 * LEVELS_READ}
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
      local score = redis.call('ZSCORE', key_of(lv.call, 'levels'), name)
      if score then l.count = (score + 0) % SCORE_SPAN end
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
  call_chunked(verb, key_of(lv.call, 'queue', l.name), entries, 1)
  l.count, l.changed = l.count + #entries, true
  lv.total = lv.total + #entries
end

-- Entries grouped by their level, the levels in the order they first came, so a call pushes
-- each level's entries with one push_level: new_batch(), batch_add(b, l, entry) per entry,
-- then push_batch(lv, b, front) (or walk b.order and b.by[l] to reorder them first)
local function new_batch()
  return {by = {}, order = {}}
end

local function batch_add(b, l, entry)
  local entries = b.by[l]
  if not entries then
    entries = {}
    b.by[l] = entries
    b.order[#b.order + 1] = l
  end
  entries[#entries + 1] = entry
end

local function push_batch(lv, b, front)
  for _, l in ipairs(b.order) do push_level(lv, l, b.by[l], front) end
end

-- up to n entries off the front of a level's list (fewer than asked: the list is empty now,
-- whatever its count said)
local function pop_level(lv, l, n)
  local got = redis.call('LPOP', key_of(lv.call, 'queue', l.name), n) or EMPTY
  local left = l.count - #got
  if #got < n then left = 0 end
  lv.total = lv.total - (l.count - left)
  l.count, l.changed = left, true
  return got
end

-- the counts this call changed, written back: one ZADD and, for levels emptied, one ZREM
local function save_levels(lv)
  local set, gone = {}, {}
  local list = lv.list
  for i = 1, #list do
    local l = list[i]
    if l.changed then
      if l.count > 0 then
        set[#set + 1] = -l.prio * SCORE_SPAN + l.count; set[#set + 1] = l.name
      else
        gone[#gone + 1] = l.name
      end
      l.changed = false
    end
  end
  if #set > 0 then call_chunked('ZADD', key_of(lv.call, 'levels'), set, 2) end
  if #gone > 0 then call_chunked('ZREM', key_of(lv.call, 'levels'), gone, 1) end
end

-- the best LEVELS_TOLD levels that hold requests onto the end of `out`: priority, count, ...
local function tell_levels(lv, out)
  local list, n, told = lv.list, #out, 0
  for i = 1, #list do
    local l = list[i]
    if told >= LEVELS_TOLD or l.beyond then break end
    if l.count > 0 then
      out[n + 1], out[n + 2] = l.name, l.count
      n, told = n + 2, told + 1
    end
  end
end

-- the seq a rid was made with ("<seq>.<tag>"; 0 for a rid of another form): a site's waiting
-- room orders its requests by it within a priority
local function seq_of(rid)
  return tonumber(string.match(rid, '^%d+')) or 0
end
