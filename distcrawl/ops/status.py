"""The cluster view: what a crawl's Redis keys say about the whole cluster, as one dict.

Nothing here is stored: every figure is read from the keys the frontier and the nodes keep
(see the header of ``frontier/frontier.lua``). Rates come from two or more samples of the
stats each node publishes with its heartbeat, so the view is derived, never kept twice.

The reading is written once, as a plan of pipelined Redis batches (:func:`_plan`), and driven
by a blocking client (:func:`read_snapshot`, for commands) or by ``redis.asyncio``
(:func:`aread_snapshot`, for the progress line on a node's reactor).
"""

from __future__ import annotations

import json
import math
import time
from collections import deque
from collections.abc import Generator, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from distcrawl.base.config import SETTINGS
from distcrawl.base.rates import PAGES_PREFIX, is_number, prune, published_rates
from distcrawl.base.rates import counters as node_counters
from distcrawl.frontier.connection import is_cluster_client
from distcrawl.frontier.keys import FrontierKeys, ShardKeys
from distcrawl.frontier.store import effective_factor

__all__ = [
    "DEFAULT_DEAD_SAMPLE",
    "DEFAULT_PAGE_PRIORITIES",
    "DEFAULT_RATE_WINDOW",
    "RateTracker",
    "aread_snapshot",
    "backlog",
    "build_status",
    "node_state",
    "priority_bands",
    "read_snapshot",
    "record_site",
    "score_range",
]

#: queue priority per page kind: the default of the setting ``PAGE_PRIORITIES``
DEFAULT_PAGE_PRIORITIES: Mapping[str, int] = SETTINGS.default("PAGE_PRIORITIES")
#: at most this many dead letters are read to count them by reason and by site
DEFAULT_DEAD_SAMPLE = 10_000
#: seconds of node samples over which pages/min and products/min are averaged
DEFAULT_RATE_WINDOW = 60.0
#: the order score is -priority * SCORE_SCALE + seq (``frontier.lua``)
SCORE_SCALE = 10_000_000_000
_SCAN_COUNT = 1000
#: the status lists this many sites at most (dead letters by site, requests waiting by site,
#: sites' budgets); per-site keys are read for these only
_TOP_SITES = 20
#: stopped and recovered nodes read from ``{S}:gone`` (newest first)
_MAX_GONE = 100
#: a plan's pseudo-command: the server time of the slot of the key given
_TIME = "time@"

# Node stats summed into "errors by kind": stats prefix -> label prefix in the status.
_ERROR_PREFIXES = {
    "retry/reason_count/": "retry/",
    "downloader/exception_type_count/": "exception/",
    "spider_exceptions/": "spider_exception/",
    "frontier/refused/": "refused/",
    "frontier/seeds/refused/": "seed_refused/",
}
_ERROR_COUNTERS = {
    "log_count/ERROR": "log_errors",
    "frontier/redis_errors": "redis_errors",
    "frontier/dead_lettered": "dead_lettered",
}
_STATUS_PREFIX = "downloader/response_status_count/"

Batch = list[tuple[str, tuple[Any, ...]]]
Plan = Generator[Batch, list[Any], dict[str, Any]]


# --------------------------------------------------------------------------- priority bands


def priority_bands(page_priorities: Mapping[str, int]) -> list[tuple[str, int | None, int | None]]:
    """``(page kind, lowest priority, highest priority + 1)`` per kind, highest first.

    A kind's band reaches halfway to its neighbours, so a retry (priority lowered by
    ``RETRY_PRIORITY_ADJUST``) or a JSON seed with its own priority still counts under the
    nearest kind; the top band is open above and the bottom one open below (``None``).
    """
    kinds = sorted(page_priorities.items(), key=lambda kv: -kv[1])
    bands: list[tuple[str, int | None, int | None]] = []
    upper: int | None = None
    for i, (kind, prio) in enumerate(kinds):
        if i + 1 < len(kinds):
            lower: int | None = math.ceil((prio + kinds[i + 1][1]) / 2)
        else:
            lower = None
        bands.append((kind, lower, upper))
        upper = lower
    return bands


