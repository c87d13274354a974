"""``sync``: a node's flush, one call per shard it has work for, in one round trip.

Children and acks go to the shard of their site; leases come from the shards that hold the
best priorities this node knows of (:class:`~distcrawl.frontier.views.ShardViews`), down to
its cutoff, and every shard called also hands out what it holds above the cutoff. A fenced
call (a node's tag) carries the node's marks; a shard that lost the last one does nothing and
says so (``rewound``). Each call's wire form: :mod:`~distcrawl.frontier.protocol.calls`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from distcrawl.frontier.batch import (
    Child,
    DeadLetter,
    Feedback,
    Lease,
    Leased,
    Revisit,
    SiteBudget,
    SiteEvent,
)
from distcrawl.frontier.protocol.calls import ShardBatch, ShardReply
from distcrawl.frontier.protocol.probes import Probes
from distcrawl.frontier.protocol.runner import (
    Call,
    Step,
    control_call,
    redis_command,
    seeds_call,
)
from distcrawl.frontier.protocol.spec import TOMBSTONE
from distcrawl.frontier.sites import record_site

if TYPE_CHECKING:
    from distcrawl.frontier.store import FrontierStore

__all__ = ["Fence", "ShardBatch", "ShardReply", "SyncResult", "is_tombstone"]


def is_tombstone(mark: bytes) -> bool:
    """Whether a mark a shard holds for a node is a recovery's tombstone (the node was
    presumed dead), not one the node wrote."""
    return mark.startswith(TOMBSTONE.encode())


@dataclass
class Fence:
    """A fenced node's marks, per shard: the last one the shard confirmed, and the one sent
    in a call whose reply never came (sent again, so that call counts if it ran)."""

    last: dict[int, str] = field(default_factory=dict)
    pending: dict[int, str] = field(default_factory=dict)
    count: int = 0


@dataclass
class SyncResult:
    """What one ``sync`` did, summed over the shards it called."""

    added: int = 0
    filtered: int = 0
    parked: int = 0
    acked: int = 0
    stale_acks: int = 0
    leased: list[Leased] = field(default_factory=list)
    #: ms until the next parked retry or waiting site falls due in any shard (-1: none known)
    next_due_ms: int = -1
    priority_inversions: int = 0
    shards_called: int = 0
    #: adaptive cuts of site rates made, and cuts found worn off, in this call
    site_events: list[SiteEvent] = field(default_factory=list)
    #: [revisit] acks that scheduled their page's next visit (counted in ``acked`` too)
    revisited: int = 0
    #: a fenced call: what a shard held as the node's mark where its last one was gone (Redis
    #: came back with older state); those shards did nothing, and their batches are in unsent
    rewound: bytes | None = None
    unsent: list[ShardBatch] = field(default_factory=list)
    #: ``seeds_done`` was asked and a shard rewound: the taken list stays (its seeds go
    #: again with the unsent batches, and say ``seeds_done`` again then)
    seeds_pending: bool = False
    #: the node's own children written by this call, each with its lease (None: the
    #: dupefilter already held it, and nothing was written)
    own: list[tuple[Child, Lease | None]] = field(default_factory=list)
    #: the probes no dupefilter holds: the caller pushes them with its next flush (those
    #: found held count in ``filtered``)
    probed: list[Child] = field(default_factory=list)


@dataclass
class Flush:
    """What a node hands ``sync``: the records of one flush, and how many to lease."""

    children: list[Child]
    acks: list[Lease]
    dead: list[DeadLetter]
    rejected: list[str]
    seeds_done: bool
    lease: int
    budget: SiteBudget
    feedback: list[Feedback]
    tag: str | None
    revisits: list[Revisit]
    probes: list[Child] = field(default_factory=list)

    @classmethod
    def of(
        cls,
        *,
        children: Iterable[Any],
        acks: Iterable[Lease],
        dead: Iterable[Any],
        rejected: Iterable[str],
        seeds_done: bool,
        lease: int,
        budget: SiteBudget | None,
        feedback: Iterable[Any],
        tag: str | None,
        revisits: Iterable[Revisit],
        probes: Iterable[Any] = (),
    ) -> Flush:
        return cls(
            [c if isinstance(c, Child) else Child(*c) for c in children],
            list(acks),
            [d if isinstance(d, DeadLetter) else DeadLetter(*d) for d in dead],
            list(rejected),
            seeds_done,
            lease,
            budget or SiteBudget(),
            [f if isinstance(f, Feedback) else Feedback(*f) for f in feedback],
            tag,
            list(revisits),
            [c if isinstance(c, Child) else Child(*c) for c in probes],
        )


def _batches(store: FrontierStore, flush: Flush) -> dict[int, ShardBatch]:
    """The flush's records by shard, and how many each shard leases."""
    keys = store.keys
    batches: dict[int, ShardBatch] = {}

    def batch(shard: int) -> ShardBatch:
        b = batches.get(shard)
        if b is None:
            b = batches[shard] = ShardBatch()
        return b

    for c in flush.children:
        batch(keys.shard_of(c.site)).children.append(c)
    for a in flush.acks:
        batch(a.shard).acks.append(a)
    for d in flush.dead:
        site = d.site or record_site(d.record)
        batch(keys.shard_of(site)).dead.append(d._replace(site=site))
    for f in flush.feedback:
        batch(keys.shard_of(f.site)).feedback.append(f)
    if flush.revisits:
        if store.forget_ms is None:
            raise ValueError("revisits need revisit mode (FrontierStore(forget_ms=...))")
        for rv in flush.revisits:
            batch(rv.lease.shard).revisits.append(rv)
    if flush.lease > 0:
        # the priorities this flush's children bring to each shard's queue count as queued
        pushing: dict[int, list[tuple[int, int]]] = {}
        for shard, b in batches.items():
            counts: dict[int, int] = {}
            for c in b.children:
                if not c.own and not c.delay_ms:
                    counts[c.priority] = counts.get(c.priority, 0) + 1
            if counts:
                pushing[shard] = list(counts.items())
        plan = store.views.plan(flush.lease, set(batches), pushing)
        for shard, n in plan.lease.items():
            b = batch(shard)
            b.lease, b.read, b.floor = n, True, plan.floor
        if plan.cutoff is not None:
            # every shard called also hands out what it holds above the cutoff (what other
            # nodes pushed there since this node looked is unknown here): no call is added
            extra = max(1, flush.lease)
            for b in batches.values():
                b.above, b.extra, b.read = plan.cutoff, extra, True
    return batches


