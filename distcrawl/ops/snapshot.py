"""One snapshot of a crawl: what its Redis keys say, read with a bounded number of commands.

Nothing here is stored: every figure is read from the keys the frontier and the nodes keep
(their layout: :mod:`distcrawl.frontier.keys`). The reading is one plan of named reads
(:mod:`distcrawl.ops.reads`), run by a blocking client (:func:`read_snapshot`, for commands)
or by ``redis.asyncio`` (:func:`aread_snapshot`, for a node's progress line and the
dashboard).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from redis.exceptions import ResponseError

from distcrawl.frontier import crawlconf
from distcrawl.frontier.keys import STATUS_LEASES_FIELD, seen_counted
from distcrawl.frontier.memory import read_memory, read_memory_async
from distcrawl.frontier.protocol.observe import ErrorGroup, Totals
from distcrawl.frontier.protocol.spec import level_of
from distcrawl.ops import deadletters
from distcrawl.ops.bands import (
    DEFAULT_PAGE_PRIORITIES,
    Band,
    band_of,
    priority_bands,
    score_range,
)
from distcrawl.ops.deadletters import Tally
from distcrawl.ops.reads import Batch, Plan, arun, run
from distcrawl.ops.sites import (
    TOP_SITES,
    in_flight_of,
    in_flight_reads,
    published_site_rates,
    site_budget,
)

if TYPE_CHECKING:
    from distcrawl.frontier.keys import FrontierKeys, ShardKeys

__all__ = [
    "DEFAULT_DEAD_SAMPLE",
    "JOURNAL_AT_FIELD",
    "JOURNAL_LEFT_FIELD",
    "NodeRecord",
    "Revisits",
    "Snapshot",
    "aread_snapshot",
    "read_snapshot",
]

#: at most this many dead letters are read to count them by reason and by site
DEFAULT_DEAD_SAMPLE = 10_000
#: stopped and recovered nodes read from the registry of gone nodes (newest first)
_MAX_GONE = 100
#: the error groups with most failures, and the latest findings, a status shows
TOP_ERROR_GROUPS = 5
LATEST_FINDINGS = 10
#: fields of a node's hash written by ``journal replay`` of its journal once it stopped: the
#: products its journal's folder still held, and when (ms, server clock)
JOURNAL_LEFT_FIELD = "journal_left"
JOURNAL_AT_FIELD = "journal_at"


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


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


@dataclass
class NodeRecord:
    """What the crawl's keys say of one node."""

    #: its last heartbeat (ms, server clock) in the heartbeat set; None when not in it
    heartbeat_ms: int | None = None
    #: its last heartbeat as its info hash records it (kept after it left the set)
    info_heartbeat_ms: int | None = None
    #: when a live node recovered it as dead
    dead_since_ms: int | None = None
    #: when it stopped cleanly
    stopped_ms: int | None = None
    #: what it publishes with its heartbeat: host, pid, stats, rates, busiest sites, ...
    info: dict[str, Any] = field(default_factory=dict)
    #: leases it holds, over all shards
    leases: int = 0
    #: seeds it took from the seed list and has not put into the crawl yet
    seeding: int = 0
    #: what a replay of its journal by hand left in it, and when (None: no replay since)
    journal_left: int | None = None
    journal_at_ms: int | None = None

    @property
    def stats(self) -> dict[str, Any]:
        stats = self.info.get("stats")
        return stats if isinstance(stats, dict) else {}


@dataclass
class Revisits:
    """[revisit] Pages scheduled again, the next due, and the oldest due and not leased."""

    scheduled: int = 0
    next_due_ms: float | None = None
    oldest_late_ms: float | None = None