def score_range(low: int | None, high: int | None) -> tuple[str, str]:
    """ZCOUNT bounds of the queue entries whose priority p satisfies ``low <= p < high``.

    With score = -p * SCALE + seq and 0 < seq < SCALE, ``floor(score / SCALE) == -p``.
    """
    top = "+inf" if low is None else f"({-(low - 1) * SCORE_SCALE}"
    bottom = "-inf" if high is None else f"({-(high - 1) * SCORE_SCALE}"
    return bottom, top


# --------------------------------------------------------------------------- reading


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


# Keys of the status registries kept by the frontier script (``[status registry]`` in
# ``frontier.lua``): the nodes gone in the last day (control slot), and per shard a hash of
# the requests in its waiting rooms and of the leases each node holds there.
def _gone(keys: FrontierKeys) -> str:
    return f"{keys.prefix}:gone"


def _shard_status(shard: ShardKeys) -> str:
    return f"{shard.prefix}:status"


def _shard_cuts(shard: ShardKeys) -> str:
    return f"{shard.prefix}:cuts"


_LEASES_FIELD = "leases:"


def _plan(
    keys: FrontierKeys,
    bands: list[tuple[str, int | None, int | None]],
    dead_sample: int,
) -> Plan:
    """The Redis reads of one snapshot, as batches; each ``yield`` receives a batch's replies.

    Bounded by the number of shards and nodes, never by the number of sites or keys: nodes
    come from the heartbeat set, the registry of stopped and recovered nodes and the lease
    counts each shard keeps per node; per-site detail is read for the top sites only (the
    first due to leave their waiting room in each shard, then the 20 with most waiting).
    Nothing SCANs the keyspace.
    """
    shards = keys.all_shards()
    first: Batch = [
        ("zrange", (keys.nodes, 0, -1)),
        ("zrevrange", (_gone(keys), 0, _MAX_GONE - 1)),
        ("llen", (keys.start_urls,)),
        ("llen", (keys.rejected,)),
        ("get", (keys.paused,)),
    ]
    per_shard = 13 + len(bands)
    for shard in shards:
        first += [
            ("zcard", (shard.queue,)),
            ("zcard", (shard.delayed,)),
            ("hget", (shard.seen_info, "n")),
            ("strlen", (shard.bloom,)),
            ("hlen", (shard.dead,)),
            ("hlen", (shard.requests,)),
            ("zcard", (shard.waiting,)),
            ("zrange", (shard.waiting, 0, _TOP_SITES - 1)),
            ("hgetall", (_shard_status(shard),)),
            ("zrevrange", (_shard_cuts(shard), 0, _TOP_SITES - 1, True)),  # withscores
            # [revisit] pages scheduled again, the next due, the oldest due and not leased
            ("zcard", (shard.revisit,)),
            ("zrange", (shard.revisit, 0, 0, False, True)),  # withscores
            ("zrange", (shard.revisit_late, 0, 0, False, True)),
        ]
        first += [("zcount", (shard.queue, *score_range(lo, hi))) for _, lo, hi in bands]
    replies = yield first
    zset_nodes = [_text(n) for n in replies[0]]
    gone = [_text(n) for n in replies[1]]
    start, rejected = int(replies[2]), int(replies[3])
    paused = replies[4]
    queued = parked = seen = bloom_bytes = dead = requests = waiting_sites = 0
    waiting_total = 0
    by_kind = {kind: 0 for kind, _, _ in bands}
    candidates: list[tuple[ShardKeys, str]] = []
    cuts: list[tuple[float, ShardKeys, str]] = []
    held: dict[str, int] = {}
    revisits = 0
    revisit_heads: list[float] = []
    late_heads: list[float] = []
    for i, shard in enumerate(shards):
        at = 5 + i * per_shard
        r = replies[at : at + per_shard]
        queued += int(r[0])
        parked += int(r[1])
        seen += int(r[2] or 0)
        bloom_bytes += int(r[3])
        dead += int(r[4])
        requests += int(r[5])
        waiting_sites += int(r[6])
        candidates += [(shard, _text(site)) for site in r[7]]
        fields = {_text(k): _text(v) for k, v in (r[8] or {}).items()}
        waiting_total += max(0, int(fields.get("waiting", 0)))
        for name, value in fields.items():
            if name.startswith(_LEASES_FIELD):
                node = name[len(_LEASES_FIELD) :]
                held[node] = held.get(node, 0) + max(0, int(value))
        cuts += [(float(ms), shard, _text(site)) for site, ms in r[9]]
        revisits += int(r[10])
        revisit_heads += [float(score) for _, score in r[11]]
        late_heads += [float(score) for _, score in r[12]]
        for (kind, _, _), n in zip(bands, r[13:], strict=True):
            by_kind[kind] += int(n)

    names = list(dict.fromkeys([*zset_nodes, *gone, *held]))
    batch: Batch = []
    for name in names:
        batch += [
            ("zscore", (keys.nodes, name)),
            ("hgetall", (keys.node(name),)),
            ("llen", (keys.seeding(name),)),
        ]
    batch += [("zcard", (shard.wait(site),)) for shard, site in candidates]
    replies = (yield batch) if batch else []
    nodes: dict[str, dict[str, Any]] = {}
    for i, name in enumerate(names):
        score, fields, seeding = replies[3 * i : 3 * i + 3]
        fields = {_text(k): v for k, v in (fields or {}).items()}
        nodes[name] = {
            "heartbeat_ms": int(float(score)) if score is not None else None,
            "info_heartbeat_ms": _int_or_none(fields.get("heartbeat")),
            "dead_since_ms": _int_or_none(fields.get("dead_since")),
            "stopped_ms": _int_or_none(fields.get("stopped_at")),
            "info": _json_object(fields.get("info")),
            "leases": held.get(name, 0),
            "seeding": int(seeding),
        }
    rooms = [int(n) for n in replies[3 * len(names) :]]
    found = [(n, shard, site) for (shard, site), n in zip(candidates, rooms, strict=True) if n]
    top = sorted(found, key=lambda t: -t[0])[:_TOP_SITES]

    # the latest cuts too (a cut site may wait for nothing): up to the top sites' number
    shown = {site for _, _, site in top}
    cut_sites = [(shard, site) for _, shard, site in sorted(cuts, key=lambda t: -t[0])]
    cut_sites = [(sh, site) for sh, site in cut_sites if site not in shown][:_TOP_SITES]
    # and the busiest, from what the live nodes publish (a busy site may wait for nothing)
    rates = published_site_rates(nodes)
    shown |= {site for _, site in cut_sites}
    busy = [site for site in sorted(rates, key=lambda s: -rates[s]) if site not in shown]
    busy = busy[:_TOP_SITES]
    batch = []
    for _, shard, site in top:
        batch.append(("hgetall", (shard.site(site),)))
        batch += [("zcount", (shard.wait(site), *score_range(lo, hi))) for _, lo, hi in bands]
    batch += [("hgetall", (shard.site(site),)) for shard, site in cut_sites]
    batch += [("hgetall", (keys.site_keys(site).site(site),)) for site in busy]
    # their requests in flight: one read per shard
    read = [(shard, site) for _, shard, site in top] + cut_sites
    by_shard = in_flight_by_shard(read + [(keys.site_keys(site), site) for site in busy])
    batch += [("hmget", (key, *names)) for key, names in by_shard.items()]
    replies = (yield batch) if batch else []
    in_flight = in_flight_of(by_shard, replies[len(replies) - len(by_shard) :])
    site_budgets: dict[str, dict[str, str]] = {}
    waiting: dict[str, int] = {}
    for j, (room, _, site) in enumerate(top):
        at = j * (1 + len(bands))
        site_budgets[site] = site_budget(replies[at], in_flight.get(site))
        waiting[site] = room
        # page kinds of the waiting rooms: the top sites' only (the total is exact)
        for (kind, _, _), n in zip(bands, replies[at + 1 : at + 1 + len(bands)], strict=True):
            by_kind[kind] += int(n)
    after = len(top) * (1 + len(bands))
    rest = [site for _, site in cut_sites] + busy
    for site, fields in zip(rest, replies[after : after + len(rest)], strict=True):
        site_budgets[site] = site_budget(fields, in_flight.get(site))

    dead_letters = {"total": dead, "by_reason": {}, "by_site": {}, "counted": 0}
    if dead and dead_sample > 0:
        by_reason: dict[str, int] = {}
        by_site: dict[str, int] = {}
        counted = 0
        for shard in shards:
            cursor: Any = 0
            while counted < dead_sample:
                [(cursor, chunk)] = yield [("hscan", (shard.dead, cursor, None, _SCAN_COUNT))]
                for raw in chunk.values():
                    record = _json_object(raw)
                    reason = str(record.get("reason") or "unknown")
                    by_reason[reason] = by_reason.get(reason, 0) + 1
                    site = record_site(record)
                    by_site[site] = by_site.get(site, 0) + 1
                    counted += 1
                if int(cursor) == 0:
                    break
        dead_letters.update(by_reason=by_reason, by_site=by_site, counted=counted)

    # the server clock of the control slot, which times the heartbeats
    [(seconds, micros)] = yield [(_TIME, (keys.prefix,))]
    return {
        "spider": keys.spider,
        "shards": len(shards),
        "at_ms": int(seconds) * 1000 + int(micros) // 1000,
        "queued": queued,
        "queued_by_kind": by_kind,
        "waiting": waiting,
        "waiting_total": max(waiting_total, sum(waiting.values())),
        "waiting_sites": waiting_sites,
        "site_budgets": site_budgets,
        "site_rates": {site: rates[site] for site in site_budgets if site in rates},
        "parked": parked,
        "requests": requests,
        "seen": seen,
        "bloom_bytes": bloom_bytes,
        "start_list": start,
        "rejected": rejected,
        "paused": paused is not None,
        "nodes": nodes,
        "dead_letters": dead_letters,
        "revisit": {
            "scheduled": revisits,
            "next_due_ms": min(revisit_heads) if revisit_heads else None,
            "oldest_late_ms": min(late_heads) if late_heads else None,
        },
    }


