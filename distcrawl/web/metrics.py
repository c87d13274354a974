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

if TYPE_CHECKING:
    from distcrawl.web.sampler import Sampler

__all__ = ["CONTENT_TYPE", "METRICS", "TOP_LABELS", "render_metrics"]

#: at most this many values of a free-text label (reason, error kind); the rest is ``other``
TOP_LABELS = 20
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
#: node states, always all present (0 when none), so an alert on ``live == 0`` fires
NODE_STATES = ("live", "dead", "stopped", "orphan", "gone")

#: name -> help text of every metric (the docs' metrics reference is generated from it)
METRICS = {
    "distcrawl_up": "1 when the dashboard's last read of Redis succeeded",
    "distcrawl_paused": "1 while the cluster is paused (control pause)",
    "distcrawl_drained": "1 when nothing is left: queue, retries, in flight and seeds all empty",
    "distcrawl_frontier_requests": "requests queued, by page kind (queue and site waiting rooms)",
    "distcrawl_frontier_queued_requests": "requests queued, all kinds",
    "distcrawl_frontier_waiting_for_site_requests": "queued requests waiting for their site",
    "distcrawl_frontier_parked_requests": "parked retries (delayed until due)",
    "distcrawl_frontier_in_flight_requests": "requests leased to nodes and not acked yet",
    "distcrawl_frontier_backlog_requests": "requests not finished: queued, parked, in flight, "
    "seeds",
    "distcrawl_frontier_seen_urls": "URLs in the shared dupefilter",
    "distcrawl_frontier_rejected_entries": "refused seeds and queue entries kept for inspection",
    "distcrawl_seeds_waiting": "seeds in the start list or being seeded",
    "distcrawl_pages": "pages crawled by all nodes (sum of the nodes' counters)",
    "distcrawl_items": "products scraped by all nodes (sum of the nodes' counters)",
    "distcrawl_drain_eta_seconds": "estimated seconds until the backlog is drained (NaN: unknown)",
    "distcrawl_nodes": "nodes by state",
    "distcrawl_node_pages": "pages crawled by a node",
    "distcrawl_node_items": "products scraped by a node",
    "distcrawl_node_requests_in_flight": "requests leased to a node",
    "distcrawl_node_heartbeat_age_seconds": "seconds since a node's last heartbeat",
    "distcrawl_dead_letters": "dead letters by reason (reasons beyond the top ones: other; "
    "past the counted sample: unsampled)",
    "distcrawl_errors": "errors by kind, summed over the nodes' counters",
    "distcrawl_site_requests_in_flight": "requests in flight for a site (top sites only)",
    "distcrawl_site_requests_waiting": "requests waiting for a site's budget (top sites only)",
    "distcrawl_site_adaptive_factor": "a site's adaptive rate factor, 0-1 (top sites only)",
    "distcrawl_store_up": "1 when MongoDB answered the dashboard's last count",
    "distcrawl_store_products": "products stored in MongoDB",
    "distcrawl_dashboard_refreshes": "reads of the cluster made by this dashboard",
}


def _gauge(name: str, value: float | None = None, labels: list[str] | None = None) -> Any:
    family = GaugeMetricFamily(name, METRICS[name], labels=labels)
    if value is not None:
        family.add_metric([], value)
    return family


def _counter(name: str, value: float | None = None, labels: list[str] | None = None) -> Any:
    family = CounterMetricFamily(name, METRICS[name], labels=labels)
    if value is not None:
        family.add_metric([], value)
    return family


def _top(counts: Mapping[str, float], limit: int = TOP_LABELS) -> dict[str, float]:
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    out = dict(ranked[:limit])
    rest = sum(v for _, v in ranked[limit:])
    if rest:
        out["other"] = out.get("other", 0) + rest
    return out


