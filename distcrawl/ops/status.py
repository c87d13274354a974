"""The status of a crawl (what ``status --json`` prints, the dashboard shows and ``/metrics``
exports), built from a snapshot and the rates seen so far.

Its words (node states, error kinds, dead-letter reasons) are those of
:mod:`distcrawl.base.names`.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from distcrawl.base.config import SETTINGS
from distcrawl.base.durations import short_duration
from distcrawl.base.names import stats as stat_keys
from distcrawl.base.names import status as words
from distcrawl.base.names.reasons import exception_reason
from distcrawl.base.rates import PAGES_PREFIX, is_number, published_rates, published_site_defaults
from distcrawl.base.rates import counters as node_counters
from distcrawl.frontier.memory import DEFAULT_MEMORY_WARN, EVICTION_COST, evicts_frontier
from distcrawl.ops.rates import RateTracker, backlog
from distcrawl.ops.sites import TOP_SITES, site_rows
from distcrawl.ops.snapshot import NodeRecord, Snapshot, read_snapshot

if TYPE_CHECKING:
    from distcrawl.frontier.keys import FrontierKeys

__all__ = [
    "DEFAULT_REVISIT_GRACE",
    "build_status",
    "crawl_state",
    "error_kinds",
    "memory_status",
    "node_state",
    "politeness_figures",
    "products_accounted",
    "read_status",
    "site_defaults",
]

#: seconds within which a revisit falling due keeps a revisit crawl from counting as drained:
#: the default of the setting ``DISTCRAWL_REVISIT_GRACE``
DEFAULT_REVISIT_GRACE: float = SETTINGS.default("DISTCRAWL_REVISIT_GRACE")

# Node stats summed into "errors by kind": the stats family, the error kind it is counted as,
# and whether its variable part names an exception (shown by its class name).
_ERROR_FAMILIES = (
    (stat_keys.RETRY_REASONS, words.RETRIES, True),
    (stat_keys.EXCEPTION_TYPE, words.EXCEPTIONS, True),
    (stat_keys.SPIDER_EXCEPTIONS, words.SPIDER_EXCEPTIONS, True),
    (stat_keys.REFUSED, words.REFUSED_ENTRIES, False),
    (stat_keys.SEEDS_REFUSED, words.REFUSED_SEEDS, False),
)
_ERROR_COUNTERS = {
    stat_keys.LOG_ERRORS: words.LOG_ERRORS,
    stat_keys.REDIS_ERRORS: words.REDIS_ERRORS,
    stat_keys.DEAD_LETTERED: words.DEAD_LETTERED,
}
#: seconds between two reads while a one-shot status waits for a second heartbeat of every node
_POLL = 0.25
#: the error kinds a node's own ``errors`` figure sums: its failures, not the crawl's pages
_NODE_FAILURES = (words.LOG_ERRORS, words.REDIS_ERRORS)
_NODE_FAILURE_FAMILIES = (words.EXCEPTIONS, words.SPIDER_EXCEPTIONS)


def memory_status(memory: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """Redis' memory with a warning when it nears ``maxmemory`` or may evict the crawl."""
    if memory is None:
        return None
    share = memory.get("used_share")
    warning = None
    if evicts_frontier(str(memory.get("policy", ""))):
        warning = f"maxmemory-policy {memory['policy']} may evict the crawl: {EVICTION_COST}"
    elif share is not None and share >= DEFAULT_MEMORY_WARN:
        warning = (
            f"Redis uses {share:.0%} of its maxmemory: at the limit it refuses writes and the "
            "nodes wait"
        )
    return {**memory, "warning": warning}


def error_kinds(stats: Mapping[str, Any]) -> dict[str, float]:
    """A node's stats as errors by kind: ``http/503``, ``retry/<reason>``,
    ``exception/<ExceptionName>``, ``refused/<reason>``, ``log_errors``, ..."""
    errors: dict[str, float] = {}
    for key, value in stats.items():
        if not is_number(value) or not value:
            continue
        label = _ERROR_COUNTERS.get(key)
        code = stat_keys.RESPONSE_STATUS.part(key)
        if label is None and code is not None:
            label = words.HTTP_ERRORS(code) if code.isdigit() and int(code) >= 400 else None
        if label is None:
            for family, kind, exception in _ERROR_FAMILIES:
                part = family.part(key)
                if part is not None:
                    label = kind(exception_reason(part) if exception else part)
                    break
        if label is not None:
            errors[label] = errors.get(label, 0) + value
    return errors