def published_site_rates(nodes: Mapping[str, Mapping[str, Any]]) -> dict[str, float]:
    """Pages per minute per site, summed over what the live nodes' heartbeats publish
    (``info.sites``: their busiest sites as ``[site, pages per minute]``); a stopped node's
    last figures are not current, and a malformed entry is skipped."""
    rates: dict[str, float] = {}
    for node in nodes.values():
        if node.get("stopped_ms") is not None or node.get("heartbeat_ms") is None:
            continue
        published = node.get("info", {}).get("sites")
        for entry in published if isinstance(published, list) else []:
            if not (isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], str)):
                continue
            if not is_number(entry[1]) or entry[1] <= 0:
                continue
            rates[entry[0]] = rates.get(entry[0], 0.0) + float(entry[1])
    return rates


def _int_or_none(value: Any) -> int | None:
    try:
        return int(float(_text(value))) if value is not None else None
    except ValueError:
        return None


def _json_object(raw: Any) -> dict[str, Any]:
    """A JSON object from Redis, or ``{}`` for anything else (nodes' data is not trusted)."""
    if raw is None:
        return {}
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):
        return {}
    return value if isinstance(value, dict) else {}


def record_site(record: Mapping[str, Any]) -> str:
    """The site (host) of a dead-letter record."""
    url = record.get("url")
    host = urlsplit(url).hostname if isinstance(url, str) else None
    return host or "unknown"


