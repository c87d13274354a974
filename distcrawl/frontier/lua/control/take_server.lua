--[[ take_server: grants of the server budgets shared by the sites of one server (an IP
address): at most `conc` requests in flight on all nodes together, and `rate` per second with
`burst` tokens. A node asks for the grants it wants per server and gives back those it is done
with, in one call; it starts a request of a server only with a grant of it.

Grants held by a node that stopped or whose heartbeat is older than `timeout` come back to the
server when it is full (a node that died holds none for long).

KEYS[1]  the control slot's prefix
ARGV     node, timeout (ms), conc (0: none), rate (requests/s; 0: none), burst, then per server
         three values: server, want, done
Returns per server, in order: {granted, ms until a grant may be due (-1: when one comes back,
0: none wanted)}. ]]
--- @include "args"
--- @include "util"

-- the grants of nodes that stopped or went silent for `timeout` ms, back to the server; the
-- count in use after
local function reclaim(P, k, node, inuse, now, timeout)
  local fields = redis.call('HGETALL', k)
  for i = 1, #fields, 2 do
    local holder = string.match(fields[i], '^n:(.*)$')
    if holder and holder ~= node then
      local beat = tonumber(redis.call('ZSCORE', K.nodes(P), holder))
      if not beat or now - beat > timeout then
        inuse = inuse - (tonumber(fields[i + 1]) or 0)
        redis.call('HDEL', k, fields[i])
      end
    end
  end
  return math.max(0, inuse)
end

local function take_server(keys, args)
  local P = keys[1]
  local a = named_args(args, ARGS.take_server)
  local node, timeout = a.node, tonumber(a.timeout) or 0
  local conc, rate, burst = tonumber(a.conc) or 0, tonumber(a.rate) or 0, tonumber(a.burst) or 1
  local now = now_ms()
  local mine = 'n:' .. node
  local out = {}
  local g = a.grants
  for j = 1, #g - 2, 3 do
    local k = K.server(P, g[j])
    local want, done = tonumber(g[j + 1]) or 0, tonumber(g[j + 2]) or 0
    local st = redis.call('HMGET', k, 'inuse', mine, 'tokens', 'ts')
    local inuse, held = tonumber(st[1]) or 0, tonumber(st[2]) or 0
    done = math.min(done, held)
    inuse, held = math.max(0, inuse - done), held - done
    local granted, due = 0, 0
    if want > 0 then
      if conc > 0 and inuse + want > conc then inuse = reclaim(P, k, node, inuse, now, timeout) end
      granted = want
      if conc > 0 then granted = math.max(0, math.min(granted, conc - inuse)) end
      if granted < want then due = -1 end
      if rate > 0 then
        local tokens = tonumber(st[3]) or burst
        tokens = math.min(burst, tokens + (now - (tonumber(st[4]) or now)) * rate / 1000)
        local whole = math.floor(tokens)
        if whole < granted then
          granted = math.max(0, whole)
          due = math.ceil((granted + 1 - tokens) * 1000 / rate)
        end
        redis.call('HSET', k, 'tokens', tostring(tokens - granted), 'ts', now)
      end
    end
    inuse, held = inuse + granted, held + granted
    redis.call('HSET', k, 'inuse', inuse)
    if held > 0 then redis.call('HSET', k, mine, held) else redis.call('HDEL', k, mine) end
    out[#out + 1] = {granted, due}
  end
  return out
end