class _StatusCollector(Collector):
    def __init__(self, sampler: Sampler) -> None:
        self.sampler = sampler

    def collect(self) -> Iterator[Metric]:
        sampler = self.sampler
        status = sampler.status
        yield _gauge("distcrawl_up", 1 if status is not None and sampler.error is None else 0)
        yield _counter("distcrawl_dashboard_refreshes", sampler.refreshes)
        store = sampler.store
        if store.get("configured"):
            yield _gauge("distcrawl_store_up", 1 if store.get("reachable") else 0)
            if store.get("products") is not None:
                yield _gauge("distcrawl_store_products", store["products"])
        if status is None:
            return
        frontier, totals = status["frontier"], status["totals"]
        yield _gauge("distcrawl_paused", int(status["paused"]))
        yield _gauge("distcrawl_drained", int(status["drained"]))
        kinds = _gauge("distcrawl_frontier_requests", labels=["kind"])
        for kind, n in frontier["queued_by_kind"].items():
            kinds.add_metric([kind], n)
        yield kinds
        yield _gauge("distcrawl_frontier_queued_requests", frontier["queued"])
        yield _gauge("distcrawl_frontier_waiting_for_site_requests", frontier["waiting_for_site"])
        yield _gauge("distcrawl_frontier_parked_requests", frontier["parked"])
        yield _gauge("distcrawl_frontier_in_flight_requests", frontier["in_flight"])
        yield _gauge("distcrawl_frontier_backlog_requests", frontier["backlog"])
        yield _gauge("distcrawl_frontier_seen_urls", frontier["seen"])
        yield _gauge("distcrawl_frontier_rejected_entries", frontier["rejected"])
        yield _gauge("distcrawl_seeds_waiting", frontier["start_list"] + frontier["seeding"])
        yield _counter("distcrawl_pages", totals["pages"])
        yield _counter("distcrawl_items", totals["products"])
        eta = status["eta_seconds"]
        yield _gauge("distcrawl_drain_eta_seconds", math.nan if eta is None else eta)

        states = dict.fromkeys(NODE_STATES, 0)
        pages = _counter("distcrawl_node_pages", labels=["node"])
        items = _counter("distcrawl_node_items", labels=["node"])
        leased = _gauge("distcrawl_node_requests_in_flight", labels=["node"])
        age = _gauge("distcrawl_node_heartbeat_age_seconds", labels=["node"])
        for node in status["nodes"]:
            states[node["state"]] = states.get(node["state"], 0) + 1
            name = node["node"]
            pages.add_metric([name], node["pages"])
            items.add_metric([name], node["products"])
            leased.add_metric([name], node["in_flight"])
            if node["heartbeat_age_s"] is not None:
                age.add_metric([name], node["heartbeat_age_s"])
        by_state = _gauge("distcrawl_nodes", labels=["state"])
        for state, n in states.items():
            by_state.add_metric([state], n)
        yield from (by_state, pages, items, leased, age)

        dead = status["dead_letters"]
        reasons = _top(dead["by_reason"])
        unsampled = dead["total"] - dead.get("counted", 0)
        if unsampled > 0:
            reasons["unsampled"] = unsampled
        dead_family = _gauge("distcrawl_dead_letters", labels=["reason"])
        for reason, n in reasons.items():
            dead_family.add_metric([reason], n)
        yield dead_family
        errors = _counter("distcrawl_errors", labels=["kind"])
        for kind, n in _top(status["errors"]).items():
            errors.add_metric([kind], n)
        yield errors

        in_flight = _gauge("distcrawl_site_requests_in_flight", labels=["site"])
        waiting = _gauge("distcrawl_site_requests_waiting", labels=["site"])
        factor = _gauge("distcrawl_site_adaptive_factor", labels=["site"])
        for site in status["sites"]:
            in_flight.add_metric([site["site"]], site["in_flight"])
            waiting.add_metric([site["site"]], site["waiting"])
            factor.add_metric([site["site"]], site["factor"])
        yield from (in_flight, waiting, factor)


def render_metrics(sampler: Sampler) -> bytes:
    """The exposition of the sampler's latest status (no Redis command is sent here)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_StatusCollector(sampler))
    return generate_latest(registry)
