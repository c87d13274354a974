"""What one node knows of each shard, and what its next lease asks of each.

Each ``sync`` reply that read a shard's queue tells its length and its best priorities, each
with how many requests it holds (``LEVELS_TOLD`` of them). A node's lease follows that view:
it takes the best requests it knows of, across shards, down to the *cutoff*, the priority at
which the lease is full, and asks every shard it calls for everything it holds above the
cutoff besides (what other nodes pushed there since this node looked). Among shards that tie
at the cutoff it takes at least ``lease_chunk`` requests from each, from the shards the flush
calls anyway first, none of them more than ``ROTATE`` leases in a row, then from the shard it
leased from least lately (a script call has a fixed cost, so a flush should call a few shards,
not every one). It looks again at every other shard at least once per
``refresh`` seconds, or at once when the wake channel says work arrived there.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from distcrawl.frontier.protocol.calls import ShardReply

__all__ = ["DEFAULT_LEASE_CHUNK", "ROTATE", "LeasePlan", "ShardView", "ShardViews"]

#: fewest requests one lease asks a shard for while the shards that tie hold that many
DEFAULT_LEASE_CHUNK = 64
#: leases in a row a node takes its tied work from a shard its flushes call anyway (for its
#: acks and links); then that shard waits for its turn, after the shard leased from least lately
ROTATE = 2


@dataclass
class ShardView:
    queued: int = 0
    #: the best priorities queued, each with how many requests it holds (best first)
    levels: list[tuple[int, int]] = field(default_factory=list)
    due_at: float | None = None  # monotonic time a parked retry or a waiting site falls due
    seen_at: float | None = None  # monotonic time the queue was last read; None = never
    poked: bool = False  # the wake channel said work arrived
    leased_round: int = 0  # the plan that last leased from this shard (0 = none yet)
    #: leases in a row it gave because a flush called it anyway (1: it was taken in its turn)
    stays: int = 0
    #: the shard handed out fewer than its last call asked for (its sites' budgets, or others
    #: took the work first): the next lease does not stay with it
    short: bool = False
    salt: float = 0.0  # orders the shards never leased from differently on every node
    #: the state (L, split) of the shard's exact dupefilter as its last reply told it
    buckets: tuple[int, int] | None = None

    @property
    def head_priority(self) -> int | None:
        return self.levels[0][0] if self.levels and self.queued > 0 else None


@dataclass
class LeasePlan:
    """How many requests to ask each shard for (0: read it only, to refresh the view), and the
    cutoff: the lowest priority the plan knows it leases (None: it knows of none), above which
    every shard called hands out what it holds besides."""

    lease: dict[int, int]
    cutoff: int | None
    #: the cutoff where the whole lease comes from levels the node knows: a shard asked for
    #: more than it holds at or above it (others leased them meanwhile) hands out fewer, not
    #: requests of a lower priority than another shard may still hold (None: no floor)
    floor: int | None = None


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
        #: what this node's replies told since it last published them (the crawl-wide heads)
        self._learned: dict[int, str] = {}

    def __getitem__(self, shard: int) -> ShardView:
        return self._views[shard]

    def update(self, reply: ShardReply, server_ms: int = 0, asked: int = 0) -> None:
        """What a reply of this node told of its shard (``server_ms``: when, on Redis' clock;
        ``asked``: how many its call asked to lease)."""
        view = self._views[reply.shard]
        if asked > 0:
            view.short = len(reply.leased) < asked
        now = time.monotonic()
        view.due_at = now + reply.next_due_ms / 1000 if reply.next_due_ms >= 0 else None
        if reply.buckets is not None:
            view.buckets = reply.buckets
        if reply.queued < 0:
            return  # a call that did not read the queue (acks only): what it holds is unknown
        view.queued = reply.queued
        view.levels = list(reply.levels)
        view.seen_at = now
        view.poked = False
        flat = " ".join(f"{p} {n}" for p, n in reply.levels)
        self._learned[reply.shard] = f"{server_ms} {reply.queued} {flat}".rstrip()

    def learned(self) -> dict[int, str]:
        """What this node's replies told since the last call (then forgotten): the entries it
        writes into the crawl-wide heads."""
        out, self._learned = self._learned, {}
        return out

    def told(self, heads: dict[bytes, bytes], server_ms: int, skip: set[int]) -> None:
        """What the crawl-wide heads say of the shards (``skip``: those this node's own calls
        just read), where it is newer than this node's view."""
        now = time.monotonic()
        for field_, value in heads.items():
            try:
                shard = int(field_)
                ms, queued, *flat = (int(x) for x in value.split())
            except ValueError:
                continue  # not a line a node wrote: ignored
            if not 0 <= shard < self.shards or shard in skip:
                continue
            view = self._views[shard]
            seen = now - max(0, server_ms - ms) / 1000
            if view.seen_at is not None and view.seen_at >= seen:
                continue
            view.queued = queued
            view.levels = list(zip(flat[0::2], flat[1::2], strict=False))
            view.seen_at = seen

    def poke(self, shard: int | None = None) -> None:
        """Work arrived in ``shard`` (None: anywhere): read it at the next lease."""
        for i, view in enumerate(self._views):
            if shard is None or i == shard:
                view.poked = True

    def queued_anywhere(self) -> bool:
        """Whether some shard held queued requests at its last reply (as far as this node
        knows: a shard it has not read since holds what others pushed there)."""
        return any(v.queued > 0 for v in self._views)

    def next_due_ms(self) -> int:
        dues = [v.due_at for v in self._views if v.due_at is not None]
        if not dues:
            return -1
        return max(0, math.ceil((min(dues) - time.monotonic()) * 1000))

    def known(
        self, shard: int, pushing: Iterable[tuple[int, int]] = ()
    ) -> tuple[list[tuple[int, int]], int]:
        """The levels of ``shard`` this node knows of, with ``pushing`` (priority, how many) the
        children this flush queues there, best first; and how many more it holds below them."""
        v = self._views[shard]
        counts: dict[int, int] = {}
        told = 0
        if v.queued > 0:
            for prio, n in v.levels:
                counts[prio] = counts.get(prio, 0) + n
                told += n
        rest = max(0, v.queued - told)
        for prio, n in pushing:
            counts[prio] = counts.get(prio, 0) + n
        return sorted(counts.items(), key=lambda kv: -kv[0]), rest

    def plan(
        self,
        lease: int,
        writing: set[int],
        pushing: dict[int, list[tuple[int, int]]] | None = None,
    ) -> LeasePlan:
        """What the next lease asks of each shard.

        The best requests this node knows of go first, across shards, down to the cutoff (the
        priority at which ``lease`` is full), ``pushing`` (shard: the priorities this flush's
        children bring there, with their counts) included; then what shards hold below the
        levels their replies told, in the order of their last known level; shards never read,
        poked, or not read for ``refresh`` seconds are read too and share what is left.
        """
        pushing = pushing or {}
        if self.shards == 1:
            levels, _ = self.known(0, pushing.get(0, ()))
            return LeasePlan({0: lease}, _cutoff(levels, lease))
        self._round += 1
        now = time.monotonic()
        by_prio: dict[int, list[tuple[int, int]]] = {}  # priority: [(shard, how many)]
        rest: list[tuple[int, int, int]] = []  # (last known priority, shard, how many)
        unknown: list[tuple[bool, bool, float, int]] = []  # (not due, not poked, seen, shard)
        for i, v in enumerate(self._views):
            levels, below = self.known(i, pushing.get(i, ()))
            due = v.due_at is not None and v.due_at <= now
            for prio, n in levels:
                by_prio.setdefault(prio, []).append((i, n))
            if below > 0:
                rest.append((levels[-1][0] if levels else -(10**9), i, below))
            stale = v.seen_at is None or v.poked or now - v.seen_at >= self.refresh
            if not levels and not below and (due or stale or i in writing):
                seen = v.seen_at if v.seen_at is not None else -1.0
                unknown.append((not due, not v.poked, seen, i))
        plan: dict[int, int] = {}
        left = lease
        cutoff: int | None = None
        for prio in sorted(by_prio, reverse=True):
            if left <= 0:
                break
            left = self._share(by_prio[prio], left, writing, plan)
            cutoff = prio
        floor = cutoff if left <= 0 else None
        if left > 0:
            # what shards hold below the levels they told, in the order of their last one
            rest.sort(key=lambda t: -t[0])
            j = 0
            while j < len(rest) and left > 0:
                tied = [(s, n) for p, s, n in rest[j:] if p == rest[j][0]]
                j += len(tied)
                left = self._share(tied, left, writing, plan)
        unknown.sort()
        for k, (_, _, _, s) in enumerate(unknown):
            # what is left is shared among the shards to look at; the rest are read only
            share = math.ceil(left / (len(unknown) - k)) if left > 0 else 0
            plan[s] = plan.get(s, 0) + share
            left -= share
        return LeasePlan(plan, cutoff, floor)

    def _share(
        self, tied: list[tuple[int, int]], left: int, writing: set[int], plan: dict[int, int]
    ) -> int:
        """Share ``left`` among shards that tie (shard, how many it holds there), at least
        lease_chunk each, none given more than it holds: first those this flush calls anyway
        (no extra call), that gave all they were asked last time and fewer than ROTATE leases
        in a row, the most recently leased from first (a node stays with one shard, though its
        acks and links reach the shard before it a flush later); then the others, the least
        recently leased from first (every shard, and its sites, gets its turn). Returns what is
        left."""
        views = self._views
        tied = sorted(tied, key=lambda t: (views[t[0]].leased_round, views[t[0]].salt))
        calling = [
            t
            for t in tied
            if (t[0] in writing or t[0] in plan)
            and not views[t[0]].short
            and views[t[0]].stays < ROTATE
        ]
        calling.sort(key=lambda t: -views[t[0]].leased_round)
        stayed = {s for s, _ in calling}
        tied = calling + [t for t in tied if t not in calling]
        room = dict(tied)
        while left > 0:
            # again while some hold more: what one could not give goes to the others
            active = [s for s, _ in tied if room[s] > 0]
            if not active:
                break
            for k, s in enumerate(active):
                each = max(self.lease_chunk, math.ceil(left / (len(active) - k)))
                take = min(left, each, room[s])
                if take > 0:
                    plan[s] = plan.get(s, 0) + take
                    room[s] -= take
                    left -= take
                    view = views[s]
                    if view.leased_round != self._round:
                        view.stays = view.stays + 1 if s in stayed else 1
                    view.leased_round = self._round
        return left


def _cutoff(levels: list[tuple[int, int]], lease: int) -> int | None:
    """The priority at which ``lease`` requests of ``levels`` (best first) are taken."""
    cutoff = None
    for prio, n in levels:
        cutoff = prio
        lease -= n
        if lease <= 0:
            break
    return cutoff
