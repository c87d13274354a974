"""What goes wrong and what the products hold, crawl-wide, in the control slot: a node's
failures and products added to the crawl's error groups and its sites' field coverage (one
``observe`` call, pipelined with the node's heartbeat: no round trip of its own), the run of the
crawl, its findings, and the one notice of each event the cluster sends.

The groups' and figures' shape: :mod:`distcrawl.base.grouping`, :mod:`distcrawl.base.coverage`;
the keys: ``run``, ``errors``, ``errors:count``, ``errors:totals``, ``quality``, ``findings``,
``findings:at``, ``notices`` of :class:`~distcrawl.frontier.keys.ControlKeys`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

from distcrawl.base.coverage import SiteFigures
from distcrawl.base.grouping import OTHER_TEMPLATE
from distcrawl.frontier.batch import text
from distcrawl.frontier.protocol.membership import Beat, heartbeat_calls, read_beat
from distcrawl.frontier.protocol.runner import Call, Step, control_call, redis_command

if TYPE_CHECKING:
    from distcrawl.frontier.keys import ControlKeys
    from distcrawl.frontier.store import FrontierStore

__all__ = [
    "ErrorGroup",
    "GroupEntry",
    "Limits",
    "Observed",
    "Run",
    "Totals",
    "claim_notice",
    "claim_run",
    "error_groups",
    "finish_run",
    "heartbeat_observed",
    "live_nodes",
    "read_findings",
    "read_quality",
    "record_finding",
    "top_groups",
]


class GroupEntry(NamedTuple):
    """One group's failures in a node's delta: ``failures`` since the last call,
    with some sample URLs; ``snapshot``: the node keeps the first occurrence it saw."""

    group: str
    other: str
    site: str
    kind: str
    template: str
    failures: int
    samples: tuple[str, ...]
    snapshot: bool


@dataclass(frozen=True)
class Limits:
    """The crawl-wide caps an ``observe`` call applies (the settings of their names)."""

    groups_max: int = 1000
    snapshots_max: int = 200
    window: int = 200


@dataclass
class Observed:
    """What an ``observe`` call answered: the groups whose first occurrence this node is to
    store, and the figures of the sites whose products passed a quarter of the window."""

    granted: list[str] = field(default_factory=list)
    sites: dict[str, SiteFigures] = field(default_factory=dict)


def encode_delta(groups: list[GroupEntry], products: Mapping[str, Sequence[Sequence[Any]]]) -> str:
    """The ``delta`` argument of ``observe``: the groups' failures, and each site's stored
    products in chunks ``(products, {field: products holding it})``, oldest first (the crawl
    marks its window between chunks: a chunk should hold at most a quarter of it)."""
    rows = [
        [g.group, g.other, g.site, g.kind, g.template, g.failures, list(g.samples), int(g.snapshot)]
        for g in groups
    ]
    quality = {site: [[int(n), dict(f)] for n, f in chunks] for site, chunks in products.items()}
    return json.dumps({"e": rows, "ot": OTHER_TEMPLATE, "q": quality}, separators=(",", ":"))


def observe_call(keys: ControlKeys, node: str, delta: str, limits: Limits) -> Call:
    return control_call(
        keys,
        "observe",
        node=node,
        groups_max=limits.groups_max,
        snaps_max=limits.snapshots_max,
        window=limits.window,
        delta=delta,
    )


def read_observed(raw: Any) -> Observed:
    granted, rolled = raw
    items = list(rolled or ())
    sites = {text(items[i]): SiteFigures.from_json(items[i + 1]) for i in range(0, len(items), 2)}
    return Observed([text(g) for g in granted or ()], sites)


def heartbeat_observed(
    store: FrontierStore, node: str, info_json: str, delta: str, limits: Limits
) -> Step[tuple[int, Observed | None]]:
    """A heartbeat, and with a *delta* the ``observe`` call in the same round trip."""
    calls = heartbeat_calls(store, node, info_json)
    beat_calls = len(calls)
    if delta:
        calls.append(observe_call(store.keys, node, delta, limits))
    sent = time.time()
    replies = yield calls
    beat: Beat = read_beat(store, replies[:beat_calls], sent)
    return beat.now_ms, (read_observed(replies[beat_calls]) if delta else None)


# -- the run ---------------------------------------------------------------------------------


class Run(NamedTuple):
    """The crawl's run: its id, when it started and ended (ms, server clock; 0: not yet)."""

    id: str
    started_ms: int
    by: str
    finished_ms: int