def _time_target(client: Any, key: str) -> dict[str, Any]:
    """On a cluster, TIME goes to the master of *key*'s slot (it times the heartbeats)."""
    if is_cluster_client(client):
        return {"target_nodes": client.get_node_from_key(key)}
    return {}


def _run_sync(client: Any, plan: Plan) -> dict[str, Any]:
    batch = next(plan)
    while True:
        if batch and batch[0][0] == _TIME:
            replies = [client.time(**_time_target(client, batch[0][1][0]))]
        else:
            pipe = client.pipeline(transaction=False)
            for name, args in batch:
                getattr(pipe, name)(*args)
            replies = pipe.execute()
        try:
            batch = plan.send(replies)
        except StopIteration as done:
            result: dict[str, Any] = done.value
            return result


async def _run_async(client: Any, plan: Plan) -> dict[str, Any]:
    batch = next(plan)
    while True:
        if batch and batch[0][0] == _TIME:
            if is_cluster_client(client):
                await client.initialize()  # the slot map, to find the key's master
            replies = [await client.time(**_time_target(client, batch[0][1][0]))]
        else:
            pipe = client.pipeline(transaction=False)
            for name, args in batch:
                getattr(pipe, name)(*args)
            replies = await pipe.execute()
        try:
            batch = plan.send(replies)
        except StopIteration as done:
            result: dict[str, Any] = done.value
            return result


