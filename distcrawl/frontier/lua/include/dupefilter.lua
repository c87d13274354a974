--[[ dupefilter: which fingerprints a shard has seen, recording the new ones.

Exact (the default): fingerprints as 64-bit integers (decimal strings, so Redis keeps them in
compact intsets of 8 bytes each) in buckets K.seen_bucket, grown by linear hashing so a bucket
holds SEEN_SPLIT fingerprints on average (intsets stay compact up to 512). The bucket of a
fingerprint comes from h, the top 32 of its 64 bits in reverse order: b = h mod 2^L, or
h mod 2^(L+1) for buckets already split (b < split). So a bucket holds the fingerprints whose
top L (or L + 1) bits are its own reversed, one range of values, and a split moves one end of
its sorted members; K.seen_info holds L, split and n (how many were seen).
Bloom (DISTCRAWL_DUPEFILTER=bloom, [m, k] in the call's header): see the bloom include.
[revisit] A generation `gen` has buckets and a Bloom filter of its own (revisit include). ]]
--- @include "util"
--- @include "bloom"

local SEEN_SPLIT = 200

-- the low `bits` bits of x in reverse order
local function bit_reversed(x, bits)
  local r = 0
  for _ = 1, bits do
    r = r * 2 + x % 2
    x = (x - x % 2) / 2
  end
  return r
end

-- h of a fingerprint in decimal (a signed 64-bit integer), where the node did not send it:
-- its top 32 bits (as unsigned) by long division, reversed
local function hash_of_decimal(dec)
  local neg = string.byte(dec, 1) == 45
  local q, rem = 0, 0
  for i = neg and 2 or 1, #dec do
    rem = rem * 10 + string.byte(dec, i) - 48
    local d = rem % 4294967296
    q, rem = q * 10 + (rem - d) / 4294967296, d
  end
  local top = q -- |value| / 2^32, rounded down
  if neg then top = 4294967296 - q - (rem > 0 and 1 or 0) end -- (2^64 - |value|) / 2^32
  return bit_reversed(top, 32)
end

-- whether signed decimal a < b, exactly (integers of up to 20 digits)
local function decimal_less(a, b)
  local na, nb = string.byte(a, 1) == 45, string.byte(b, 1) == 45
  if na ~= nb then return na end
  local less
  if #a ~= #b then less = #a < #b else less = a < b end
  if a == b then return false end
  if na then return not less end
  return less
end

-- Bucket key names by prefix, generation (-1: none) and bucket: a number's decimal costs Lua
-- ~4,000 instructions, a table read ~100. A cache, not call state: kept between calls where
-- the library runs as Redis functions (made again per call as an EVAL script), at most
-- BUCKET_NAMES_MAX names
local BUCKET_NAMES, BUCKET_NAMES_N, BUCKET_NAMES_MAX = {}, 0, 20000

local function bucket_key(P, gen, b)
  local per_prefix = BUCKET_NAMES[P]
  if not per_prefix then
    per_prefix = {}
    BUCKET_NAMES[P] = per_prefix
  end
  local g = gen or -1
  local names = per_prefix[g]
  if not names then
    names = {}
    per_prefix[g] = names
  end
  local key = names[b]
  if not key then
    if BUCKET_NAMES_N >= BUCKET_NAMES_MAX then
      names = {}
      BUCKET_NAMES, BUCKET_NAMES_N = {[P] = {[g] = names}}, 0
    end
    if gen then key = K.seen_gen_bucket(P, gen, b) else key = K.seen_bucket(P, b) end
    names[b] = key
    BUCKET_NAMES_N = BUCKET_NAMES_N + 1
  end
  return key
end

-- a fingerprint's h as the node sent it ("" or nil where it did not: read from fp)
local function hash_of(h, fp)
  if h and h ~= '' then return h + 0 end -- coerced once: cheaper than tonumber's two reads
  return hash_of_decimal(fp)
end

-- the bucket of a fingerprint's h, with 2^L = size buckets and `split` split
local function bucket_of(h, size, split)
  local b = h % size
  if b < split then b = h % (2 * size) end
  return b
end

-- The state of a dupefilter's buckets as a node names it (a sync's reply and header): "L.split"
local function seen_state(level, split)
  return string.format('%d.%d', level, split)
end

