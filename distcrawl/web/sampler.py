"""The dashboard's one reader of the cluster: a sample of ``scrapy status`` every interval.

Every browser tab and every Prometheus scrape is served from the latest sample, so the Redis
cost of the dashboard is one status read per interval (the bounded read of
:mod:`distcrawl.ops.status`), however many people look at it. The sampler also keeps a short
history for the charts and the MongoDB figures, read on their own task so a slow or absent
MongoDB never delays the Redis view.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from distcrawl.base.names import status as words
from distcrawl.frontier.keys import FrontierKeys
from distcrawl.frontier.store import FrontierStore
from distcrawl.ops.bands import DEFAULT_PAGE_PRIORITIES
from distcrawl.ops.rates import RateTracker
from distcrawl.ops.snapshot import DEFAULT_DEAD_SAMPLE, aread_snapshot
from distcrawl.ops.status import DEFAULT_REVISIT_GRACE, build_status

__all__ = ["DEFAULT_HISTORY", "DEFAULT_INTERVAL", "DEFAULT_STORE_INTERVAL", "Sampler"]

logger = logging.getLogger(__name__)

#: seconds between two reads of the cluster (the dashboard is at most this far behind Redis)
DEFAULT_INTERVAL = 1.0
#: seconds between two counts of the products in MongoDB
DEFAULT_STORE_INTERVAL = 2.0
#: this crawl's products are a scan of the collection: the next one waits this many times
#: as long as the last took (so MongoDB spends at most a tenth of its time on the dashboard)
CRAWL_COUNT_SPACING = 10.0
#: samples kept for the charts (at the default interval: the last 10 minutes)
DEFAULT_HISTORY = 600
#: seconds over which the charts' rates are averaged (short, so the charts follow the crawl)
CHART_RATE_WINDOW = 10.0
#: seconds between two records of where the dashboard listens (nodes ignore a minute-old one)
ANNOUNCE_INTERVAL = 10.0
#: nodes drawn one line each in the per-node chart (the busiest ones)
CHART_NODES = 8


@dataclass
class Sampler:
    """Reads the cluster status every *interval* seconds with a ``redis.asyncio`` client.

    *store_figures* (blocking, run in a thread) is
    :meth:`~distcrawl.ops.products.ProductStore.figures`: the products in MongoDB, in the
    collection and this crawl's (those seen since the crawl's start); None means no store to
    watch.
    """

    client: Any
    keys: FrontierKeys
    heartbeat_timeout: float
    page_priorities: Mapping[str, int] = field(default_factory=lambda: DEFAULT_PAGE_PRIORITIES)
    revisit_grace: float = DEFAULT_REVISIT_GRACE
    interval: float = DEFAULT_INTERVAL
    store_interval: float = DEFAULT_STORE_INTERVAL
    history: int = DEFAULT_HISTORY
    dead_sample: int = DEFAULT_DEAD_SAMPLE
    store_figures: Callable[..., dict[str, Any]] | None = None
    #: where this dashboard listens (``host:port`` each), recorded in the crawl every
    #: :data:`ANNOUNCE_INTERVAL` seconds so that its nodes never fetch it
    addresses: tuple[str, ...] = ()

    status: dict[str, Any] | None = None
    error: str | None = None
    store: dict[str, Any] = field(default_factory=dict)
    refreshes: int = 0
    _tracker: RateTracker = field(default_factory=RateTracker)
    _chart_tracker: RateTracker = field(
        default_factory=lambda: RateTracker(window=CHART_RATE_WINDOW)
    )
    _series: deque[dict[str, Any]] = field(default_factory=deque)
    _store_samples: deque[tuple[float, int]] = field(default_factory=deque)
    _next_crawl_count: float = 0.0
    _changed: asyncio.Event = field(default_factory=asyncio.Event)
    _stopping: asyncio.Event = field(default_factory=asyncio.Event)
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)

    # ------------------------------------------------------------------ reading

    async def refresh(self) -> dict[str, Any]:
        """One read of the cluster: the status of ``scrapy status --json``, plus chart data."""
        snapshot = await aread_snapshot(
            self.client,
            self.keys,
            page_priorities=self.page_priorities,
            dead_sample=self.dead_sample,
        )
        self._tracker.update(snapshot)
        self._chart_tracker.update(snapshot)
        status = build_status(
            snapshot,
            self._tracker,
            heartbeat_timeout=self.heartbeat_timeout,
            revisit_grace=self.revisit_grace,
        )
        self._record(status)
        self.status = status
        self.error = None
        self.refreshes += 1
        self._notify()
        return status

    def _record(self, status: Mapping[str, Any]) -> None:
        frontier = status["frontier"]
        per_node: dict[str, dict[str, float]] = {}
        total_responses = total_products = 0.0
        for node in status["nodes"]:
            rates = self._chart_tracker.node_rates(node["node"])
            if node["state"] != words.LIVE or rates is None:
                continue
            per_node[node["node"]] = {
                "responses": round(rates["pages"] / 60, 2),
                "products": round(rates["products"] / 60, 2),
            }
            total_responses += rates["pages"] / 60
            total_products += rates["products"] / 60
        busiest = sorted(per_node, key=lambda n: -per_node[n]["responses"])[:CHART_NODES]
        self._series.append(
            {
                "t": status["server_time_ms"] / 1000,
                "queued_by_kind": dict(frontier["queued_by_kind"]),
                "parked": frontier["parked"],
                "in_flight": frontier["in_flight"],
                "responses_per_s": round(total_responses, 2),
                "products_per_s": round(total_products, 2),
                "nodes": {n: per_node[n]["responses"] for n in sorted(busiest)},
            }
        )
        while len(self._series) > self.history:
            self._series.popleft()

    def series(self) -> list[dict[str, Any]]:
        return list(self._series)

    async def refresh_store(self) -> dict[str, Any]:
        """Count the stored products (this crawl's at most every :data:`CRAWL_COUNT_SPACING`
        times as long as its last count took); the write rate comes from the last counts."""
        if self.store_figures is None:
            self.store = {"configured": False}
            return self.store
        since = (self.status or {}).get("started_ms")
        recount = time.monotonic() >= self._next_crawl_count
        began = time.monotonic()
        figures = await asyncio.to_thread(self.store_figures, since, this_crawl=recount)
        now = time.monotonic()
        if recount:
            took = now - began
            self._next_crawl_count = now + max(self.store_interval, CRAWL_COUNT_SPACING * took)
        elif figures["this_crawl"] is None and figures["since_ms"] == self.store.get("since_ms"):
            figures["this_crawl"] = self.store.get("this_crawl")  # the last count, kept
        products = figures["in_collection"]
        if products is None:
            self.store = {
                **figures,
                "configured": True,
                "reachable": False,
                "in_collection": self.store.get("in_collection"),
                "this_crawl": self.store.get("this_crawl"),
                "writes_per_s": None,
                "outage_since": self.store.get("outage_since") or time.time(),
            }
            self._store_samples.clear()
        else:
            self._store_samples.append((now, products))
            while len(self._store_samples) > 2 and now - self._store_samples[1][0] >= 10:
                self._store_samples.popleft()
            rate = None
            if len(self._store_samples) >= 2:
                (t0, n0), (t1, n1) = self._store_samples[0], self._store_samples[-1]
                rate = round((n1 - n0) / (t1 - t0), 2) if t1 > t0 else None
            self.store = {
                **figures,
                "configured": True,
                "reachable": True,
                "writes_per_s": rate,
                "outage_since": None,
            }
        self._notify()
        return self.store

    # ------------------------------------------------------------------ the loops

    def _notify(self) -> None:
        self._changed.set()

    async def wait_change(self, timeout: float) -> None:
        """Wait for the next sample (or *timeout* seconds)."""
        self._changed.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._changed.wait(), timeout)

    async def _loop(self, step: Callable[[], Any], every: float, what: str) -> None:
        while not self._stopping.is_set():
            started = time.monotonic()
            try:
                await step()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # Redis away, a damaged key: say it, keep sampling
                if what == "redis":
                    self.error = f"cannot read Redis: {exc}"
                    self._notify()
                logger.warning("dashboard: %s read failed: %s", what, exc)
            pause = max(0.05, every - (time.monotonic() - started))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), pause)

    async def announce(self) -> None:
        """Record where this dashboard listens, for the crawl's nodes (they never fetch it)."""
        if self.addresses:
            await FrontierStore(self.client, self.keys).announce_dashboard(self.addresses)

    def start(self) -> None:
        self._stopping.clear()
        self._tasks = [
            asyncio.create_task(self._loop(self.refresh, self.interval, "redis")),
            asyncio.create_task(self._loop(self.refresh_store, self.store_interval, "store")),
            asyncio.create_task(self._loop(self.announce, ANNOUNCE_INTERVAL, "announce")),
        ]

    async def stop(self, timeout: float = 10.0) -> None:
        """Let the loops finish the read under way (cancelling a Redis call halfway leaves the
        client's connection in doubt), cancelling them only after *timeout* seconds."""
        self._stopping.set()
        if self._tasks:
            _, late = await asyncio.wait(self._tasks, timeout=timeout)
            for task in late:
                task.cancel()
            for task in late:
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        self._tasks = []