def read_snapshot(
    client: Any,
    keys: FrontierKeys,
    *,
    page_priorities: Mapping[str, int] = DEFAULT_PAGE_PRIORITIES,
    dead_sample: int = DEFAULT_DEAD_SAMPLE,
) -> dict[str, Any]:
    """One raw snapshot of the crawl's keys, with a blocking redis-py client."""
    return _run_sync(client, _plan(keys, priority_bands(page_priorities), dead_sample))


async def aread_snapshot(
    client: Any,
    keys: FrontierKeys,
    *,
    page_priorities: Mapping[str, int] = DEFAULT_PAGE_PRIORITIES,
    dead_sample: int = 0,
) -> dict[str, Any]:
    """:func:`read_snapshot` with a ``redis.asyncio`` client (never blocks the event loop)."""
    return await _run_async(client, _plan(keys, priority_bands(page_priorities), dead_sample))


# --------------------------------------------------------------------------- rates


@dataclass
class RateTracker:
    """Remembers recent samples of every node's counters and of the backlog, to derive rates.

    A node's sample is timed by its own heartbeat (server clock), so samples taken between two
    heartbeats add nothing and a slow reader does not bend the rates.
    """

    window: float = DEFAULT_RATE_WINDOW
    _nodes: dict[str, deque[tuple[int, dict[str, float]]]] = field(default_factory=dict)
    _backlog: deque[tuple[int, int]] = field(default_factory=deque)

    def update(self, snapshot: Mapping[str, Any]) -> None:
        window_ms = int(self.window * 1000)
        for name, node in snapshot["nodes"].items():
            stamp = node["info_heartbeat_ms"]
            stats = node["info"].get("stats")
            if stamp is None or not isinstance(stats, dict):
                continue
            ring = self._nodes.setdefault(name, deque())
            counters = node_counters(stats)
            if ring and stamp <= ring[-1][0]:
                continue
            if ring and counters["pages"] < ring[-1][1]["pages"]:
                ring.clear()  # the node restarted under the same id: its counters began again
            ring.append((stamp, counters))
            prune(ring, stamp - window_ms)
        for gone in set(self._nodes) - set(snapshot["nodes"]):
            del self._nodes[gone]
        at = snapshot["at_ms"]
        if not self._backlog or at > self._backlog[-1][0]:
            self._backlog.append((at, backlog(snapshot)))
            prune(self._backlog, at - window_ms)

    def node_rates(self, name: str) -> dict[str, float] | None:
        """Per-minute rates of a node's counters, or None before two distinct samples."""
        ring = self._nodes.get(name)
        if not ring or len(ring) < 2:
            return None
        (t0, first), (t1, last) = ring[0], ring[-1]
        minutes = (t1 - t0) / 60_000
        return {k: (last[k] - first[k]) / minutes for k in last}

    def backlog_per_min(self) -> float | None:
        """How fast the backlog grows (> 0) or shrinks (< 0), per minute."""
        if len(self._backlog) < 2:
            return None
        (t0, first), (t1, last) = self._backlog[0], self._backlog[-1]
        return (last - first) / ((t1 - t0) / 60_000)