def node_errors(stats: Mapping[str, Any]) -> int:
    """A node's own failures: errors logged, failed round trips to Redis, failed downloads and
    callbacks that raised."""
    total = 0.0
    for label, n in error_kinds(stats).items():
        if label in _NODE_FAILURES or any(f.part(label) for f in _NODE_FAILURE_FAMILIES):
            total += n
    return int(total)


def journal_held(node: NodeRecord) -> int:
    """Products only in the node's local journal (not in MongoDB yet): what it last published,
    or less when a replay of its journal by hand (``journal replay``) left fewer since."""
    held = _count(node.stats.get(stat_keys.JOURNAL_HELD))
    beat = node.info_heartbeat_ms or node.heartbeat_ms or 0
    if node.journal_left is not None and (node.journal_at_ms or 0) >= beat:
        held = min(held, max(0, node.journal_left))
    return held


def node_state(node: NodeRecord, age: float | None, heartbeat_timeout: float) -> str:
    """``live``; ``dead`` (silent past the timeout, or already recovered by a live node);
    ``stopped`` (stopped cleanly, its last stats kept); ``orphan`` (leases or seeds under a
    node name nothing else knows); ``gone`` (stopped or recovered, holding nothing)."""
    if node.heartbeat_ms is not None:
        return words.LIVE if age is not None and age <= heartbeat_timeout else words.DEAD
    if node.dead_since_ms is not None:
        return words.DEAD
    holds = node.leases or node.seeding
    if node.stopped_ms is not None and not holds:
        return words.STOPPED
    return words.ORPHAN if holds else words.GONE


def _round(value: float) -> float:
    return round(value, 1)


def _count(value: Any) -> int:
    return int(value) if is_number(value) else 0


def _node(
    name: str,
    node: NodeRecord,
    at: int,
    heartbeat_timeout: float,
    tracker: RateTracker | None,
) -> tuple[dict[str, Any], dict[str, float] | None]:
    """A node's row of the status, and its per-minute rates (None until known)."""
    beat = node.heartbeat_ms or node.info_heartbeat_ms
    age = round((at - beat) / 1000, 1) if beat else None
    state = node_state(node, age, heartbeat_timeout)
    info, stats = node.info, node.stats
    counters = node_counters(stats)
    rates = None
    if state == words.LIVE:
        # the node's own figures first: every reader sees the same ones
        rates = published_rates(info) or (tracker.node_rates(name) if tracker else None)
    row = {
        "node": name,
        "state": state,
        "heartbeat_age_s": age,
        "recovered": node.dead_since_ms is not None,
        "host": info.get("host"),
        "pid": info.get("pid"),
        "in_flight": node.leases,
        "working": info.get("started"),
        "prefetched": info.get("prefetched"),
        "seeding": node.seeding,
        # every answer the node received (pages parsed, robots.txt, error answers, 304s)
        "responses": int(counters["pages"]),
        "products": int(counters["products"]),
        "responses_per_min": _round(rates["pages"]) if rates else None,
        "products_per_min": _round(rates["products"]) if rates else None,
        "acked_per_min": _round(rates["acked"]) if rates else None,
        # products only in the node's local journal (not in MongoDB yet)
        "journal_held": journal_held(node),
        "errors": node_errors(stats),
    }
    return row, rates


#: node stats summed into the status' ``politeness`` figures: the figure, and its stats key
_POLITENESS_COUNTERS = (
    ("robots_unavailable", stat_keys.ROBOTSTXT_UNAVAILABLE),
    ("robots_no_rules", stat_keys.ROBOTSTXT_NO_RULES),
    ("given_back", stat_keys.GIVEN_BACK),
    ("share_waits", stat_keys.SHARE_WAITS),
    ("server_waits", stat_keys.SERVER_WAITS),
    ("outside_waits", stat_keys.OUTSIDE_WAITS),
    ("retry_after_capped", stat_keys.RETRY_AFTER_CAPPED),
)
#: node stats families summed into the status' ``politeness`` figures, by their variable part
_POLITENESS_FAMILIES = (
    ("site_holds", stat_keys.SITE_HOLDS),
    ("set_aside", stat_keys.SET_ASIDE),
)


