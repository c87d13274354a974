"""What one node knows of each shard, and which shards its next lease reads.

Each ``sync`` reply tells the length and best priority of the shard's queue after the call.
A node leases from the shards whose best priority is the highest it knows, counting the
children it is about to push there. Among shards that tie it takes at least ``lease_chunk``
requests from each, from the shards the flush calls anyway first and one other in turn (a
script call has a fixed cost, so a flush should call a few shards, not every one). It looks
again at every other shard at least once per ``refresh`` seconds, or at once when the wake
channel says work arrived there.
"""

from __future__ import annotations

import math
import random
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from distcrawl.frontier.protocol.sync import ShardReply

__all__ = ["DEFAULT_LEASE_CHUNK", "ShardView", "ShardViews"]

#: fewest requests one lease asks a shard for while the shards that tie hold that many
DEFAULT_LEASE_CHUNK = 16


@dataclass
class ShardView:
    queued: int = 0
    head_priority: int | None = None
    at_head: int = 0  # queued requests that share the best priority
    due_at: float | None = None  # monotonic time a parked retry or a waiting site falls due
    seen_at: float | None = None  # monotonic time of the last reply; None = never read
    poked: bool = False  # the wake channel said work arrived
    leased_round: int = 0  # the plan that last leased from this shard (0 = none yet)
    salt: float = 0.0  # orders the shards never leased from differently on every node


class ShardViews:
    def __init__(
        self, shards: int, *, refresh: float = 5.0, lease_chunk: int = DEFAULT_LEASE_CHUNK
    ) -> None:
        self.shards = shards
        self.refresh = refresh
        self.lease_chunk = max(1, lease_chunk)
        rng = random.Random()
        self._views = [ShardView(salt=rng.random()) for _ in range(shards)]
        self._round = 0

    def __getitem__(self, shard: int) -> ShardView:
        return self._views[shard]

    def update(self, reply: ShardReply) -> None:
        view = self._views[reply.shard]
        now = time.monotonic()
        view.queued = reply.queued
        view.head_priority = reply.head_priority
        view.at_head = reply.at_head
        view.due_at = now + reply.next_due_ms / 1000 if reply.next_due_ms >= 0 else None
        view.seen_at = now
        view.poked = False

    def poke(self, shard: int | None = None) -> None:
        """Work arrived in ``shard`` (None: anywhere): read it at the next lease."""
        for i, view in enumerate(self._views):
            if shard is None or i == shard:
                view.poked = True

    def head(self, shard: int, pushing: dict[int, tuple[int, int]] | None = None) -> int | None:
        """The best priority ``shard`` holds as far as this node knows, with what it pushes."""
        v = self._views[shard]
        prio = v.head_priority if v.queued > 0 else None
        pushed = (pushing or {}).get(shard)
        if pushed is not None and (prio is None or pushed[0] > prio):
            return pushed[0]
        return prio

    def queued_anywhere(self) -> bool:
        """Whether some shard held queued requests at its last reply (as far as this node
        knows: a shard it has not read since holds what others pushed there)."""
        return any(v.queued > 0 for v in self._views)

    def next_due_ms(self) -> int:
        dues = [v.due_at for v in self._views if v.due_at is not None]
        if not dues:
            return -1
        return max(0, math.ceil((min(dues) - time.monotonic()) * 1000))

    def plan(
        self, lease: int, writing: set[int], pushing: dict[int, tuple[int, int]] | None = None
    ) -> dict[int, int]:
        """How many requests to ask each shard for (0 = read it only, to refresh the view).

        The whole ``lease`` goes to the shards of the best known priority, ``pushing`` (shard:
        best priority of the children this flush pushes there, how many have it) included;
        shards never read, poked, or not read for ``refresh`` seconds are read too and share
        what is left.
        """
        if self.shards == 1:
            return {0: lease}
        self._round += 1
        pushing = pushing or {}
        now = time.monotonic()
        working: list[tuple[int, int]] = []  # (priority, shard)
        heads: dict[int, tuple[int, int, int]] = {}  # shard: (priority, at head, queued)
        unknown: list[tuple[bool, float, int]] = []  # (not poked, last seen, shard)
        for i, v in enumerate(self._views):
            due = v.due_at is not None and v.due_at <= now
            prio, at_head, queued = v.head_priority, v.at_head, v.queued
            if i in pushing:
                p, n = pushing[i]
                if prio is None or queued <= 0 or p > prio:
                    prio, at_head = p, n
                elif p == prio:
                    at_head += n
                queued += n
            heads[i] = (prio if prio is not None else -(10**9), at_head, queued)
            if queued > 0 or due:
                working.append((heads[i][0], i))
            elif v.seen_at is None or v.poked or now - v.seen_at >= self.refresh or i in writing:
                unknown.append((not v.poked, v.seen_at if v.seen_at is not None else -1.0, i))
        plan: dict[int, int] = {}
        left = lease
        # first what each shard holds at its best priority, best first; then the rest of
        # each shard (of lower priority than its head), in the order of their heads
        tiers: list[tuple[int, int, int]] = []  # (priority, shard, how many)
        for prio, shard in working:
            _, at_head, queued = heads[shard]
            head = min(at_head, queued) if queued > 0 else 0
            tiers.append((prio, shard, max(1, head)))
        rest = [(prio, s, heads[s][2] - max(1, heads[s][1])) for prio, s in working]
        for group in (tiers, [t for t in rest if t[2] > 0]):
            group.sort(key=lambda t: -t[0])
            j = 0
            while j < len(group) and left > 0:
                prio = group[j][0]
                tied = [t for t in group[j:] if t[0] == prio]
                j += len(tied)
                # shared among the tied shards, at least lease_chunk each, none given more
                # than it holds: first the one least recently leased from among those this
                # flush does not call anyway (so every shard gets its turn), then those it
                # calls anyway (no extra call), then the others in turn
                tied.sort(key=lambda t: (self._views[t[1]].leased_round, self._views[t[1]].salt))
                others = [t for t in tied if t[1] not in writing]
                tied = others[:1] + [t for t in tied if t[1] in writing] + others[1:]
                room = {s: n for _, s, n in tied}
                while left > 0:
                    # again while some hold more: what one could not give goes to the others
                    active = [s for _, s, _ in tied if room[s] > 0]
                    if not active:
                        break
                    for k, s in enumerate(active):
                        each = max(self.lease_chunk, math.ceil(left / (len(active) - k)))
                        take = min(left, each, room[s])
                        if take > 0:
                            plan[s] = plan.get(s, 0) + take
                            room[s] -= take
                            left -= take
                            self._views[s].leased_round = self._round
        unknown.sort()
        for k, (_, _, s) in enumerate(unknown):
            # what is left is shared among the shards to look at; the rest are read only
            share = math.ceil(left / (len(unknown) - k)) if left > 0 else 0
            plan[s] = share
            left -= share
        return plan