def backlog(snapshot: Mapping[str, Any]) -> int:
    """Requests not finished yet: queued, parked, in flight, being seeded, seeds waiting."""
    nodes = snapshot["nodes"].values()
    return int(
        snapshot["queued"]
        + _waiting_total(snapshot)
        + snapshot["parked"]
        + snapshot["start_list"]
        + sum(n["leases"] + n["seeding"] for n in nodes)
    )


def _waiting_total(snapshot: Mapping[str, Any]) -> int:
    return int(snapshot.get("waiting_total", sum(snapshot["waiting"].values())))


# --------------------------------------------------------------------------- the status


def in_flight_by_shard(sites: Iterable[tuple[ShardKeys, str]]) -> dict[str, list[str]]:
    """The sites whose requests in flight to read, by their shard's ``active`` hash: one HMGET
    per shard (see :func:`in_flight_of`)."""
    by_shard: dict[str, list[str]] = {}
    for shard, site in sites:
        by_shard.setdefault(shard.active, []).append(site)
    return by_shard


def in_flight_of(by_shard: dict[str, list[str]], replies: Sequence[Any]) -> dict[str, Any]:
    """Site -> its requests in flight (raw), from the HMGET replies of ``by_shard``."""
    out: dict[str, Any] = {}
    for names, values in zip(by_shard.values(), replies, strict=True):
        out.update(zip(names, values, strict=True))
    return out


def site_budget(fields: Any, active: Any) -> dict[str, str]:
    """A site's budget fields as :func:`site_status` reads them: its budget hash, and
    ``active`` (its requests in flight, kept per shard: :func:`in_flight_of`)."""
    out = {_text(k): _text(v) for k, v in (fields or {}).items()}
    out["active"] = _text(active) if active is not None else "0"
    return out