@dataclass
class Snapshot:
    """The figures of one read of the crawl's keys."""

    spider: str
    #: the server time of the control slot (ms), which times the heartbeats
    at_ms: int
    shards: int = 1
    queued: int = 0
    #: the queue by page kind, and the top sites' waiting rooms (the total is exact)
    queued_by_kind: dict[str, int] = field(default_factory=dict)
    #: requests waiting for their site's budget, for the top sites
    waiting: dict[str, int] = field(default_factory=dict)
    #: requests waiting for their site's budget, all sites
    waiting_total: int = 0
    waiting_sites: int = 0
    #: the budget hash of the top, latest cut and busiest sites (with ``active``)
    site_budgets: dict[str, dict[str, str]] = field(default_factory=dict)
    #: pages per minute of those sites, as the live nodes publish them
    site_rates: dict[str, float] = field(default_factory=dict)
    parked: int = 0
    requests: int = 0
    seen: int = 0
    bloom_bytes: int = 0
    start_list: int = 0
    #: seeds given back by nodes that stopped or died holding them, to be taken again
    seeds_returned: int = 0
    rejected: int = 0
    paused: bool = False
    nodes: dict[str, NodeRecord] = field(default_factory=dict)
    dead_letters: Tally = field(default_factory=Tally)
    revisit: Revisits = field(default_factory=Revisits)
    #: Redis' memory (``INFO memory``; of a cluster, the fullest master's); None where an ACL
    #: refuses ``INFO`` (``redis_memory_error`` says so)
    redis_memory: dict[str, Any] | None = None
    #: the error groups with most failures, and the groups and failures by kind
    error_groups: list[ErrorGroup] = field(default_factory=list)
    error_totals: Totals = field(default_factory=Totals)
    #: the latest findings (JSON objects, newest first), and how many the crawl holds
    findings: list[dict[str, Any]] = field(default_factory=list)
    findings_total: int = 0
    redis_memory_error: str | None = None
    #: when the crawl's first node started (ms, its clock; the crawl's record), None before
    started_ms: int | None = None
    #: sites whose robots.txt asks for a Crawl-delay, all sites
    delayed_sites: int = 0
    #: sites held (robots.txt unavailable, Retry-After), all sites
    held_sites: int = 0
    #: servers (IP addresses) that more than one site answers from, the top ones: sites,
    #: their grants held on all nodes, and a few of the site names
    servers: list[ServerRecord] = field(default_factory=list)


@dataclass
class ServerRecord:
    """A server (IP address) more than one site answers from."""

    server: str
    sites: int
    in_flight: int
    some_sites: list[str]


def _first_reads(keys: FrontierKeys, shards: list[ShardKeys], bands: list[Band]) -> Batch:
    """The control slot, and per shard its counts, its status registry, the sites first due
    to leave their waiting room and the latest cuts."""
    batch = Batch()
    batch.add("nodes", "zrange", keys.nodes, 0, -1)
    batch.add("gone", "zrevrange", keys.gone, 0, _MAX_GONE - 1)
    batch.add("start_list", "llen", keys.start_urls)
    batch.add("seeds_returned", "llen", keys.seeds.returned)
    batch.add("rejected", "llen", keys.rejected)
    batch.add("paused", "get", keys.paused)
    batch.add("error_top", "zrevrange", keys.error_counts, 0, TOP_ERROR_GROUPS - 1, withscores=True)
    batch.add("error_totals", "hgetall", keys.error_totals)
    batch.add("findings", "zrevrange", keys.findings_at, 0, LATEST_FINDINGS - 1)
    batch.add("findings_total", "zcard", keys.findings_at)
    batch.add("started", "hget", keys.config, crawlconf.STARTED)
    # servers that more than one site answers from, most sites first
    batch.add(
        "servers", "zrevrangebyscore", keys.servers, "+inf", 2,
        start=0, num=TOP_SITES, withscores=True,
    )  # fmt: skip
    for shard in shards:
        k = shard.index
        batch.add((k, "levels"), "zrange", shard.levels, 0, -1, withscores=True)
        batch.add((k, "parked"), "zcard", shard.delayed)
        batch.add((k, "generation"), "get", shard.seen_generation)
        batch.add((k, "bloom_bytes"), "strlen", shard.bloom)
        batch.add((k, "dead"), "hlen", shard.dead)
        batch.add((k, "requests"), "hlen", shard.requests)
        batch.add((k, "waiting_sites"), "zcard", shard.waiting)
        batch.add((k, "first_due"), "zrange", shard.waiting, 0, TOP_SITES - 1)
        batch.add((k, "registry"), "hgetall", shard.status)
        batch.add((k, "cuts"), "zrevrange", shard.cuts, 0, TOP_SITES - 1, withscores=True)
        batch.add((k, "delays"), "hlen", shard.delays)
        batch.add((k, "held"), "zcard", shard.holds)
        batch.add((k, "holds"), "zrevrange", shard.holds, 0, TOP_SITES - 1, withscores=True)
        batch.add((k, "revisits"), "zcard", shard.revisit)
        batch.add((k, "revisit_head"), "zrange", shard.revisit, 0, 0, withscores=True)
        batch.add((k, "late_head"), "zrange", shard.revisit_late, 0, 0, withscores=True)
    return batch


