"""A node's view of a Redis outage: since when Redis has not answered, and the two log lines an
operator reads when it goes away and when it is back."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from scrapy.statscollectors import StatsCollector

__all__ = ["RedisOutage"]

logger = logging.getLogger("distcrawl.node.scheduler")  # the node's log lines, as before


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
        self.stats.inc_value("frontier/redis_errors")
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
