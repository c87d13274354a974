--[[ mark_seen: record fingerprints in the shard's dupefilter (a migrated dupefilter, whose URLs'
sites are unknown: recorded in every shard).

KEYS[1]  the shard's prefix
ARGV     header, then the section `fingerprints` (fp h, as a sync's children), column by column
  header  JSON: fingerprints (how many), bloom ([m, k] with the Bloom dupefilter), [revisit] rv
Returns how many were new. ]]
--- @include "args"
--- @include "util"
--- @include "dupefilter"
--- @include "revisit"

local function mark_seen(keys, args)
  local P = keys[1]
  local a, at = named_args(args, ARGS.mark_seen)
  local h = read_header(a.header, HEADERS.mark_seen)
  local sec = read_sections(args, at, h, SECTIONS.mark_seen)
  local bloom = h.bloom
  if type(bloom) ~= 'table' then bloom = nil end
  local fp = sec.fingerprints
  local fresh
  if h.rv then -- [revisit]
    fresh = revisit_dupefilter(P, fp.fp, fp.h, bloom, h.rv, now_ms())
  else
    fresh = dupefilter(P, fp.fp, fp.h, bloom)
  end
  local added = 0
  for _ in pairs(fresh) do added = added + 1 end
  return added
end
