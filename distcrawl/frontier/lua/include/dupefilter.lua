--[[ dupefilter: which fingerprints a shard has seen, recording the new ones.

Exact (the default): fingerprints as 64-bit integers (decimal strings, so Redis keeps them in
compact intsets of 8 bytes each) in buckets K.seen_bucket, grown by linear hashing so a bucket
holds SEEN_SPLIT fingerprints on average (intsets stay compact up to 512). The bucket of a
fingerprint comes from its low 32 bits (h): b = h mod 2^L, or h mod 2^(L+1) for buckets
already split (b < split); K.seen_info holds L, split and n (how many were seen).
Bloom (DISTCRAWL_DUPEFILTER=bloom, [m, k] in the call's header): see the bloom include.
[revisit] A generation `gen` has buckets and a Bloom filter of its own (revisit include). ]]
--- @include "util"
--- @include "bloom"

local SEEN_SPLIT = 200

local function low32(dec)
  local neg = string.byte(dec, 1) == 45
  local acc = 0
  local first = 1
  if neg then first = 2 end
  for i = first, #dec do
    acc = (acc * 10 + string.byte(dec, i) - 48) % 4294967296
  end
  if neg and acc ~= 0 then
    acc = -acc + 4294967296
  end
  return acc
end

-- h mod `mod` (a power of two up to 2^26) of a fingerprint in decimal, as low32(dec) % mod:
-- from two numbers of at most 10 digits each, exact in a double (what a split reads of
-- every member of the bucket it splits: a digit loop costs several times more)
local function low_bits(dec, mod)
  if mod <= 32768 then
    -- mod divides 10^15 (10^9 when mod <= 2^9), so the last 15 (9) digits decide: one
    -- string.byte and Horner's rule on the character codes, exact in a double, less than
    -- half of what a substring and tonumber cost (a number of 15 digits or fewer is read
    -- whole: Lua's % of a negative one is the two's complement's, as here)
    local n = #dec
    if n <= 15 then return tonumber(dec) % mod end
    local r
    if mod <= 512 then
      local a, b, c, d, e, f, g, h, i = string.byte(dec, n - 8, n)
      -- minus the character codes' share, 48 * 111111111
      r = (((((((((a * 10 + b) * 10 + c) * 10 + d) * 10 + e) * 10 + f) * 10 + g) * 10 + h)
        * 10 + i) - 5333333328) % mod
    else
      local a, b, c, d, e, f, g, h, i, j, k, l, m, o, q = string.byte(dec, n - 14, n)
      -- (below 2^53 all along; minus the character codes' share, 48 * 111111111111111)
      r = (((((((((((((((a * 10 + b) * 10 + c) * 10 + d) * 10 + e) * 10 + f) * 10 + g) * 10
        + h) * 10 + i) * 10 + j) * 10 + k) * 10 + l) * 10 + m) * 10 + o) * 10 + q)
        - 5333333333333328) % mod
    end
    if r ~= 0 and string.byte(dec, 1) == 45 then r = mod - r end
    return r
  end
  if mod > 2^26 then return low32(dec) % mod end
  local neg = string.byte(dec, 1) == 45
  if neg then dec = string.sub(dec, 2) end
  local n = #dec
  local r
  if n > 10 then
    r = ((tonumber(string.sub(dec, 1, n - 10)) % mod) * (1e10 % mod)
      + tonumber(string.sub(dec, n - 9))) % mod
  else
    r = tonumber(dec) % mod
  end
  if neg and r ~= 0 then r = mod - r end
  return r
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

-- a fingerprint's low 32 bits as the node sent them ("" where it did not: read from fp)
local function low_of(h, fp)
  if h and h ~= '' then return h + 0 end -- coerced once: cheaper than tonumber's two reads
  return low32(fp)
end

-- the bucket of a fingerprint's low bits h, with 2^L = size buckets and `split` split
local function bucket_of(h, size, split)
  local b = h % size
  if b < split then b = h % (2 * size) end
  return b
end

-- The state of a dupefilter's buckets as a node names it (a sync's reply and header): "L.split"
local function seen_state(level, split)
  return string.format('%d.%d', level, split)
end

-- `added` more fingerprints in a dupefilter whose buckets are in state (level, split): counted,
-- and the buckets split while they hold more than SEEN_SPLIT on average (split bucket `split`
-- into itself and split + 2^L by the next bit of h). Returns the new state where it changed
local function grow(P, gen, info, added, level, split)
  local count = redis.call('HINCRBY', info, 'n', added)
  local size = 2 ^ level
  if count <= SEEN_SPLIT * (size + split) then return nil end
  while count > SEEN_SPLIT * (size + split) do
    local src = bucket_key(P, gen, split)
    local move = {}
    for _, m in ipairs(redis.call('SMEMBERS', src)) do
      if low_bits(m, 2 * size) ~= split then move[#move + 1] = m end
    end
    if #move > 0 then
      call_chunked('SREM', src, move, 1)
      call_chunked('SADD', bucket_key(P, gen, split + size), move, 1)
    end
    split = split + 1
    if split == size then
      level, split, size = level + 1, 0, size * 2
    end
  end
  redis.call('HSET', info, 'L', level, 'split', split)
  return seen_state(level, split)
end

-- SMISMEMBER then SADD of the new ones: two commands per bucket touched, not one per URL. hs
-- are the fingerprints' low 32 bits ("" or nil where not sent: read from the fingerprint).
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
      local b = bucket_of(low_of(hs[idx], fp), size, split)
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
