"""Per-minute rates of a node's counters: what a node publishes with its heartbeat and what
a reader derives from successive heartbeats."""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from typing import Any

from distcrawl.base.names import stats as stat_keys

__all__ = [
    "PAGES_PREFIX",
    "PUBLISHED_RATE_WINDOW",
    "SITE_DEFAULTS",
    "OwnRates",
    "counters",
    "is_number",
    "prune",
    "published_rates",
    "published_site_defaults",
]

#: the node stats counting pages parsed, by page kind
PAGES_PREFIX = stat_keys.PAGES.prefix


def counters(stats: Mapping[str, Any]) -> dict[str, float]:
    """The node counters rates are derived from: pages (answers the engine received, as Scrapy
    counts them: what a node's sites are counted by too), products and acks."""
    pages = stats.get(stat_keys.RESPONSE_RECEIVED, 0)
    return {
        "pages": float(pages if is_number(pages) else 0),
        "products": float(stats.get(stat_keys.ITEM_SCRAPED, 0)),
        "acked": float(stats.get(stat_keys.ACKED, 0)),
    }


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


#: seconds of its own heartbeats over which a node derives the rates it publishes
PUBLISHED_RATE_WINDOW = 60.0


class OwnRates:
    """A node's own per-minute rates over its last :data:`PUBLISHED_RATE_WINDOW` seconds,
    published with its heartbeat (``rates`` in its info): every reader, the status command and
    each node's progress line alike, then sums the same figures for the cluster.

    Its pages per site come from the same samples, so over the same window: each sample
    carries the pages of each site since the one before (summed over all sites they are the
    node's pages, as its counter counts them)."""

    def __init__(self, window: float = PUBLISHED_RATE_WINDOW) -> None:
        self.window_ms = int(window * 1000)
        self._ring: deque[tuple[int, dict[str, float], Mapping[str, int]]] = deque()

    def update(
        self, now_ms: int, stats: Mapping[str, Any], sites: Mapping[str, int] | None = None
    ) -> dict[str, float] | None:
        """Record the node's stats at *now_ms* (and *sites*: pages of each site since the last
        update); its rates, or None before two samples."""
        self._ring.append((now_ms, counters(stats), dict(sites or {})))
        prune(self._ring, now_ms - self.window_ms)
        window = self._window()
        if window is None:
            return None
        minutes, first, last = window
        return {k: round((last[k] - first[k]) / minutes, 1) for k in last}

    def sites(self, n: int) -> list[list[Any]]:
        """The ``n`` busiest sites over the window of :meth:`update`'s rates, as
        ``[site, pages per minute]``, the busiest first ([] before two samples)."""
        window = self._window()
        if window is None:
            return []
        minutes = window[0]
        counts: dict[str, int] = {}
        for _, _, sites in list(self._ring)[1:]:  # what happened after the first sample
            for site, pages in sites.items():
                counts[site] = counts.get(site, 0) + pages
        busiest = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:n]
        return [[site, round(pages / minutes, 2)] for site, pages in busiest if pages]

    def _window(self) -> tuple[float, dict[str, float], dict[str, float]] | None:
        if len(self._ring) < 2:
            return None
        (t0, first, _), (t1, last, _) = self._ring[0], self._ring[-1]
        if t1 <= t0:
            return None
        return (t1 - t0) / 60_000, first, last


#: the field of a node's published info with the per-site budget defaults it leases with
SITE_DEFAULTS = "site_defaults"


def published_site_defaults(info: Mapping[str, Any]) -> tuple[float, int] | None:
    """The per-site budget defaults a node published (requests/s, requests in flight; 0: no
    limit), None when it published none that read as numbers."""
    defaults = info.get(SITE_DEFAULTS)
    if not isinstance(defaults, dict):
        return None
    rate, concurrency = defaults.get("rate"), defaults.get("concurrency")
    if not (isinstance(rate, int | float) and isinstance(concurrency, int | float)):
        return None
    if isinstance(rate, bool) or isinstance(concurrency, bool):
        return None
    return float(rate), int(concurrency)


def published_rates(info: Mapping[str, Any]) -> dict[str, float] | None:
    rates = info.get("rates")
    if not isinstance(rates, dict):
        return None
    if not all(is_number(rates.get(k)) for k in ("pages", "products", "acked")):
        return None
    return {k: float(rates[k]) for k in ("pages", "products", "acked")}


def prune(ring: deque[Any], since: int) -> None:
    # keep one sample at or before the window start, so the window is covered in full
    while len(ring) > 2 and ring[1][0] <= since:
        ring.popleft()
