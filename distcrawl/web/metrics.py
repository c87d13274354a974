"""``/metrics``: the latest cluster status in Prometheus' text exposition format.

Every metric is derived from the status that ``scrapy status catalog --json`` prints (the
sampler's latest), so the two always agree. Labels are bounded: page kinds, node states,
node names (as many as nodes), dead-letter reasons and error kinds (top
:data:`TOP_LABELS`, the rest summed under ``other``) and sites (the top sites only). No URL is
ever a label.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from distcrawl.base.names import metrics as m
from distcrawl.base.names import vocabulary
from distcrawl.base.names.observe import GROUP_KINDS
from distcrawl.base.names.status import NODE_STATES

if TYPE_CHECKING:
    from distcrawl.web.sampler import Sampler

__all__ = ["CONTENT_TYPE", "METRICS", "TOP_LABELS", "render_metrics"]

#: at most this many values of a free-text label (reason, error kind); the rest is ``other``
TOP_LABELS = 20
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

_TERMS = {t.name: t for t in vocabulary(m.METRIC)}
#: name -> help of every metric, from :mod:`distcrawl.base.names.metrics` (as the docs' metrics
#: reference: :func:`distcrawl.base.names.vocabulary`)
METRICS = {name: term.meaning for name, term in _TERMS.items()}


def _family(name: str, value: float | None = None) -> Any:
    """The metric family *name* as the vocabulary defines it (its help, type and labels)."""
    term = _TERMS[name]
    kind = CounterMetricFamily if term.kind == "counter" else GaugeMetricFamily
    family = kind(name, term.meaning, labels=list(term.labels) or None)
    if value is not None:
        family.add_metric([], value)
    return family


def _top(counts: Mapping[str, float], limit: int = TOP_LABELS) -> dict[str, float]:
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    out = dict(ranked[:limit])
    rest = sum(v for _, v in ranked[limit:])
    if rest:
        out[m.OTHER] = out.get(m.OTHER, 0) + rest
    return out


class _StatusCollector(Collector):
    def __init__(self, sampler: Sampler) -> None:
        self.sampler = sampler

    def collect(self) -> Iterator[Metric]:
        sampler = self.sampler
        status = sampler.status
        yield _family(m.UP, 1 if status is not None and sampler.error is None else 0)
        yield _family(m.REFRESHES, sampler.refreshes)
        store = sampler.store
        if store.get("configured"):
            yield _family(m.STORE_UP, 1 if store.get("reachable") else 0)
            if store.get("in_collection") is not None:
                yield _family(m.STORE_PRODUCTS, store["in_collection"])
            if store.get("this_crawl") is not None:
                yield _family(m.STORE_THIS_CRAWL, store["this_crawl"])
        if status is None:
            return
        frontier, totals = status["frontier"], status["totals"]
        memory = status.get("redis_memory")
        if memory:
            yield _family(m.REDIS_MEMORY_USED, memory["used_bytes"])
            yield _family(m.REDIS_MAXMEMORY, memory["maxmemory_bytes"])
            yield _family(m.REDIS_EVICTING, int(str(memory["policy"]).startswith("allkeys")))
        yield _family(m.PAUSED, int(status["paused"]))
        yield _family(m.DRAINED, int(status["drained"]))
        kinds = _family(m.FRONTIER_REQUESTS)
        for kind, n in frontier["queued_by_kind"].items():
            kinds.add_metric([kind], n)
        yield kinds
        yield _family(m.QUEUED_REQUESTS, frontier["queued"])
        yield _family(m.WAITING_FOR_SITE_REQUESTS, frontier["waiting_for_site"])
        yield _family(m.PARKED_REQUESTS, frontier["parked"])
        yield _family(m.IN_FLIGHT_REQUESTS, frontier["in_flight"])
        yield _family(m.BACKLOG_REQUESTS, frontier["backlog"])
        yield _family(m.SEEN_URLS, frontier["seen"])
        yield _family(m.REJECTED_ENTRIES, frontier["rejected"])
        yield _family(m.SEEDS_WAITING, frontier["start_list"] + frontier["seeding"])
        yield _family(m.RESPONSES, totals["responses"])
        yield _family(m.ITEMS, totals["products"])
        eta = status["eta_seconds"]
        yield _family(m.DRAIN_ETA_SECONDS, math.nan if eta is None else eta)

        # every state, 0 when none, so an alert on live == 0 fires
        states = dict.fromkeys(NODE_STATES, 0)
        responses = _family(m.NODE_RESPONSES)
        items = _family(m.NODE_ITEMS)
        leased = _family(m.NODE_IN_FLIGHT)
        age = _family(m.NODE_HEARTBEAT_AGE)
        journal = _family(m.NODE_JOURNAL)
        for node in status["nodes"]:
            states[node["state"]] = states.get(node["state"], 0) + 1
            name = node["node"]
            responses.add_metric([name], node["responses"])
            items.add_metric([name], node["products"])
            leased.add_metric([name], node["in_flight"])
            if node["heartbeat_age_s"] is not None:
                age.add_metric([name], node["heartbeat_age_s"])
            journal.add_metric([name], node["journal_held"])
        by_state = _family(m.NODES)
        for state, n in states.items():
            by_state.add_metric([state], n)
        yield from (by_state, responses, items, leased, age, journal)

        dead = status["dead_letters"]
        reasons = _top(dead["by_reason"])
        unsampled = dead["total"] - dead.get("counted", 0)
        if unsampled > 0:
            reasons[m.UNSAMPLED] = unsampled
        dead_family = _family(m.DEAD_LETTERS)
        for reason, n in reasons.items():
            dead_family.add_metric([reason], n)
        yield dead_family
        errors = _family(m.ERRORS)
        for kind, n in _top(status["errors"]).items():
            errors.add_metric([kind], n)
        yield errors

        in_flight = _family(m.SITE_IN_FLIGHT)
        waiting = _family(m.SITE_WAITING)
        factor = _family(m.SITE_FACTOR)
        cut = _family(m.SITE_CUT_REMAINING)
        delay = _family(m.SITE_CRAWL_DELAY)
        hold = _family(m.SITE_HOLD_REMAINING)
        for site in status["sites"]:
            in_flight.add_metric([site["site"]], site["in_flight"])
            waiting.add_metric([site["site"]], site["waiting"])
            factor.add_metric([site["site"]], site["factor"])
            if site.get("cut"):
                cut.add_metric([site["site"], site["cut"]["cause"]], site["cut"]["wears_off_in_s"])
            if site.get("crawl_delay_s") is not None:
                delay.add_metric([site["site"], site["delay_source"]], site["crawl_delay_s"])
            if site.get("hold"):
                hold.add_metric([site["site"], site["hold"]["cause"]], site["hold"]["ends_in_s"])
        yield from (in_flight, waiting, factor, cut, delay, hold)
        yield _family(m.SITES_WITH_CRAWL_DELAY, frontier["sites_with_crawl_delay"])
        yield _family(m.SITES_HELD, frontier["sites_held"])
        servers = _family(m.SERVER_SITES)
        for server in status["servers"]:
            servers.add_metric([server["server"]], server["sites"])
        yield servers
        yield _family(m.ROBOTS_UNAVAILABLE, status["politeness"]["robots_unavailable"])

        # every kind, 0 when none, so an alert on a kind's increase fires from the first one
        observed = status.get("error_groups") or {}
        groups = _family(m.ERROR_GROUPS)
        events = _family(m.ERROR_GROUP_EVENTS)
        by_kind = {**dict.fromkeys(GROUP_KINDS, 0), **observed.get("groups_by_kind", {})}
        failures = {**dict.fromkeys(GROUP_KINDS, 0), **observed.get("failures_by_kind", {})}
        for kind in by_kind:
            groups.add_metric([kind], by_kind[kind])
            events.add_metric([kind], failures.get(kind, 0))
        yield from (groups, events)
        yield _family(m.FINDINGS, (status.get("findings") or {}).get("total", 0))


def render_metrics(sampler: Sampler) -> bytes:
    """The exposition of the sampler's latest status (no Redis command is sent here)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_StatusCollector(sampler))
    return generate_latest(registry)