def politeness_figures(nodes: Mapping[str, NodeRecord]) -> dict[str, Any]:
    """What the nodes counted of the sites' politeness (robots.txt unavailable or without
    rules, sites held and set aside, leases given back, waits for a site's share of a node's
    slots, a server's grant or a hold), summed over every node the crawl knows."""
    out: dict[str, Any] = {name: 0 for name, _ in _POLITENESS_COUNTERS}
    out.update({name: {} for name, _ in _POLITENESS_FAMILIES})
    for node in nodes.values():
        for key, value in node.stats.items():
            if not is_number(value):
                continue
            for name, stat in _POLITENESS_COUNTERS:
                if key == stat:
                    out[name] += int(value)
            for name, family in _POLITENESS_FAMILIES:
                part = family.part(key)
                if part is not None:
                    out[name][part] = out[name].get(part, 0) + int(value)
    return out


def build_status(
    snapshot: Snapshot,
    tracker: RateTracker | None = None,
    *,
    heartbeat_timeout: float,
    revisit_grace: float = DEFAULT_REVISIT_GRACE,
) -> dict[str, Any]:
    """The status of the crawl (JSON-ready) from a snapshot and the rates seen so far
    (``revisit_grace``: what drained means in revisit mode)."""
    at = snapshot.at_ms
    nodes: list[dict[str, Any]] = []
    errors: dict[str, float] = {}
    pages_by_kind: dict[str, float] = {}
    totals = {"responses": 0.0, "products": 0.0}
    rate_totals = {"pages": 0.0, "products": 0.0, "acked": 0.0}
    rated = False
    for name, node in sorted(snapshot.nodes.items()):
        row, rates = _node(name, node, at, heartbeat_timeout, tracker)
        if rates is not None:
            rated = True
            for key in rate_totals:
                rate_totals[key] += rates[key]
        if row["state"] != words.ORPHAN:
            totals["responses"] += row["responses"]
            totals["products"] += row["products"]
        for label, n in error_kinds(node.stats).items():
            errors[label] = errors.get(label, 0) + n
        for key, value in node.stats.items():
            if key.startswith(PAGES_PREFIX) and is_number(value):
                kind = key[len(PAGES_PREFIX) :]
                pages_by_kind[kind] = pages_by_kind.get(kind, 0) + value
        nodes.append(row)
    left = backlog(snapshot)
    drain = rate_totals["acked"]
    live = sum(1 for n in nodes if n["state"] == words.LIVE)
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
    state = crawl_state(paused=snapshot.paused, drained=drained, live=live)
    # a figure that cannot be read now: why (what the screen shows beside its "-")
    unreadable: dict[str, str] = {}
    if snapshot.redis_memory_error:
        unreadable["redis_memory"] = snapshot.redis_memory_error
    if not rated:
        unreadable["rates"] = (
            "no live node" if not live else "each live node's rates need two of its heartbeats"
        )
    if revisit is not None:
        # a continuous crawl never drains: what is left now clears in eta, then pages come back
        unreadable["eta_seconds"] = _continuous(revisit, eta)
        eta = None
    elif eta is None:
        unreadable["eta_seconds"] = (
            "no live node takes the work" if not live else "no acks yet to measure a rate by"
        )
    by_state = {s: sum(1 for n in nodes if n["state"] == s) for s in words.NODE_STATES}
    dead = snapshot.dead_letters.as_dict()
    dead["by_site"] = dict(sorted(dead["by_site"].items(), key=lambda kv: -kv[1])[:TOP_SITES])
    waiting = snapshot.waiting_total
    defaults = site_defaults(snapshot)
    return {
        "crawl": snapshot.spider,
        "server_time_ms": at,
        # when its first node started (ms): this crawl's products are those seen since
        "started_ms": snapshot.started_ms,
        "state": state,
        "paused": snapshot.paused,
        "frontier": {
            # everything not leased yet: the queue and the sites' waiting rooms
            "queued": snapshot.queued + waiting,
            "queued_by_kind": dict(snapshot.queued_by_kind),
            "waiting_for_site": waiting,
            "sites_waiting": snapshot.waiting_sites,
            "waiting_by_site": dict(
                sorted(snapshot.waiting.items(), key=lambda kv: -kv[1])[:TOP_SITES]
            ),
            "parked": snapshot.parked,
            "in_flight": sum(n["in_flight"] for n in nodes),
            # seeds taken by nodes, or given back by those that stopped or died: not in the
            # crawl yet
            "seeding": sum(n["seeding"] for n in nodes) + snapshot.seeds_returned,
            "start_list": snapshot.start_list,
            "backlog": left,
            "seen": snapshot.seen,
            "rejected": snapshot.rejected,
            "sites_with_crawl_delay": snapshot.delayed_sites,
            "sites_held": snapshot.held_sites,
        },
        "dead_letters": dead,
        "site_defaults": defaults,
        "sites": site_rows(
            snapshot.site_budgets,
            snapshot.waiting,
            snapshot.site_rates,
            snapshot.at_ms or None,
            defaults=defaults,
        ),
        "servers": [
            {
                "server": record.server,
                "sites": record.sites,
                "in_flight": record.in_flight,
                "some_sites": record.some_sites,
            }
            for record in snapshot.servers
        ],
        "politeness": politeness_figures(snapshot.nodes),
        "nodes": nodes,
        "totals": {
            "live_nodes": live,
            "dead_nodes": by_state[words.DEAD],
            "nodes_by_state": by_state,
            "responses": int(totals["responses"]),
            "products": int(totals["products"]),
            "responses_per_min": _round(rate_totals["pages"]) if rated else None,
            "products_per_min": _round(rate_totals["products"]) if rated else None,
            "acked_per_min": _round(drain) if rated else None,
            "journal_held": sum(n["journal_held"] for n in nodes),
        },
        # pages parsed, by page kind (the responses less robots.txt, error answers and 304s)
        "pages_by_kind": {k: int(v) for k, v in sorted(pages_by_kind.items())},
        "errors": {k: int(v) for k, v in sorted(errors.items())},
        "eta_seconds": eta,
        "backlog_per_min": _round(trend) if trend is not None else None,
        "drained": drained,
        "revisit": revisit,
        "redis_memory": memory_status(snapshot.redis_memory),
        "error_groups": {
            "groups": snapshot.error_totals.groups,
            "groups_by_kind": dict(snapshot.error_totals.groups_by_kind),
            "failures_by_kind": dict(snapshot.error_totals.events_by_kind),
            "top": [group.as_dict() for group in snapshot.error_groups],
        },
        "findings": {"total": snapshot.findings_total, "latest": list(snapshot.findings)},
        "unreadable": unreadable,
    }


