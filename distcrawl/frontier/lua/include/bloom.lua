--[[ bloom: the Bloom dupefilter (DISTCRAWL_DUPEFILTER=bloom, [m, k] in the call's header): k bits
per fingerprint at (h1 + j * h2) mod m, h1 and h2 its first 8 bytes, in one string per shard
(K.bloom) created at its full size by its first write; and the info hash both dupefilters
count their URLs in. ]]
--- @include "util"

-- the Bloom filter's bit offsets of a fingerprint (first 8 bytes: h1, h2)
local function bloom_offsets(fp, m, k)
  local a, b, c, d, e, f, g, h = string.byte(fp, 1, 8)
  local h1 = ((a * 256 + b) * 256 + c) * 256 + d
  local h2 = ((e * 256 + f) * 256 + g) * 256 + h
  if h2 % 2 == 0 then h2 = h2 + 1 end
  local offs = {}
  for j = 0, k - 1 do offs[j + 1] = (h1 + j * h2) % m end
  return offs
end

-- the hash that counts the URLs a dupefilter holds (n) and, for the exact one, holds the state
-- of its buckets (gen: a revisit generation's, nil: the one)
local function seen_info_key(P, gen)
  if gen then return K.seen_gen_info(P, gen) end
  return K.seen_info(P)
end

-- the Bloom filter's key (gen: a revisit generation's)
local function bloom_key(P, gen)
  if gen then return K.bloom_gen(P, gen) end
  return K.bloom(P)
end

-- the Bloom filter's check and record of a batch: a table i -> true for the fresh ones. The
-- ones recorded are counted in the info's n, as the exact dupefilter counts its own
local function bloom_add(P, fps, bloom, gen)
  local fresh, in_batch = {}, {}
  local added = 0
  local m, k = tonumber(bloom[1]), tonumber(bloom[2])
  local key = bloom_key(P, gen)
  local gets, sets, offsets = {}, {}, {}
  for i, fp in ipairs(fps) do
    if #fp >= 8 then
      offsets[i] = bloom_offsets(fp, m, k)
      for _, o in ipairs(offsets[i]) do
        gets[#gets + 1] = 'GET'; gets[#gets + 1] = 'u1'; gets[#gets + 1] = o
      end
    end
  end
  local bits = {}
  local i = 1
  while i <= #gets do
    local last = math.min(#gets, i + 3 * BATCH - 1)
    for _, v in ipairs(redis.call('BITFIELD', key, unpack(gets, i, last))) do
      bits[#bits + 1] = v
    end
    i = last + 1
  end
  local pos = 0
  for idx, fp in ipairs(fps) do
    if offsets[idx] then
      local all = true
      for _ = 1, k do
        pos = pos + 1
        if bits[pos] == 0 then all = false end
      end
      if not all and not in_batch[fp] then
        fresh[idx] = true
        added = added + 1
        for _, o in ipairs(offsets[idx]) do
          sets[#sets + 1] = 'SET'; sets[#sets + 1] = 'u1'; sets[#sets + 1] = o
          sets[#sets + 1] = 1
        end
      end
      in_batch[fp] = true
    elseif fp ~= '' then
      fresh[idx] = true
    end
  end
  if #sets > 0 and redis.call('EXISTS', key) == 0 then
    -- created at its full size once: a string grown by BITFIELD at rising offsets is
    -- over-allocated (up to twice its length)
    redis.call('SETRANGE', key, math.ceil(m / 8) - 1, '\0')
  end
  i = 1
  while i <= #sets do
    local last = math.min(#sets, i + 4 * BATCH - 1)
    redis.call('BITFIELD', key, unpack(sets, i, last))
    i = last + 1
  end
  if added > 0 then redis.call('HINCRBY', seen_info_key(P, gen), 'n', added) end
  return fresh
end

