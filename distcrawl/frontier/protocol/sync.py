"""``sync``: a node's flush, one call per shard it has work for, in one round trip.

Children and acks go to the shard of their site; leases come from the shards whose queue head
has the best priority this node knows of (:class:`~distcrawl.frontier.views.ShardViews`), and
every shard called also hands out a few of what it holds above the worst priority leased
elsewhere. A fenced call (a node's tag) carries the node's marks; a shard that lost the last
one does nothing and says so (``rewound``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
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
    fingerprint_args,
    raw_text,
    text,
)
from distcrawl.frontier.protocol.runner import (
    Call,
    Step,
    control_call,
    redis_command,
    seeds_call,
)
from distcrawl.frontier.protocol.spec import COMMANDS, TOMBSTONE
from distcrawl.frontier.sites import payload_site, record_site, split_value

if TYPE_CHECKING:
    from distcrawl.frontier.store import FrontierStore

__all__ = ["Fence", "ShardBatch", "ShardReply", "SyncResult", "is_tombstone"]

_SYNC = COMMANDS["sync"]
#: most children a call sends grouped (their order goes as 4 hex digits each)
_MOST_GROUPED = 0xFFFF


def is_tombstone(mark: bytes) -> bool:
    """Whether a mark a shard holds for a node is a recovery's tombstone (the node was
    presumed dead), not one the node wrote."""
    return mark.startswith(TOMBSTONE.encode())


@dataclass
class ShardBatch:
    """Everything one flush sends to one shard."""

    children: list[Child] = field(default_factory=list)
    acks: list[Lease] = field(default_factory=list)
    dead: list[DeadLetter] = field(default_factory=list)
    feedback: list[Feedback] = field(default_factory=list)
    revisits: list[Revisit] = field(default_factory=list)
    lease: int = 0
    #: then up to ``extra`` more, only of a priority higher than ``above`` (the flush's cutoff:
    #: the lowest priority it knows it leases)
    above: int | None = None
    extra: int = 0
    #: lease nothing of a lower priority than this (None: no floor)
    floor: int | None = None
    #: call the shard even with nothing to send or lease, to learn its queue
    read: bool = False

    def __bool__(self) -> bool:
        return bool(
            self.children
            or self.acks
            or self.dead
            or self.feedback
            or self.revisits
            or self.lease
            or self.read
        )

    def args(
        self,
        node: str,
        options: dict[str, Any],
        *,
        bloom: bool = False,
        buckets: tuple[int, int] | None = None,
    ) -> list[Any]:
        """The call's arguments: node, header, then the sections column by column. With
        ``buckets`` (the state of the shard's exact dupefilter as its last reply told it) each
        child carries the bucket its fingerprint falls in, which saves the script finding it."""
        header = {
            "acks": len(self.acks),
            "dead": len(self.dead),
            "feedback": len(self.feedback),
            "revisits": len(self.revisits),
            "lease": self.lease,
            "read": 1 if self.read else 0,
            **options,
        }
        if self.above is not None and self.extra > 0:
            header["above"], header["extra"] = self.above, self.extra
        if self.floor is not None and self.lease > 0:
            header["floor"] = self.floor
        children: list[tuple[Any, ...]] = []
        groups: list[tuple[Any, ...]] = []
        grouped: list[tuple[Any, ...]] = []
        if any(c.dont_filter or c.own for c in self.children):
            header["flagged"] = 1
        elif buckets is not None and not bloom and 0 < len(self.children) <= _MOST_GROUPED:
            groups, grouped, order = _grouped(self.children, buckets)
            if grouped:
                header["order"], header["ls"] = order, f"{buckets[0]}.{buckets[1]}"
        if not grouped:
            for c in self.children:
                fp, h = fingerprint_args(c.fp, bloom=bloom)
                children.append((fp, h, _spec(c), c.payload))
        revisits = []
        for r in self.revisits:
            fp, h = fingerprint_args(r.fp, bloom=bloom)
            revisits.append((r.lease.rid, r.lease.site, r.interval_ms, r.payload, fp, h))
        header["children"], header["groups"], header["grouped"] = (
            len(children),
            len(groups),
            len(grouped),
        )
        sections: dict[str, Sequence[Sequence[Any]]] = {
            "children": children,
            "groups": groups,
            "grouped": grouped,
            "acks": [(a.rid, a.site) for a in self.acks],
            "dead": [(d.id, d.record, d.site, d.lease.rid if d.lease else "") for d in self.dead],
            "feedback": self.feedback,
            "revisits": revisits,
        }
        return [
            *_SYNC.encode(node=node, header=_SYNC.encode_header(header)),
            *_SYNC.encode_sections(sections),
        ]


@dataclass(frozen=True)
class ShardReply:
    """What ``sync`` answered for one shard."""

    shard: int
    added: int
    filtered: int
    parked: int
    acked: int
    stale_acks: int
    leased: list[Leased]
    next_due_ms: int
    #: the queue's length after the call (-1: unknown, the call neither pushed nor leased)
    queued: int
    #: the best priorities queued after the call, each with how many requests it holds
    levels: list[tuple[int, int]]
    site_events: list[SiteEvent] = field(default_factory=list)
    #: [revisit] acks that scheduled their page's next visit
    revisited: int = 0
    #: the rid each of the node's own children written got, by its index among the children
    #: (one missing was filtered)
    own: dict[int, str] = field(default_factory=dict)
    #: the state (L, split) of the shard's exact dupefilter after the call (None: not read)
    buckets: tuple[int, int] | None = None

    @property
    def head_priority(self) -> int | None:
        """The best priority queued after the call (None: nothing queued, or unknown)."""
        return self.levels[0][0] if self.levels else None

    @staticmethod
    def rewound(raw: Any) -> bytes | None:
        """What the shard holds as this node's mark when the call found its last mark gone
        (and did nothing), else None."""
        if isinstance(raw, list) and len(raw) == 2 and raw[0] in (b"rewound", "rewound"):
            found = raw[1]
            return found if isinstance(found, bytes) else str(found).encode()
        return None

    @classmethod
    def parse(cls, shard: int, raw: list[Any]) -> ShardReply:
        """The script's one flat reply (see ``sync`` in the library): lists come joined with
        NUL into one string."""
        (added, filtered, parked, acked, stale, next_due, queued, revisited, state) = raw[:9]
        out, paced, events_joined, own_joined = raw[9:13]
        levels_flat = raw[13:]
        flat = [text(v) for v in _split(events_joined)]
        events = [
            SiteEvent(flat[i], flat[i + 1], float(flat[i + 2]), float(flat[i + 3]), flat[i + 4])
            for i in range(0, len(flat) - 4, 5)
        ]
        paced_rids = {raw_text(p) for p in _split(paced)}
        leased = []
        for entry in _split(out):
            # "<priority>\t<rid>\t<value>", the value as the shard keeps it
            priority, rid_raw, value = entry.split(b"\t", 2)
            rid = raw_text(rid_raw)
            site, payload = split_value(value)
            lease = Lease(shard, rid, site)
            leased.append(Leased(lease, payload, int(priority), rid in paced_rids))
        levels = [
            (int(levels_flat[i]), int(levels_flat[i + 1])) for i in range(0, len(levels_flat), 2)
        ]
        own = _split(own_joined)
        return cls(
            shard=shard,
            added=int(added),
            filtered=int(filtered),
            parked=int(parked),
            acked=int(acked),
            stale_acks=int(stale),
            leased=leased,
            next_due_ms=int(next_due),
            queued=int(queued),
            levels=levels,
            site_events=events,
            revisited=int(revisited),
            own={int(own[i]) - 1: raw_text(own[i + 1]) for i in range(0, len(own), 2)},
            buckets=_buckets(text(state)),
        )


def _split(joined: Any) -> list[bytes]:
    """A list the script joined with NUL ('' = none), or sent as a list where an item holds a
    NUL."""
    if isinstance(joined, list):
        return [v if isinstance(v, bytes) else str(v).encode() for v in joined]
    raw = joined if isinstance(joined, bytes) else str(joined).encode()
    return raw.split(b"\0") if raw else []


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
        store.views.update(r, server_ms)
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


def _spec(c: Child) -> str:
    """A child's spec (see ``sync`` in the library): "[d][l]priority[ delay_ms site]"."""
    # "=": the payload's URL names the site, so the library stores the payload alone
    site = "=" if c.site and payload_site(c.payload) == c.site else c.site
    spec = f"{'d' if c.dont_filter else ''}{'l' if c.own else ''}{c.priority}"
    if c.delay_ms or site != "=":
        spec += f" {c.delay_ms} {site}"
    return spec


def _grouped(
    children: list[Child], buckets: tuple[int, int]
) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]], str]:
    """Children grouped by the dupefilter bucket their fingerprints fall in (``buckets``: the
    shard's state, L and split): the groups (bucket, size), the children in group order
    (fp, spec, payload), and each one's index in ``children`` as 4 hex digits; nothing where
    a child has no fingerprint (its call sends them ungrouped)."""
    by_bucket: dict[Any, list[int]] = {}
    fps = []
    for i, c in enumerate(children):
        fp, bucket = fingerprint_args(c.fp, bloom=False, buckets=buckets)
        if not fp:
            return [], [], ""
        fps.append(fp)
        by_bucket.setdefault(bucket, []).append(i)
    groups, grouped, order = [], [], []
    for bucket, members in by_bucket.items():
        groups.append((bucket, len(members)))
        for i in members:
            c = children[i]
            grouped.append((fps[i], _spec(c), c.payload))
            order.append(f"{i:04x}")
    return groups, grouped, "".join(order)


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


def _buckets(state: str) -> tuple[int, int] | None:
    """The state "L.split" a reply tells, as numbers (None: none told)."""
    level, dot, split = state.partition(".")
    return (int(level), int(split)) if dot else None


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
