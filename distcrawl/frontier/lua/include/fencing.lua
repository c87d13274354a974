--[[ fencing: a node's marks, by which it learns that Redis lost its writes.

Every fenced sync writes the node's next mark into K.marks and checks that the shard still
holds the mark it wrote last. A shard that lacks it came back with older state (restarted from
older data, a failover to a lagging replica, a reset): it does nothing, and the node forgets
what it pushed, takes a new tag and reconciles its leases. A recovery writes a tombstone
(TOMBSTONE .. "<ms>.<id>", the same in every shard) as the mark of a node presumed dead, so
that the first shard it calls, one it never called before included, tells it so. ]]
--- @include "util"

local TOMBSTONE_KEPT_MS = 24 * 3600 * 1000 -- a recovery's tombstone is kept a day

-- (a mark Redis does not have reads as false)
local function is_tombstone(mark)
  return mark and string.sub(mark, 1, 1) == TOMBSTONE
end

-- Check the node's mark and write its next one. mark_prev '' is the node's first sync of this
-- shard (anything but a tombstone will do); mark_new is also accepted (a call that ran but
-- whose reply was lost). Returns nil when the call may go on, else the mark found ('' if none)
local function fence(P, node, mark_prev, mark_new)
  local cur = redis.call('HGET', K.marks(P), node)
  if cur ~= mark_prev and cur ~= mark_new and (mark_prev ~= '' or is_tombstone(cur)) then
    return cur or ''
  end
  redis.call('HSET', K.marks(P), node, mark_new)
  return nil
end

-- A recovery's tombstone as the node's mark. Tombstones of nodes that never came back do not
-- pile up (default node ids are new for every process): a recovery, rare, reads the marks
-- (one per node) and drops the tombstones older than a day
local function bury(P, node, tombstone, now)
  local marks = K.marks(P)
  redis.call('HSET', marks, node, tombstone)
  local all, old = redis.call('HGETALL', marks), now - TOMBSTONE_KEPT_MS
  for j = 1, #all, 2 do
    if is_tombstone(all[j + 1]) then
      local at = tonumber(string.match(all[j + 1], '^.(%d+)%.'))
      if at and at < old then redis.call('HDEL', marks, all[j]) end
    end
  end
end