def products_accounted(
    status: Mapping[str, Any], heartbeat_interval: float | None = None
) -> dict[str, Any]:
    """The products the nodes counted (their last heartbeats) beside those this crawl stored
    (``status["store"]``), and why they differ where they do: the causes that apply, from
    what the status holds."""
    counted = int(status["totals"]["products"])
    store = status.get("store") or {}
    stored = store.get("this_crawl")
    out: dict[str, Any] = {
        "counted_by_nodes": counted,
        "stored_by_this_crawl": stored,
        "difference": None if stored is None else stored - counted,
        "why": [],
    }
    if stored is None:
        out["why"] = [store.get("error") or "this crawl's products were not counted"]
        return out
    nodes = status["nodes"]
    dead = [n["node"] for n in nodes if n["state"] == words.DEAD]
    live = [n for n in nodes if n["state"] == words.LIVE]
    every = f" (every {heartbeat_interval:g} s)" if heartbeat_interval else ""
    if stored > counted:
        if live:
            ages = [n["heartbeat_age_s"] for n in live if n["heartbeat_age_s"] is not None]
            ago = f", up to {short_duration(max(ages))} ago" if ages else ""
            out["why"].append(
                f"the live nodes' counts are those of their last heartbeat{ago}: what they "
                "stored since is not counted yet"
            )
        if dead:
            out["why"].append(
                f"node(s) {', '.join(dead)} died: a node's counts are those of its last "
                f"heartbeat{every}, so what it stored after that is stored but not counted"
            )
        if not live and not dead:
            out["why"].append(
                "the counts of nodes gone for more than a day are not kept, and products "
                "replayed from a journal by hand are counted by no node"
            )
    elif counted > stored:
        held = int(status["totals"].get("journal_held") or 0)
        if held:
            out["why"].append(f"{held} products wait in the nodes' journals, not in MongoDB yet")
        if status.get("revisit"):
            out["why"].append("revisit mode: a product is counted each time its page is fetched")
        if dead or any(n["recovered"] for n in nodes):
            out["why"].append(
                "pages a dead node held are fetched again by another: their products are "
                "counted twice and stored once"
            )
        out["why"].append(
            "a product found on two pages, or stored under one key from two URLs, is counted "
            "twice and stored once"
        )
    return out


