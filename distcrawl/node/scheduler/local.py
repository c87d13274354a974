"""Requests a node keeps in its own memory because no queue entry can carry them: URLs of
other schemes than http(s) (``data:``, ``file:``, ...) and requests JSON cannot write.

Scrapy's own scheduler keeps requests it cannot serialise in memory the same way. They never
reach Redis, so no other node sees them and a node that dies loses them: unlike the rest of
the frontier, they are not lossless (counted as ``scheduler/enqueued/memory`` and
``frontier/in_memory/<reason>``; the first of each reason is logged).
"""

from __future__ import annotations

import heapq
import itertools
import logging
from typing import TYPE_CHECKING

from distcrawl.base.names import reasons
from distcrawl.base.names import stats as stat_keys
from distcrawl.base.urls import printable

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.statscollectors import StatsCollector

__all__ = ["LocalQueue"]

logger = logging.getLogger(__name__)


class LocalQueue:
    """The node's in-memory requests: the highest priority first, first in first out within
    one priority (as the shared queue orders them)."""

    def __init__(self, stats: StatsCollector) -> None:
        self.stats = stats
        self._heap: list[tuple[int, int, Request]] = []
        self._seq = itertools.count()
        self._logged: set[str] = set()

    def __len__(self) -> int:
        return len(self._heap)

    def keep(self, request: Request, reason: str, detail: str = "") -> None:
        """Keep ``request``, which no queue entry can carry for ``reason``."""
        stats = self.stats
        if reason == reasons.UNQUEUEABLE:
            stats.inc_value(stat_keys.SCHEDULER_UNSERIALIZABLE)
        stats.inc_value(stat_keys.IN_MEMORY(reason))
        stats.inc_value(stat_keys.SCHEDULER_ENQUEUED)
        stats.inc_value(stat_keys.SCHEDULER_ENQUEUED_MEMORY)
        if reason not in self._logged:
            self._logged.add(reason)
            what = "Unable to serialize request" if reason == reasons.UNQUEUEABLE else "Keeping"
            logger.warning(
                "%s: %s - reason: %s - kept in this node's memory, not in the frontier (a node "
                "that dies loses it); more of this reason are only counted "
                "(frontier/in_memory/%s)",
                what,
                request,
                printable(detail or reason, 200),
                reason,
            )
        heapq.heappush(self._heap, (-int(request.priority), next(self._seq), request))

    def pop(self) -> Request | None:
        if not self._heap:
            return None
        self.stats.inc_value(stat_keys.SCHEDULER_DEQUEUED)
        self.stats.inc_value(stat_keys.SCHEDULER_DEQUEUED_MEMORY)
        return heapq.heappop(self._heap)[2]

    def clear(self) -> int:
        """Forget every request (the node closes); returns how many there were."""
        n = len(self._heap)
        self._heap.clear()
        return n
