"""What one node knows of each shard, and which shards its next lease reads.

Each ``sync`` reply tells the length and best priority of the shard's queue after the call.
A node leases from the shards whose best priority is the highest it knows (shared evenly
among shards that tie), and looks again at every other shard at least once per ``refresh``
seconds, or at once when the wake channel says work arrived there.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from distcrawl.frontier.batch import ShardReply

__all__ = ["ShardView", "ShardViews"]


@dataclass
class ShardView:
    queued: int = 0
    head_priority: int | None = None
    at_head: int = 0  # queued requests that share the best priority
    due_at: float | None = None  # monotonic time a parked retry or a waiting site falls due
    seen_at: float | None = None  # monotonic time of the last reply; None = never read
    poked: bool = False  # the wake channel said work arrived


class ShardViews:
    def __init__(self, shards: int, *, refresh: float = 5.0) -> None:
        self.shards = shards
        self.refresh = refresh
        self._views = [ShardView() for _ in range(shards)]

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

    def next_due_ms(self) -> int:
        dues = [v.due_at for v in self._views if v.due_at is not None]
        if not dues:
            return -1
        return max(0, math.ceil((min(dues) - time.monotonic()) * 1000))

    def plan(self, lease: int, writing: set[int]) -> dict[int, int]:
        """How many requests to ask each shard for (0 = read it only, to refresh the view).

        The whole ``lease`` goes to the shards of the best known priority; shards never read,
        poked, or not read for ``refresh`` seconds are read too and share what is left.
        """
        if self.shards == 1:
            return {0: lease}
        now = time.monotonic()
        working: list[tuple[int, int]] = []  # (priority, shard)
        unknown: list[tuple[bool, float, int]] = []  # (not poked, last seen, shard)
        for i, v in enumerate(self._views):
            due = v.due_at is not None and v.due_at <= now
            if v.queued > 0 or due:
                prio = v.head_priority if v.head_priority is not None else -(10**9)
                working.append((prio, i))
            elif v.seen_at is None or v.poked or now - v.seen_at >= self.refresh or i in writing:
                unknown.append((not v.poked, v.seen_at if v.seen_at is not None else -1.0, i))
        plan: dict[int, int] = {}
        left = lease
        # first what each shard holds at its best priority, best first; then the rest of
        # each shard (of lower priority than its head), in the order of their heads
        tiers: list[tuple[int, int, int]] = []  # (priority, shard, how many)
        for prio, shard in working:
            v = self._views[shard]
            head = min(v.at_head, v.queued) if v.queued > 0 else 0
            tiers.append((prio, shard, max(1, head)))
        rest = [
            (prio, s, self._views[s].queued - max(1, self._views[s].at_head)) for prio, s in working
        ]
        for group in (tiers, [t for t in rest if t[2] > 0]):
            group.sort(key=lambda t: -t[0])
            j = 0
            while j < len(group) and left > 0:
                prio = group[j][0]
                tied = [t for t in group[j:] if t[0] == prio]
                j += len(tied)
                # shared evenly among the tied shards, none given more than it holds
                tied.sort(key=lambda t: t[2])
                for k, (_, s, n) in enumerate(tied):
                    each = math.ceil(left / (len(tied) - k))
                    take = min(left, each, n)
                    plan[s] = plan.get(s, 0) + take
                    left -= take
        unknown.sort()
        for k, (_, _, s) in enumerate(unknown):
            # what is left is shared among the shards to look at; the rest are read only
            share = math.ceil(left / (len(unknown) - k)) if left > 0 else 0
            plan[s] = share
            left -= share
        return plan