def crawl_state(*, paused: bool, drained: bool, live: int) -> str:
    """The crawl's state in one word (:data:`~distcrawl.base.names.status.CRAWL_STATES`)."""
    if drained:
        return words.DRAINED
    if paused:
        return words.PAUSED
    return words.RUNNING if live else words.WAITING


def _continuous(revisit: Mapping[str, Any], eta: float | None) -> str:
    """Why a revisit crawl has no time to drain, and what it has instead."""
    nxt = revisit["next_due_s"]
    due = "none scheduled" if nxt is None else ("now" if nxt <= 0 else f"in {short_duration(nxt)}")
    now = "nothing due now" if eta == 0 else (
        f"what is due clears in {short_duration(eta)}" if eta is not None else "what is due waits"
    )  # fmt: skip
    return f"continuous (revisit mode: it never drains): {now}; next revisit due {due}"


def site_defaults(snapshot: Snapshot) -> dict[str, Any]:
    """The per-site budget defaults in force: those the live nodes lease with
    (``DISTCRAWL_SITE_RATE``, ``DISTCRAWL_SITE_CONCURRENCY``; 0: no limit), as they publish
    them. ``rate`` / ``concurrency`` are None when no live node published them, or when the
    nodes' differ (``why`` says which)."""
    published = [
        found
        for node in snapshot.nodes.values()
        if node.heartbeat_ms is not None and node.stopped_ms is None
        for found in [published_site_defaults(node.info)]
        if found is not None
    ]
    rates = sorted({rate for rate, _ in published})
    concs = sorted({conc for _, conc in published})
    out: dict[str, Any] = {"rate": None, "concurrency": None, "nodes": len(published)}
    if not published:
        out["why"] = "no live node publishes its defaults"
        return out
    differ = []
    if len(rates) == 1:
        out["rate"] = rates[0]
    else:
        differ.append(f"DISTCRAWL_SITE_RATE {', '.join(f'{r:g}' for r in rates)}")
    if len(concs) == 1:
        out["concurrency"] = concs[0]
    else:
        differ.append(f"DISTCRAWL_SITE_CONCURRENCY {', '.join(map(str, concs))}")
    if differ:
        out["why"] = "the live nodes differ: " + "; ".join(differ)
    return out


def _revisit_status(snapshot: Snapshot, at: int) -> dict[str, Any] | None:
    """[revisit] Pages scheduled again, when the next falls due, and how far behind schedule
    the crawl is (the oldest revisit due and not leased yet); None when none is scheduled."""
    info = snapshot.revisit
    head, late = info.next_due_ms, info.oldest_late_ms
    if not info.scheduled and late is None:
        return None
    due = [t for t in (head, late) if t is not None and t <= at]
    return {
        "scheduled": info.scheduled,
        "next_due_s": round((head - at) / 1000, 1) if head is not None else None,
        "behind_s": round((at - min(due)) / 1000, 1) if due else 0.0,
    }


def read_status(
    client: Any,
    keys: FrontierKeys,
    *,
    page_priorities: Mapping[str, int],
    heartbeat_timeout: float,
    revisit_grace: float = DEFAULT_REVISIT_GRACE,
    tracker: RateTracker | None = None,
    sample: float = 0.0,
) -> dict[str, Any]:
    """One status, with a blocking client. With a *tracker* (a watch), one read that adds to
    its rates; without one, reads until every live node has shown two heartbeats (its rates)
    or *sample* seconds have passed, then one read that also counts the dead letters."""

    def status(dead_sample: int | None = None) -> dict[str, Any]:
        options = {} if dead_sample is None else {"dead_sample": dead_sample}
        snapshot = read_snapshot(client, keys, page_priorities=page_priorities, **options)
        assert tracker is not None
        tracker.update(snapshot)
        return build_status(
            snapshot, tracker, heartbeat_timeout=heartbeat_timeout, revisit_grace=revisit_grace
        )

    if tracker is not None:
        return status()
    tracker = RateTracker()
    deadline = time.monotonic() + sample
    while True:
        first = status(dead_sample=0)
        live = [n for n in first["nodes"] if n["state"] == words.LIVE]
        if all(n["responses_per_min"] is not None for n in live) or time.monotonic() >= deadline:
            break
        time.sleep(_POLL)
    return status()