def _plan(keys: FrontierKeys, bands: list[Band], dead_sample: int) -> Plan[Snapshot]:
    """The reads of one snapshot, in four or five round trips.

    Bounded by the number of shards and nodes, never by the number of sites or keys: nodes
    come from the heartbeat set, the registry of stopped and recovered nodes and the lease
    counts each shard keeps per node; per-site detail is read for the top sites only (the
    first due to leave their waiting room in each shard, then the most waiting, the latest
    cut and the busiest). Dead letters are counted over a sample. Nothing SCANs the keyspace.
    """
    shards = keys.all_shards()
    got = yield _first_reads(keys, shards, bands)
    snap = Snapshot(spider=keys.spider, at_ms=0, shards=len(shards))
    snap.start_list, snap.rejected = int(got["start_list"]), int(got["rejected"])
    snap.seeds_returned = int(got["seeds_returned"])
    snap.paused = got["paused"] is not None
    error_top = [(_text(g), count) for g, count in got["error_top"] or ()]
    snap.error_totals = Totals.of(got["error_totals"] or {})
    finding_names = [_text(n) for n in got["findings"] or ()]
    snap.findings_total = int(got["findings_total"])
    snap.started_ms = crawlconf.started_ms(got["started"])
    snap.queued_by_kind = {kind: 0 for kind, _, _ in bands}
    first_due: list[tuple[ShardKeys, str]] = []
    cuts: list[tuple[float, ShardKeys, str]] = []
    held: dict[str, int] = {}
    dead_by_shard: list[int] = []
    generations = [(shard, got[(shard.index, "generation")]) for shard in shards]
    revisit_heads: list[float] = []
    late_heads: list[float] = []
    for shard in shards:
        k = shard.index
        for _, score in got[(k, "levels")]:
            priority, count = level_of(float(score))
            snap.queued += count
            snap.queued_by_kind[band_of(bands, priority)] += count
        snap.parked += int(got[(k, "parked")])
        snap.bloom_bytes += int(got[(k, "bloom_bytes")])
        dead_by_shard.append(int(got[(k, "dead")]))
        snap.requests += int(got[(k, "requests")])
        snap.waiting_sites += int(got[(k, "waiting_sites")])
        first_due += [(shard, _text(site)) for site in got[(k, "first_due")]]
        registry = {_text(f): _text(v) for f, v in (got[(k, "registry")] or {}).items()}
        snap.waiting_total += max(0, int(registry.get("waiting", 0)))
        for name, value in registry.items():
            if name.startswith(STATUS_LEASES_FIELD):
                node = name[len(STATUS_LEASES_FIELD) :]
                held[node] = held.get(node, 0) + max(0, int(value))
        cuts += [(float(ms), shard, _text(site)) for site, ms in got[(k, "cuts")]]
        # held sites are shown as cut ones are, the latest hold first
        cuts += [(float(ms), shard, _text(site)) for site, ms in got[(k, "holds")]]
        snap.delayed_sites += int(got[(k, "delays")])
        snap.held_sites += int(got[(k, "held")])
        snap.revisit.scheduled += int(got[(k, "revisits")])
        revisit_heads += [float(score) for _, score in got[(k, "revisit_head")]]
        late_heads += [float(score) for _, score in got[(k, "late_head")]]
    snap.revisit.next_due_ms = min(revisit_heads, default=None)
    snap.revisit.oldest_late_ms = min(late_heads, default=None)

    # every node the keys know of, and the waiting rooms of each shard's first due sites
    names = list(dict.fromkeys([*map(_text, got["nodes"]), *map(_text, got["gone"]), *held]))
    batch = Batch()
    for name in names:
        batch.add(("heartbeat", name), "zscore", keys.nodes, name)
        batch.add(("info", name), "hgetall", keys.node(name))
        batch.add(("seeding", name), "llen", keys.seeds.taken(name))
    for shard, site in first_due:
        batch.add(("room", shard.index, site), "zcard", shard.wait(site))
    if error_top:
        batch.add("error_meta", "hmget", keys.errors, [g for g, _ in error_top])
    if finding_names:
        batch.add("finding_records", "hmget", keys.findings, finding_names)
    servers = [(_text(server), int(float(n))) for server, n in got["servers"] or ()]
    for server, _ in servers:
        batch.add(("server", server), "hget", keys.server(server), "inuse")
        batch.add(("server_sites", server), "srandmember", keys.server_sites(server), 5)
    # the URLs each dupefilter holds, in any of its modes (revisit: its live generations)
    for shard, generation in generations:
        for name in seen_counted(shard, generation):
            batch.add(("seen", name), "hget", name, "n")
    got = yield batch
    if error_top:
        metas = got["error_meta"]
        snap.error_groups = [
            ErrorGroup.of(g, raw, n) for (g, n), raw in zip(error_top, metas, strict=True)
        ]
    if finding_names:
        snap.findings = [record for record in map(_json_object, got["finding_records"]) if record]
    snap.servers = [
        ServerRecord(
            server,
            sites,
            max(0, int(got[("server", server)] or 0)),
            sorted(_text(site) for site in got[("server_sites", server)] or ()),
        )
        for server, sites in servers
    ]
    snap.seen = sum(int(got[("seen", n)] or 0) for s, g in generations for n in seen_counted(s, g))
    for name in names:
        score = got[("heartbeat", name)]
        fields = {_text(k): v for k, v in (got[("info", name)] or {}).items()}
        snap.nodes[name] = NodeRecord(
            heartbeat_ms=int(float(score)) if score is not None else None,
            info_heartbeat_ms=_int_or_none(fields.get("heartbeat")),
            dead_since_ms=_int_or_none(fields.get("dead_since")),
            stopped_ms=_int_or_none(fields.get("stopped_at")),
            info=_json_object(fields.get("info")),
            leases=held.get(name, 0),
            seeding=int(got[("seeding", name)]),
            journal_left=_int_or_none(fields.get(JOURNAL_LEFT_FIELD)),
            journal_at_ms=_int_or_none(fields.get(JOURNAL_AT_FIELD)),
        )
    rooms = [(int(got[("room", sh.index, site)]), sh, site) for sh, site in first_due]
    top = sorted([room for room in rooms if room[0]], key=lambda t: -t[0])[:TOP_SITES]

    # the top sites' budgets and page kinds; the latest cuts too (a cut site may wait for
    # nothing) and the busiest, from what the live nodes publish, up to the top's number each
    shown = {site for _, _, site in top}
    cut_sites = [(sh, site) for _, sh, site in sorted(cuts, key=lambda t: -t[0])]
    cut_sites = list(dict.fromkeys((sh, site) for sh, site in cut_sites if site not in shown))
    cut_sites = cut_sites[:TOP_SITES]
    live = [
        n.info for n in snap.nodes.values() if n.stopped_ms is None and n.heartbeat_ms is not None
    ]
    rates = published_site_rates(live)
    shown |= {site for _, site in cut_sites}
    busy = [site for site in sorted(rates, key=lambda s: -rates[s]) if site not in shown]
    busy_sites = [(keys.site_keys(site), site) for site in busy[:TOP_SITES]]
    batch = Batch()
    for _, shard, site in top:
        batch.add(("budget", site), "hgetall", shard.site(site))
        for kind, low, high in bands:
            batch.add(("kind", site, kind), "zcount", shard.wait(site), *score_range(low, high))
    for shard, site in cut_sites + busy_sites:
        batch.add(("budget", site), "hgetall", shard.site(site))
    in_flight_reads(batch, [(shard, site) for _, shard, site in top] + cut_sites + busy_sites)
    got = yield batch
    in_flight = in_flight_of(got)
    for room, _, site in top:
        snap.waiting[site] = room
        for kind, _, _ in bands:  # page kinds of the waiting rooms: the top sites' only
            snap.queued_by_kind[kind] += int(got[("kind", site, kind)])
    for site in [site for _, _, site in top] + [site for _, site in cut_sites + busy_sites]:
        snap.site_budgets[site] = site_budget(got[("budget", site)], in_flight.get(site))
    snap.site_rates = {site: rates[site] for site in snap.site_budgets if site in rates}
    snap.waiting_total = max(snap.waiting_total, sum(snap.waiting.values()))

    dead = sum(dead_by_shard)
    snap.dead_letters = Tally(total=dead)
    if dead and dead_sample > 0:
        page = yield from deadletters.scan(keys, limit=dead_sample, sizes=dead_by_shard)
        snap.dead_letters = deadletters.tally(page.letters, total=dead)

    got = yield Batch.clock(keys.prefix)
    seconds, micros = got["time"]
    snap.at_ms = int(seconds) * 1000 + int(micros) // 1000
    return snap


