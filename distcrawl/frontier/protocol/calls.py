"""One ``sync`` call's wire form: what a node sends one shard (:class:`ShardBatch`, the
children grouped by dupefilter bucket where it can) and what the shard answers
(:class:`ShardReply`, one flat list)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from distcrawl.frontier.batch import (
    Child,
    DeadLetter,
    Feedback,
    Lease,
    Leased,
    Revisit,
    SiteEvent,
    fingerprint_args,
    raw_text,
    text,
)
from distcrawl.frontier.protocol.spec import COMMANDS
from distcrawl.frontier.sites import payload_site, split_value

__all__ = ["ShardBatch", "ShardReply"]

_SYNC = COMMANDS["sync"]
#: most children a call sends grouped (their order goes as 4 hex digits each)
_MOST_GROUPED = 0xFFFF


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


def _buckets(state: str) -> tuple[int, int] | None:
    """The state "L.split" a reply tells, as numbers (None: none told)."""
    level, dot, split = state.partition(".")
    return (int(level), int(split)) if dot else None
