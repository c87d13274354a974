"""How long a node's event loop went without running: its heartbeats, its Redis I/O and its
downloads all wait while one callback holds it (a hostile page, a slow extension)."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

from scrapy import signals

from distcrawl.base.names import stats as stat_keys

if TYPE_CHECKING:
    from typing import Self

    from scrapy.crawler import Crawler
    from scrapy.statscollectors import StatsCollector

__all__ = ["LoopStallWatch"]

logger = logging.getLogger(__name__)

#: seconds between two looks at the clock
INTERVAL = 0.1
#: a stall this long (seconds) is logged (at most one line a minute; every one is counted)
WARN_STALL = 1.0
_LOG_EVERY = 60.0


class LoopStallWatch:
    """Extension: a timer every :data:`INTERVAL` s; how late it fires is how long the loop
    stalled. Stats: ``node/loop_stall_max_ms`` (the longest stall so far) and
    ``node/loop_stalls`` (stalls of :data:`WARN_STALL` s or more, each also logged, at most
    once a minute)."""

    def __init__(self, stats: StatsCollector) -> None:
        self.stats = stats
        self._due = 0.0
        self._call: asyncio.TimerHandle | None = None
        self._logged_at = -_LOG_EVERY
        self.longest = 0.0

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        assert crawler.stats is not None
        watch = cls(crawler.stats)
        crawler.signals.connect(watch.start, signal=signals.spider_opened)
        crawler.signals.connect(watch.stop, signal=signals.spider_closed)
        return watch

    def start(self) -> None:
        self._due = time.monotonic() + INTERVAL
        self._schedule()

    def stop(self) -> None:
        if self._call is not None:
            self._call.cancel()
        self._call = None

    def _schedule(self) -> None:
        # the node's reactor is asyncio's (the frontier's I/O needs it): its loop's timer
        self._call = asyncio.get_running_loop().call_later(INTERVAL, self._tick)

    def _tick(self) -> None:
        now = time.monotonic()
        stall = max(0.0, now - self._due)
        self._due = now + INTERVAL
        self._schedule()
        if stall > self.longest:
            self.longest = stall
            self.stats.set_value(stat_keys.LOOP_STALL_MAX_MS, int(stall * 1000))
        if stall >= WARN_STALL:
            self.stats.inc_value(stat_keys.LOOP_STALLS)
            if now - self._logged_at >= _LOG_EVERY:
                self._logged_at = now
                logger.warning(
                    "The event loop stalled for %.1fs: heartbeats, Redis I/O and downloads "
                    "waited (node/loop_stalls counts every stall of %.0fs or more)",
                    stall,
                    WARN_STALL,
                )