-- Split bucket `split` of level L into itself and split + 2^L. Its members share their top L
-- bits (split's L bits reversed): those whose next bit is 1 are one end of its members sorted
-- by value (SORT: as doubles, exact but where a member and the boundary round alike, which
-- are told apart exactly), found by binary search and moved with two commands
local function split_bucket(P, gen, level, split)
  local src = bucket_key(P, gen, split)
  local m = redis.call('SORT', src)
  -- the least value whose next bit is 1, as a signed 64-bit integer (a double holds it
  -- exactly: L + 1 significant bits); level 0: the next bit is the sign, negatives move
  local v, up = 0, false
  if level > 0 then
    v, up = bit_reversed(split, level) * 2 ^ (64 - level) + 2 ^ (63 - level), true
    if v >= 2 ^ 63 then v = v - 2 ^ 64 end
  end
  -- m[1 .. lo - 1] are below v as doubles, m[lo .. hi - 1] round to v, m[hi ..] above it
  local function first(above)
    local lo, hi = 1, #m + 1
    while lo < hi do
      local mid = (lo + hi - (lo + hi) % 2) / 2
      local x = m[mid] + 0
      if x > v or (not above and x == v) then hi = mid else lo = mid + 1 end
    end
    return lo
  end
  local lo, hi = first(false), first(true)
  local ties, exact = {}, string.format('%.0f', v)
  for i = lo, hi - 1 do
    if decimal_less(m[i], exact) ~= up then ties[#ties + 1] = m[i] end
  end
  local dst = bucket_key(P, gen, split + 2 ^ level)
  local from, to = hi, #m -- the members above v move (below, at level 0)
  if not up then from, to = 1, lo - 1 end
  for i = from, to, BATCH do
    local j = math.min(to, i + BATCH - 1)
    redis.call('SREM', src, unpack(m, i, j))
    redis.call('SADD', dst, unpack(m, i, j))
  end
  if #ties > 0 then
    redis.call('SREM', src, unpack(ties))
    redis.call('SADD', dst, unpack(ties))
  end
end

-- `added` more fingerprints in a dupefilter whose buckets are in state (level, split): counted,
-- and the buckets split while they hold more than SEEN_SPLIT on average. Returns the new state
-- where it changed
local function grow(P, gen, info, added, level, split)
  local count = redis.call('HINCRBY', info, 'n', added)
  local size = 2 ^ level
  if count <= SEEN_SPLIT * (size + split) then return nil end
  while count > SEEN_SPLIT * (size + split) do
    split_bucket(P, gen, level, split)
    split = split + 1
    if split == size then
      level, split, size = level + 1, 0, size * 2
    end
  end
  redis.call('HSET', info, 'L', level, 'split', split)
  return seen_state(level, split)
end

-- SMISMEMBER then SADD of the new ones: two commands per bucket touched, not one per URL. hs
-- are the fingerprints' h ("" or nil where not sent: read from the fingerprint).
-- Returns a table i -> true for the fresh ones, and the state of the buckets after
local function seen_add(P, fps, hs, gen)
  local fresh = {}
  local info = seen_info_key(P, gen)
  local st = redis.call('HMGET', info, 'L', 'split')
  local state = (st[1] or '0') .. '.' .. (st[2] or '0')
  local level, split = tonumber(st[1]) or 0, tonumber(st[2]) or 0
  local size = 2 ^ level
  local added = 0
  -- a bucket's first fingerprint by its index, a table of them only from a second one on
  -- (most buckets get one: a shard's buckets outnumber a call's links)
  local first, groups, order = {}, {}, {}
  for idx, fp in ipairs(fps) do
    if fp ~= '' then
      local b = bucket_of(hash_of(hs[idx], fp), size, split)
      local one = first[b]
      if not one then
        first[b] = idx
        order[#order + 1] = b
      else
        local g = groups[b]
        if g then g[#g + 1] = idx else groups[b] = {one, idx} end
      end
    end
  end
  for _, b in ipairs(order) do
    local g = groups[b]
    local key = bucket_key(P, gen, b)
    if not g then
      local one = first[b]
      if redis.call('SADD', key, fps[one]) == 1 then
        fresh[one] = true
        added = added + 1
      end
    else
      local members = {}
      for j = 1, #g do members[j] = fps[g[j]] end
      local hit = call_joined('SMISMEMBER', key, members)
      local new, in_batch = {}, {}
      for j = 1, #g do
        local fp = members[j]
        if hit[j] == 0 and not in_batch[fp] then
          in_batch[fp] = true
          fresh[g[j]] = true
          new[#new + 1] = fp
        end
      end
      if #new > 0 then
        call_chunked('SADD', key, new, 1)
        added = added + #new
      end
    end
  end
  if added == 0 then return fresh, state end
  return fresh, grow(P, gen, info, added, level, split) or state
end

-- The exact dupefilter's check and record of fingerprints the node sent grouped by bucket,
-- found with the buckets' state `hint`: buckets[g] holds the counts[g] fingerprints that follow
-- the previous groups' in fps (one SMISMEMBER or SADD per group, with no Lua work per
-- fingerprint). Returns a table i -> true for the fresh ones and the state after; nil where
-- the state is not `hint` any more (the caller then asks seen_add)
local function seen_grouped(P, buckets, counts, fps, hint)
  local info = K.seen_info(P)
  local st = redis.call('HMGET', info, 'L', 'split')
  local state = (st[1] or '0') .. '.' .. (st[2] or '0')
  if state ~= hint then return nil end
  local fresh, added, i = {}, 0, 0
  for g = 1, #buckets do
    local n = counts[g] + 0
    local key = bucket_key(P, nil, buckets[g])
    if n == 1 then
      if redis.call('SADD', key, fps[i + 1]) == 1 then
        fresh[i + 1] = true
        added = added + 1
      end
    else
      local hit = redis.call('SMISMEMBER', key, unpack(fps, i + 1, i + n))
      local new = {}
      for j = 1, n do
        if hit[j] == 0 then
          local fp = fps[i + j]
          if not new[fp] then -- (twice in the batch: the first is the fresh one)
            new[fp] = true
            new[#new + 1] = fp
            fresh[i + j] = true
          end
        end
      end
      if #new > 0 then
        call_chunked('SADD', key, new, 1)
        added = added + #new
      end
    end
    i = i + n
  end
  if added == 0 then return fresh, state end
  local level, split = tonumber(st[1]) or 0, tonumber(st[2]) or 0
  return fresh, grow(P, nil, info, added, level, split) or state
end

-- which of the fingerprints are new; records them. Returns a table i -> true for fresh ones
-- and, with the exact dupefilter, the state of its buckets after (bloom: [m, k] or nil for the
-- exact one; [revisit] gen: the generation to record them in)
local function dupefilter(P, fps, hs, bloom, gen)
  if #fps == 0 then return {} end
  if bloom then return bloom_add(P, fps, bloom, gen) end
  return seen_add(P, fps, hs, gen)
end
