"""A periodic cluster-wide progress line in every node's log, next to Scrapy's own LogStats.

LogStats tells what this node did; :class:`ClusterProgress` tells where the whole crawl is:
queued work, requests in flight on all nodes, parked retries, dead letters, live nodes and the
cluster's products/min. It reads the same view as ``scrapy status`` (:mod:`distcrawl.ops.status`)
with ``redis.asyncio`` from a task on the reactor's event loop, so it never blocks a node.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING, Any

from redis.exceptions import RedisError
from scrapy import signals
from scrapy.exceptions import NotConfigured

from distcrawl.base.config import SETTINGS
from distcrawl.frontier import connection
from distcrawl.frontier.store import FrontierKeys
from distcrawl.ops.rates import RateTracker
from distcrawl.ops.snapshot import aread_snapshot
from distcrawl.ops.status import build_status

if TYPE_CHECKING:
    from typing import Self

    from scrapy import Spider
    from scrapy.crawler import Crawler

__all__ = ["ClusterProgress", "progress_line"]

logger = logging.getLogger(__name__)


def _minutes(seconds: float | None) -> str:
    if seconds is None:
        return "unknown"
    if seconds < 60:
        return f"{seconds:.0f}s"
    return f"{seconds / 60:.0f}min"


def _drains(status: dict[str, Any]) -> str:
    if status["paused"]:
        return "drains when resumed"  # nothing drains while paused: no time from earlier acks
    if status.get("revisit"):
        return "continuous (revisit mode)"
    return f"drains in {_minutes(status['eta_seconds'])}"


def progress_line(status: dict[str, Any]) -> str:
    """One line of cluster-wide figures from a :func:`distcrawl.ops.status.build_status` dict."""
    frontier, totals = status["frontier"], status["totals"]
    queued = frontier["queued"]
    rate = totals["products_per_min"]
    responses = totals["responses_per_min"]
    parts = [
        f"queued {queued}",
        f"in flight {frontier['in_flight']}",
        f"parked retries {frontier['parked']}",
        f"dead letters {status['dead_letters']['total']}",
        f"nodes {totals['live_nodes']} live"
        + (f", {totals['dead_nodes']} dead" if totals["dead_nodes"] else ""),
        f"{'-' if rate is None else f'{rate:.0f}'} products/min",
        f"{'-' if responses is None else f'{responses:.0f}'} responses/min",
        _drains(status),
    ]
    if status["paused"]:
        parts.insert(0, "PAUSED")
    return "Cluster: " + ", ".join(parts)


#: seconds a closing node waits for the progress loop to end
_STOP_WAIT = 10.0


class ClusterProgress:
    """Logs :func:`progress_line` every ``DISTCRAWL_PROGRESS_INTERVAL`` seconds.

    Settings: ``DISTCRAWL_PROGRESS_INTERVAL`` (default 30; 0 disables), ``REDIS_URL``,
    ``DISTCRAWL_HEARTBEAT_TIMEOUT``, ``PAGE_PRIORITIES``, ``DISTCRAWL_START_URLS_KEY``.
    """

    def __init__(
        self,
        *,
        crawler: Crawler,
        interval: float,
        redis_url: str,
        heartbeat_timeout: float,
        page_priorities: dict[str, int],
    ) -> None:
        self.crawler = crawler
        self.interval = interval
        self.redis_url = redis_url
        self.heartbeat_timeout = heartbeat_timeout
        self.page_priorities = page_priorities
        # rates averaged over at least two lines, so one quiet heartbeat does not read as zero
        self.tracker = RateTracker(window=max(60.0, 2 * interval))
        self._task: asyncio.Task[None] | None = None
        self._client: Any = None
        self._failing = False
        self._stopping = asyncio.Event()

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        s = crawler.settings
        interval: float = SETTINGS.value(s, "DISTCRAWL_PROGRESS_INTERVAL")
        if interval <= 0:
            raise NotConfigured("DISTCRAWL_PROGRESS_INTERVAL is 0")
        ext = cls(
            crawler=crawler,
            interval=interval,
            redis_url=connection.settings_url(s),
            heartbeat_timeout=SETTINGS.value(s, "DISTCRAWL_HEARTBEAT_TIMEOUT"),
            page_priorities=SETTINGS.value(s, "PAGE_PRIORITIES"),
        )
        crawler.signals.connect(ext.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(ext.spider_closed, signal=signals.spider_closed)
        return ext

    def spider_opened(self, spider: Spider) -> None:
        keys = FrontierKeys.for_spider(spider.name, self.crawler.settings)
        self._client = connection.async_client(
            self.redis_url, socket_timeout=10, socket_connect_timeout=5
        )
        self._task = asyncio.ensure_future(self._run(keys))

    async def spider_closed(self, spider: Spider) -> None:
        # the loop ends at its next turn; a cancel alone may be swallowed by a Redis call under
        # way (a connection being made), and the loop would go on with the node waiting on it
        self._stopping.set()
        if self._task is not None:
            self._task.cancel()
            await asyncio.wait([self._task], timeout=_STOP_WAIT)
        if self._client is not None:
            await self._client.aclose()

    async def _run(self, keys: FrontierKeys) -> None:
        # a first sample at once, so the first line already has rates
        await self._sample(keys)
        while not self._stopping.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), self.interval)
                return
            status = await self._sample(keys)
            if status is not None:
                logger.info(progress_line(status))

    async def _sample(self, keys: FrontierKeys) -> dict[str, Any] | None:
        try:
            snapshot = await aread_snapshot(
                self._client, keys, page_priorities=self.page_priorities
            )
        except (RedisError, OSError) as exc:
            if not self._failing:
                logger.warning("Cluster progress unavailable: %s", exc)
            self._failing = True
            return None
        except Exception:
            # a progress line is never worth a node: log it and try again next time
            logger.exception("Cluster progress: unexpected error")
            return None
        self._failing = False
        self.tracker.update(snapshot)
        return build_status(snapshot, self.tracker, heartbeat_timeout=self.heartbeat_timeout)
