--[[ util: the state of one call, the server clock, batched Redis calls and request ids.

Every command makes its call state with new_call(P) first thing: the library's functions are
made once when Redis loads it, so nothing per call may live outside that table. ]]
--- @include "keys"
--- @include "protocol"

local BATCH = 1000 -- most arguments handed to one Redis command (Lua's unpack has a stack limit)
local EMPTY = {} -- an empty list shared by every call: read, never written

-- Key names by slot prefix, kept between calls where the library runs as Redis functions
-- (made again per call as an EVAL script): a name K builds costs Lua a call and a
-- concatenation every time. At most NAMES_MAX of them; then the cache starts afresh
local NAMES, NAMES_N, NAMES_MAX = {}, 0, 20000

local function names_of(P)
  local names = NAMES[P]
  if not names then
    names = {}
    NAMES[P] = names
  end
  return names
end

-- K[kind](P[, arg]) for the call's slot, from the cache
local function key_of(call, kind, arg)
  local names = call.names
  if arg == nil then
    local k = names[kind]
    if not k then
      k = K[kind](call.P)
      names[kind] = k
    end
    return k
  end
  local by = names[kind]
  if not by then
    by = {}
    names[kind] = by
  end
  local k = by[arg]
  if not k then
    if NAMES_N >= NAMES_MAX then
      NAMES, NAMES_N = {}, 0
      call.names = names_of(call.P)
      return key_of(call, kind, arg)
    end
    k = K[kind](call.P, arg)
    by[arg] = k
    NAMES_N = NAMES_N + 1
  end
  return k
end

-- The state of one call of a shard command. `now` is the server clock (ms), read once by the
-- first part of the call that needs it; the other fields are the site budgets' (budgets):
-- counting (whether this call counts requests in flight; nil: not asked yet), act (site -> its
-- count in `active` as this call read it), act_delta (site -> what this call changed),
-- special (whether the shard has sites with limits or cuts of their own), special_of (site ->
-- true / false), budgets (site -> its budget hash as this call read it), any_waiting (whether
-- the shard has sites waiting for budget; nil: not asked yet), site_events (adaptive cuts made
-- or worn off during this call). The tables are made when first read: most calls need none
local LAZY = {act = true, act_delta = true, special_of = true, budgets = true, site_events = true}
local CALL = {__index = function(call, field)
  if LAZY[field] then
    local t = {}
    rawset(call, field, t)
    return t
  end
  return nil
end}

local function new_call(P)
  return setmetatable({P = P, names = names_of(P), act_dirty = false, special = false}, CALL)
end

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- the server's clock, read once per call and only by a call that needs it (most need none)
local function clock(call)
  local now = call.now
  if not now then
    now = now_ms()
    call.now = now
  end
  return now
end

-- redis.call(verb, key, [extra,] unpack(items)) in chunks of BATCH records of `width` items;
-- the sum of the replies
local function call_chunked(verb, key, items, width, extra)
  local n = #items
  local out = 0
  local i = 1
  while i <= n do
    local last = math.min(n, i + BATCH * width - 1)
    if extra then
      out = out + redis.call(verb, key, extra, unpack(items, i, last))
    else
      out = out + redis.call(verb, key, unpack(items, i, last))
    end
    i = last + 1
  end
  return out
end

-- redis.call(verb, key, unpack(items)) in chunks of BATCH; the replies (lists) joined
local function call_joined(verb, key, items)
  local n = #items
  if n == 0 then return {} end
  if n <= BATCH then return redis.call(verb, key, unpack(items)) end
  local out = {}
  local i = 1
  while i <= n do
    local last = math.min(n, i + BATCH - 1)
    local got = redis.call(verb, key, unpack(items, i, last))
    for j = 1, #got do out[#out + 1] = got[j] end
    i = last + 1
  end
  return out
end

-- seq alone repeats when Redis comes back with older state; the writer's tag (changed by a
-- node whenever it sees its own writes gone) keeps every rid unique anyway
local function make_rid(seq, tag)
  if tag == nil or tag == '' then return string.format('%d', seq) end
  return string.format('%d.%s', seq, tag) -- one string, not two ('%d': no float formatting)
end

-- the first of n new sequence numbers (one INCRBY per batch); seq also orders a priority
local function new_seqs(P, n)
  return redis.call('INCRBY', K.seq(P), n) - n
end

-- the order score of a request: higher priority first, then first in first out
local function order_score(priority, seq)
  return -priority * SCORE_SPAN + seq
end

-- the priority an order score was made from
local function priority_of(score)
  return -math.floor(score / SCORE_SPAN)
end

-- tell idle nodes that work arrived in this shard
local function publish_wake(channel, shard, n)
  if n > 0 and channel and channel ~= '' then
    redis.call('PUBLISH', channel, shard or '0')
  end
end