def _run(raw: list[Any]) -> Run:
    values = [text(v) if v is not None else "" for v in raw]
    values += [""] * (4 - len(values))
    return Run(values[0], int(values[1] or 0), values[2], int(values[3] or 0))


def claim_run(keys: ControlKeys, run_id: str, node: str) -> Step[Run]:
    """The crawl's run, made with *run_id* if it has none."""
    [raw] = yield [control_call(keys, "run", id=run_id, node=node)]
    return _run(list(raw))


def read_run(keys: ControlKeys) -> Step[Run | None]:
    [raw] = yield [redis_command("HMGET", keys.run, "id", "started", "by", "finished")]
    run = _run(list(raw))
    return run if run.id else None


def finish_run(keys: ControlKeys) -> Step[int]:
    """Mark the run finished now (server clock); the time it was marked, or 0 when another
    caller marked it first."""
    [(seconds, micros)] = yield [redis_command("TIME")]
    now = int(seconds) * 1000 + int(micros) // 1000
    [first] = yield [redis_command("HSETNX", keys.run, "finished", now)]
    return now if int(first) else 0


def live_nodes(keys: ControlKeys, timeout_ms: int) -> Step[int]:
    """Nodes that heart-beat within *timeout_ms* (server clock)."""
    [(seconds, micros)] = yield [redis_command("TIME")]
    now = int(seconds) * 1000 + int(micros) // 1000
    [n] = yield [redis_command("ZCOUNT", keys.nodes, now - timeout_ms, "+inf")]
    return int(n)


# -- error groups ----------------------------------------------------------------------------


@dataclass
class ErrorGroup:
    """One error group as the crawl keeps it."""

    id: str
    site: str
    kind: str
    template: str
    count: int
    first_ms: int
    last_ms: int
    samples: list[str]
    #: the node granted its snapshot ("": none was taken)
    snapshot_node: str

    @classmethod
    def of(cls, group: str, raw: Any, count: Any) -> ErrorGroup:
        try:
            meta = json.loads(raw) if raw is not None else {}
        except ValueError:
            meta = {}
        if not isinstance(meta, dict):
            meta = {}
        samples = meta.get("samples")
        return cls(
            id=group,
            site=str(meta.get("site") or ""),
            kind=str(meta.get("kind") or ""),
            template=str(meta.get("template") or ""),
            count=int(float(count or 0)),
            first_ms=int(meta.get("first") or 0),
            last_ms=int(meta.get("last") or 0),
            samples=[str(s) for s in samples] if isinstance(samples, list) else [],
            snapshot_node=str(meta.get("snap") or ""),
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "site": self.site,
            "kind": self.kind,
            "template": self.template,
            "count": self.count,
            "first_seen_ms": self.first_ms,
            "last_seen_ms": self.last_ms,
            "samples": list(self.samples),
            "snapshot": bool(self.snapshot_node),
        }


@dataclass
class Totals:
    """The groups and failures by kind, and the snapshots granted."""

    groups: int = 0
    snapshots: int = 0
    groups_by_kind: dict[str, int] = field(default_factory=dict)
    events_by_kind: dict[str, int] = field(default_factory=dict)

    @classmethod
    def of(cls, raw: dict[Any, Any]) -> Totals:
        out = cls()
        for key, value in (raw or {}).items():
            name, n = text(key), int(float(text(value)))
            if name == "groups":
                out.groups = n
            elif name == "snapshots":
                out.snapshots = n
            elif name.startswith("groups:"):
                out.groups_by_kind[name[7:]] = n
            elif name.startswith("events:"):
                out.events_by_kind[name[7:]] = n
        return out


