"""A node's view of a Redis outage: since when Redis has not answered, the two log lines an
operator reads when it goes away and when it is back, and the retries of a node's start."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from distcrawl.base.names import stats as stat_keys

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from scrapy.statscollectors import StatsCollector

__all__ = ["UNREACHABLE", "RedisOutage", "retry_at_start"]

logger = logging.getLogger(__name__)

#: the errors of a Redis out of reach (a round trip's outcome is then unknown)
UNREACHABLE = (RedisConnectionError, RedisTimeoutError, OSError)


class RedisOutage:
    """Counts ``frontier/redis_errors``; ``down`` while Redis has not answered since an
    error."""

    def __init__(self, node_id: str, stats: StatsCollector, *, heartbeat_timeout: float) -> None:
        self.node_id = node_id
        self.stats = stats
        self.heartbeat_timeout = heartbeat_timeout
        self.since: float | None = None  # monotonic time of the first error of this outage

    @property
    def down(self) -> bool:
        return self.since is not None

    def failed(self, exc: BaseException) -> None:
        """A round trip failed because Redis could not be reached."""
        self.stats.inc_value(stat_keys.REDIS_ERRORS)
        if self.since is None:
            self.since = time.monotonic()
            logger.error(
                "Redis unavailable (%s); node %s pauses and keeps every request and "
                "ack in memory until it is back",
                exc,
                self.node_id,
            )

    def answered(self) -> bool:
        """A round trip succeeded; returns whether that ended an outage."""
        if self.since is None:
            return False
        logger.warning(
            "Redis is back after %.1fs; node %s carries on (and recovers no other "
            "node for %.0fs: they need time to heart-beat again)",
            time.monotonic() - self.since,
            self.node_id,
            self.heartbeat_timeout,
        )
        self.since = None
        return True


async def retry_at_start(func: Callable[[], Awaitable[None]]) -> None:
    """Run ``func`` until Redis answers it, waiting longer between tries (0.5 s up to 10 s)."""
    delay = 0.5
    while True:
        try:
            await func()
            return
        except UNREACHABLE as exc:
            logger.error("Redis unavailable at start (%s); retrying in %.1fs", exc, delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 10.0)