def sync(store: FrontierStore, node: str, flush: Flush) -> Step[SyncResult]:
    """The step of one flush (see :meth:`FrontierStore.sync`)."""
    keys = store.keys
    probes = Probes(store, flush.probes)
    if probes.unasked:
        flush.children = [*flush.children, *probes.unasked]
    batches = _batches(store, flush)
    budget = flush.budget
    options: dict[str, Any] = {
        "live": store.live_nodes,
        "idle": 1 if store.idle_nodes > 0 else 0,
        "wake": keys.wake,
        "paused": 1 if store.paused else 0,
        "rate": budget.rate,
        "conc": budget.concurrency,
        "burst": budget.burst,
        "adaptive": budget.adaptive_rate,
        "recover": int(budget.recovery * 1000),
        "bloom": store.bloom_shape,
        "rv": store.forget_ms,
    }
    order = sorted(s for s, b in batches.items() if b)
    bloom = store.bloom_shape is not None
    tag = flush.tag
    fence = store.fence(node) if tag is not None else None
    calls = []
    for s in order:
        opts = {**options, "shard": s}
        if fence is not None:
            mark = fence.pending.get(s)
            if mark is None:
                fence.count += 1
                mark = fence.pending[s] = f"{tag}:{fence.count}"
            opts |= {"mp": fence.last.get(s, ""), "mn": mark, "tag": tag}
        # the children's buckets where the node knows the shard's (revisit mode: one
        # dupefilter per generation, whose state the node does not know)
        buckets = None if store.forget_ms else store.views[s].buckets
        args = batches[s].args(node, opts, bloom=bloom, buckets=buckets)
        calls.append(Call("sync", (keys.shard(s).prefix,), args))
    calls += probes.calls
    # the crawl-wide heads: what this node's last calls saw goes in, what the others saw comes
    # back (its next lease plans with it), in the same round trip
    heads = flush.lease > 0 and keys.shards > 1
    if heads:
        learned = store.views.learned()
        if learned:
            calls.append(redis_command("HSET", keys.heads, *_flat(learned)))
        calls.append(redis_command("HGETALL", keys.heads))
    results = yield calls
    server_ms = int(store.server_time() * 1000)
    if heads:
        store.views.told(_pairs(results[-1]), server_ms, set(order))
    result = SyncResult(shards_called=len(order))
    at = len(order)
    result.probed, result.filtered = probes.answered(results[at : at + len(probes.calls)])
    replies = []
    tombstone = None
    for s, raw in zip(order, results, strict=False):
        if fence is not None:
            mark = fence.pending.pop(s, "")
            found = ShardReply.rewound(raw)
            if found is not None:
                fence.last.pop(s, None)
                result.rewound = found
                result.unsent.append(batches[s])
                if is_tombstone(found):
                    tombstone = found
                continue
            fence.last[s] = mark
        replies.append(ShardReply.parse(s, raw))
    if fence is not None and tombstone is not None:
        # presumed dead and recovered: every shard holds the recovery's tombstone as this
        # node's mark (those this call wrote to ran before the recovery got there, and say
        # so at their next call). The caller heart-beats before its next sync, which may
        # then go to any shard, one never called before too
        done = {r.shard for r in replies}
        marked = tombstone.decode("utf-8", "replace")
        for i in range(keys.shards):
            if i not in done:
                fence.last[i] = marked
    for r in replies:
        store.views.update(r, server_ms, batches[r.shard].lease)
        result.added += r.added
        result.filtered += r.filtered
        result.parked += r.parked
        result.acked += r.acked
        result.stale_acks += r.stale_acks
        result.leased += r.leased
        result.site_events += r.site_events
        result.revisited += r.revisited
        children = batches[r.shard].children
        if any(c.own for c in children):
            for j, child in enumerate(children):
                if child.own:
                    rid = r.own.get(j)
                    lease = Lease(r.shard, rid, child.site) if rid else None
                    result.own.append((child, lease))
    result.priority_inversions = _inversions(replies)
    result.next_due_ms = store.views.next_due_ms()
    after: list[Call] = []
    rejected = flush.rejected
    if flush.seeds_done:
        # Once the shards said OK, never in the same round trip: on a cluster the seed list's
        # master may run its part before a shard's master runs the push, and seeds of a node
        # killed in between would be in no list at all. A shard that rewound wrote none of
        # what it carried: the taken list stays until its seeds are in.
        cleared = result.rewound is None
        result.seeds_pending = not cleared
        if cleared:
            after.append(seeds_call(keys, "staged", node=node))
    if rejected:
        after.append(control_call(keys, "reject", records=rejected))
    idle = not result.leased
    flip = flush.lease > 0 and idle != store.is_idle(node)
    if flip:
        # one control call per change, not per flush: nodes that sleep are woken by the
        # shards that get work (the wake channel)
        after.append(control_call(keys, "heartbeat", node=node, info="", idle="1" if idle else "0"))
    if after:
        answers = yield after
        if flush.lease > 0:
            store.set_idle(node, idle)
        if flip:
            store.idle_nodes = int(answers[-1][2])  # the heartbeat's reply: who sleeps now
    return result


def _flat(mapping: dict[int, str]) -> list[Any]:
    out: list[Any] = []
    for k, v in mapping.items():
        out += [k, v]
    return out


def _pairs(raw: Any) -> dict[bytes, bytes]:
    """HGETALL's answer as a dict, whatever the client's reply form (a dict, or a flat list)."""
    if isinstance(raw, dict):
        return raw
    return dict(zip(raw[0::2], raw[1::2], strict=False))


def _inversions(replies: list[ShardReply]) -> int:
    """Leased requests of lower priority than another read shard's best one still queued."""
    heads = [(r.shard, r.head_priority) for r in replies if r.head_priority is not None]
    if not heads:
        return 0
    count = 0
    for r in replies:
        best_elsewhere = max((p for s, p in heads if s != r.shard), default=None)
        if best_elsewhere is None:
            continue
        count += sum(1 for leased in r.leased if leased.priority < best_elsewhere)
    return count