def site_status(snapshot: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Each busy site's shared budget: its limit, the rate it is allowed now (the limit, or
    for a site without one the rate its cut applies to, times the adaptive factor, cut when
    the site pushes back and wearing off with time), requests in flight and waiting."""
    out = []
    budgets = snapshot.get("site_budgets", {})
    # a cut wears off with time: read it at the snapshot's server time (a reader that has none
    # uses its own clock, near enough for a display)
    now_ms = snapshot.get("at_ms") or time.time() * 1000
    for site in sorted(set(budgets) | set(snapshot["waiting"])):
        fields = budgets.get(site, {})
        factor = effective_factor(fields, now_ms)
        limit = float(fields["limit_rate"]) if fields.get("limit_rate") else None
        base = limit if limit is not None else float(fields.get("base_rate") or 0) or None
        if factor >= 1.0 and limit is None:
            base = None  # no limit and no cut: as fast as the site answers
        in_flight = int(fields.get("active") or 0)
        waiting = int(snapshot["waiting"].get(site, 0))
        rate = float(snapshot.get("site_rates", {}).get(site, 0.0))
        if not (in_flight or waiting or rate or factor < 1.0):
            continue  # not busy
        out.append(
            {
                "site": site,
                "limit_rate": limit,
                "limit_concurrency": int(fields["limit_conc"])
                if fields.get("limit_conc")
                else None,
                "factor": round(factor, 3),
                "allowed_rate": round(base * factor, 2) if base is not None else None,
                "in_flight": in_flight,
                "waiting": waiting,
                "pages_per_min": round(rate, 1),
            }
        )
    out.sort(key=lambda s: (-s["waiting"], -s["in_flight"], -s["pages_per_min"]))
    return out[:_TOP_SITES]


def node_state(node: Mapping[str, Any], age: float | None, heartbeat_timeout: float) -> str:
    """``live``; ``dead`` (silent past the timeout, or already recovered by a live node);
    ``stopped`` (stopped cleanly, its last stats kept); ``orphan`` (leases or seeds under a
    node name nothing else knows)."""
    if node["heartbeat_ms"] is not None:
        return "live" if age is not None and age <= heartbeat_timeout else "dead"
    if node["dead_since_ms"] is not None:
        return "dead"
    if node.get("stopped_ms") is not None and not (node["leases"] or node["seeding"]):
        return "stopped"
    return "orphan" if node["leases"] or node["seeding"] else "gone"


def build_status(
    snapshot: Mapping[str, Any],
    tracker: RateTracker | None = None,
    *,
    heartbeat_timeout: float,
    revisit_grace: float = 60.0,
) -> dict[str, Any]:
    """The status of the cluster (JSON-ready) from a snapshot and the rates seen so far
    (``revisit_grace``: DISTCRAWL_REVISIT_GRACE, for what drained means in revisit mode)."""
    at = snapshot["at_ms"]
    nodes: list[dict[str, Any]] = []
    errors: dict[str, float] = {}
    pages_by_kind: dict[str, float] = {}
    totals = {"pages": 0.0, "products": 0.0}
    rate_totals = {"pages": 0.0, "products": 0.0, "acked": 0.0}
    rated = False
    for name, node in sorted(snapshot["nodes"].items()):
        beat = node["heartbeat_ms"] or node["info_heartbeat_ms"]
        age = round((at - beat) / 1000, 1) if beat else None
        state = node_state(node, age, heartbeat_timeout)
        info = node["info"]
        stats = info.get("stats") if isinstance(info.get("stats"), dict) else {}
        counters = node_counters(stats)
        rates = None
        if state == "live":
            # the node's own figures first: every reader sees the same ones
            rates = published_rates(info) or (tracker.node_rates(name) if tracker else None)
        if rates is not None:
            rated = True
            for key in rate_totals:
                rate_totals[key] += rates[key]
        if state != "orphan":
            totals["pages"] += counters["pages"]
            totals["products"] += counters["products"]
        _add_errors(errors, stats)
        for key, value in stats.items():
            if key.startswith(PAGES_PREFIX) and is_number(value):
                kind = key[len(PAGES_PREFIX) :]
                pages_by_kind[kind] = pages_by_kind.get(kind, 0) + value
        nodes.append(
            {
                "node": name,
                "state": state,
                "heartbeat_age_s": age,
                "recovered": node["dead_since_ms"] is not None,
                "host": info.get("host"),
                "pid": info.get("pid"),
                "in_flight": node["leases"],
                "working": info.get("started"),
                "prefetched": info.get("prefetched"),
                "seeding": node["seeding"],
                "pages": int(counters["pages"]),
                "products": int(counters["products"]),
                "pages_per_min": _round(rates["pages"]) if rates else None,
                "products_per_min": _round(rates["products"]) if rates else None,
                "acked_per_min": _round(rates["acked"]) if rates else None,
                # products only in the node's local journal (not in MongoDB yet)
                "journal_held": _int_or_none(stats.get("pipeline/journal_held")) or 0,
            }
        )
    left = backlog(snapshot)
    drain = rate_totals["acked"]
    eta: float | None = None
    if left == 0:
        eta = 0.0
    elif rated and drain > 0:
        eta = round(left / drain * 60, 1)
    trend = tracker.backlog_per_min() if tracker else None
    revisit = _revisit_status(snapshot, at)
    drained = left == 0
    if revisit is not None and revisit["next_due_s"] is not None:
        # revisit mode: drained while nothing falls due within the grace period
        drained = drained and revisit["next_due_s"] > revisit_grace
    return {
        "crawl": snapshot["spider"],
        "server_time_ms": at,
        "paused": snapshot["paused"],
        "frontier": {
            # everything not leased yet: the queue and the sites' waiting rooms
            "queued": snapshot["queued"] + _waiting_total(snapshot),
            "queued_by_kind": dict(snapshot["queued_by_kind"]),
            "waiting_for_site": _waiting_total(snapshot),
            "sites_waiting": snapshot.get("waiting_sites", len(snapshot["waiting"])),
            "waiting_by_site": dict(
                sorted(snapshot["waiting"].items(), key=lambda kv: -kv[1])[:_TOP_SITES]
            ),
            "parked": snapshot["parked"],
            "in_flight": sum(n["in_flight"] for n in nodes),
            "seeding": sum(n["seeding"] for n in nodes),
            "start_list": snapshot["start_list"],
            "backlog": left,
            "seen": snapshot["seen"],
            "rejected": snapshot["rejected"],
        },
        "dead_letters": {
            **snapshot["dead_letters"],
            "by_site": dict(
                sorted(snapshot["dead_letters"]["by_site"].items(), key=lambda kv: -kv[1])[
                    :_TOP_SITES
                ]
            ),
        },
        "sites": site_status(snapshot),
        "nodes": nodes,
        "totals": {
            "live_nodes": sum(1 for n in nodes if n["state"] == "live"),
            "dead_nodes": sum(1 for n in nodes if n["state"] == "dead"),
            "pages": int(totals["pages"]),
            "products": int(totals["products"]),
            "pages_per_min": _round(rate_totals["pages"]) if rated else None,
            "products_per_min": _round(rate_totals["products"]) if rated else None,
            "acked_per_min": _round(drain) if rated else None,
            "journal_held": sum(n["journal_held"] for n in nodes),
        },
        "pages_by_kind": {k: int(v) for k, v in sorted(pages_by_kind.items())},
        "errors": {k: int(v) for k, v in sorted(errors.items())},
        "eta_seconds": eta,
        "backlog_per_min": _round(trend) if trend is not None else None,
        "drained": drained,
        "revisit": revisit,
    }


def _revisit_status(snapshot: Mapping[str, Any], at: int) -> dict[str, Any] | None:
    """[revisit] Pages scheduled again, when the next falls due, and how far behind schedule
    the crawl is (the oldest revisit due and not leased yet); None when none is scheduled."""
    info = snapshot.get("revisit") or {}
    scheduled = int(info.get("scheduled") or 0)
    head, late = info.get("next_due_ms"), info.get("oldest_late_ms")
    if not scheduled and late is None:
        return None
    due = [t for t in (head, late) if t is not None and t <= at]
    return {
        "scheduled": scheduled,
        "next_due_s": round((head - at) / 1000, 1) if head is not None else None,
        "behind_s": round((at - min(due)) / 1000, 1) if due else 0.0,
    }


def _add_errors(errors: dict[str, float], stats: Mapping[str, Any]) -> None:
    for key, value in stats.items():
        if not is_number(value) or not value:
            continue
        label = _ERROR_COUNTERS.get(key)
        if label is None and key.startswith(_STATUS_PREFIX):
            code = key[len(_STATUS_PREFIX) :]
            label = f"http/{code}" if code.isdigit() and int(code) >= 400 else None
        if label is None:
            for prefix, short in _ERROR_PREFIXES.items():
                if key.startswith(prefix):
                    label = short + key[len(prefix) :]
                    break
        if label is not None:
            errors[label] = errors.get(label, 0) + value


def _round(value: float) -> float:
    return round(value, 1)