def read_snapshot(
    client: Any,
    keys: FrontierKeys,
    *,
    page_priorities: Mapping[str, int] = DEFAULT_PAGE_PRIORITIES,
    dead_sample: int = DEFAULT_DEAD_SAMPLE,
) -> Snapshot:
    """One snapshot of the crawl's keys, with a blocking redis-py client."""
    snap = run(client, _plan(keys, priority_bands(page_priorities), dead_sample))
    try:
        memory = read_memory(client)
    except ResponseError as exc:  # INFO refused (an ACL): no memory shown, and why
        memory = None
        snap.redis_memory_error = f"Redis refused INFO memory: {exc}"
    snap.redis_memory = memory.as_dict() if memory is not None else None
    return snap


async def aread_snapshot(
    client: Any,
    keys: FrontierKeys,
    *,
    page_priorities: Mapping[str, int] = DEFAULT_PAGE_PRIORITIES,
    dead_sample: int = 0,
) -> Snapshot:
    """:func:`read_snapshot` with a ``redis.asyncio`` client (never blocks the event loop)."""
    snap = await arun(client, _plan(keys, priority_bands(page_priorities), dead_sample))
    try:
        memory = await read_memory_async(client)
    except ResponseError as exc:  # INFO refused (an ACL): no memory shown, and why
        memory = None
        snap.redis_memory_error = f"Redis refused INFO memory: {exc}"
    snap.redis_memory = memory.as_dict() if memory is not None else None
    return snap