def top_groups(keys: ControlKeys, n: int) -> Step[tuple[list[ErrorGroup], Totals]]:
    """The *n* groups with most failures, and the totals (two round trips, bounded)."""
    top, totals = yield [
        redis_command("ZREVRANGE", keys.error_counts, 0, max(0, n - 1), "WITHSCORES"),
        redis_command("HGETALL", keys.error_totals),
    ]
    pairs = _pairs(top)
    if not pairs:
        return [], Totals.of(totals)
    [metas] = yield [redis_command("HMGET", keys.errors, *[g for g, _ in pairs])]
    groups = [ErrorGroup.of(g, raw, c) for (g, c), raw in zip(pairs, metas, strict=True)]
    return groups, Totals.of(totals)


def error_groups(keys: ControlKeys) -> Step[list[ErrorGroup]]:
    """Every group of the crawl (at most DISTCRAWL_ERROR_GROUPS_MAX and one per kind), the
    most failures first."""
    counts, metas = yield [
        redis_command("ZREVRANGE", keys.error_counts, 0, -1, "WITHSCORES"),
        redis_command("HGETALL", keys.errors),
    ]
    by_id = {text(k): v for k, v in (metas or {}).items()}
    return [ErrorGroup.of(g, by_id.get(g), c) for g, c in _pairs(counts)]


def _pairs(raw: Any) -> list[tuple[str, float]]:
    """ZRANGE ... WITHSCORES as (member, score) pairs, whatever the client's reply shape."""
    items = list(raw or ())
    if items and isinstance(items[0], (list, tuple)):
        return [(text(m), float(s)) for m, s in items]
    return [(text(items[i]), float(items[i + 1])) for i in range(0, len(items), 2)]


# -- field coverage and findings -------------------------------------------------------------


def read_quality(keys: ControlKeys, sites: list[str] | None = None) -> Step[dict[str, SiteFigures]]:
    """The figures of *sites* (all sites when None)."""
    if sites is None:
        [raw] = yield [redis_command("HGETALL", keys.quality)]
        return {text(k): SiteFigures.from_json(v) for k, v in (raw or {}).items()}
    if not sites:
        return {}
    [values] = yield [redis_command("HMGET", keys.quality, *sites)]
    return {s: SiteFigures.from_json(v) for s, v in zip(sites, values, strict=True) if v}


def record_finding(keys: ControlKeys, key: str, record: str, at_ms: int) -> Step[bool]:
    """Keep a finding once per crawl; True for the node that recorded it first."""
    first, _ = yield [
        redis_command("HSETNX", keys.findings, key, record),
        redis_command("ZADD", keys.findings_at, "NX", at_ms, key),
    ]
    return bool(int(first))


def read_findings(keys: ControlKeys, limit: int | None = None) -> Step[tuple[list[Any], int]]:
    """The latest *limit* findings (all when None), newest first, as JSON objects, and how
    many the crawl holds."""
    stop = -1 if limit is None else max(0, limit - 1)
    names, total = yield [
        redis_command("ZREVRANGE", keys.findings_at, 0, stop),
        redis_command("ZCARD", keys.findings_at),
    ]
    names = [text(n) for n in names or ()]
    if not names:
        return [], int(total)
    [raw] = yield [redis_command("HMGET", keys.findings, *names)]
    found = []
    for value in raw:
        try:
            record = json.loads(value) if value is not None else None
        except ValueError:
            record = None
        if isinstance(record, dict):
            found.append(record)
    return found, int(total)


# -- notices ---------------------------------------------------------------------------------

#: what ``claim_notice`` answers
SEND, DUPLICATE, RATE_LIMITED = 1, 0, -1


def claim_notice(keys: ControlKeys, event: str, record: str, rate: int) -> Step[int]:
    """Claim the notice of *event* for the cluster: :data:`SEND` (this node sends it),
    :data:`DUPLICATE` (claimed before) or :data:`RATE_LIMITED`."""
    [got] = yield [control_call(keys, "notice", event=event, record=record, rate=rate)]
    return int(got)
