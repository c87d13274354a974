--[[ membership: the control slot's view of the nodes (heart-beats, recoveries). ]]
--- @include "util"

local NODE_KEPT_MS = 24 * 3600 * 1000 -- a stopped or recovered node's last stats stay a day
