"""Requests a node hands to Scrapy from its own memory instead of leasing them from Redis.

Two kinds, in one queue (the highest priority first, first in first out within one priority,
as the shared queue orders them):

- **kept** in memory because no queue entry can carry them: URLs of other schemes than
  http(s) (``data:``, ``file:``, ...) and requests JSON cannot write. Scrapy's own scheduler
  keeps requests it cannot serialise in memory the same way. They never reach Redis: no other
  node sees them and a node that dies loses them, so unlike the rest of the frontier they are
  not lossless (``scheduler/enqueued/memory``, ``frontier/in_memory/<reason>``; the first of
  each reason is logged).
- the node's **own**: found in solo mode (``solo.py``) with nothing waiting in the shared
  queue. Scrapy gets them at once, as from its own scheduler, and the next flush writes each
  to Redis as this node's lease (``Child.own``), acknowledged once Redis has it and Scrapy is
  done with it (:class:`OwnLeases`). Lossless: the page that found one is acknowledged only
  after its children are written (``WriteBuffers``), so a node killed before that flush has
  the page fetched again.
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

    from distcrawl.frontier.batch import Child, Lease

__all__ = ["LocalQueue", "OwnLeases"]

logger = logging.getLogger(__name__)


class LocalQueue:
    """The requests the node hands to Scrapy from its memory, kept and own alike."""

    def __init__(self, stats: StatsCollector) -> None:
        self.stats = stats
        self._heap: list[tuple[int, int, Request, bool]] = []
        self._seq = itertools.count()
        self._logged: set[str] = set()
        self._dropped: set[Request] = set()
        #: own requests in the queue (the rest are kept ones)
        self.own = 0

    def __len__(self) -> int:
        return len(self._heap) - len(self._dropped)

    def priority(self) -> int:
        """The priority of the next request (the queue is not empty)."""
        self._skip_dropped()
        return -self._heap[0][0]

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
        self._push(request, own=False)

    def add_own(self, request: Request) -> None:
        """Queue one of the node's own requests (its next flush writes it as its lease)."""
        self.own += 1
        self._push(request, own=True)

    def pop(self) -> Request | None:
        self._skip_dropped()
        if not self._heap:
            return None
        _, _, request, own = heapq.heappop(self._heap)
        stats = self.stats
        stats.inc_value(stat_keys.SCHEDULER_DEQUEUED)
        if own:
            self.own -= 1
            stats.inc_value(stat_keys.STARTED)
            stats.inc_value(stat_keys.SCHEDULER_DEQUEUED_REDIS)
        else:
            stats.inc_value(stat_keys.SCHEDULER_DEQUEUED_MEMORY)
        return request

    def drop(self, request: Request) -> bool:
        """Take an own request out if it is still queued; returns whether it was."""
        for _, _, queued, own in self._heap:
            if queued is request and own and request not in self._dropped:
                self._dropped.add(request)
                self.own -= 1
                return True
        return False

    def clear(self) -> tuple[int, int]:
        """Forget every request (the node closes); returns how many kept and own ones."""
        own = self.own
        kept = len(self) - own
        self._heap.clear()
        self._dropped.clear()
        self.own = 0
        return kept, own

    def _push(self, request: Request, *, own: bool) -> None:
        heapq.heappush(self._heap, (-int(request.priority), next(self._seq), request, own))

    def _skip_dropped(self) -> None:
        heap = self._heap
        while heap and heap[0][2] in self._dropped:
            self._dropped.discard(heapq.heappop(heap)[2])


class OwnLeases:
    """The node's own requests until Redis has them: each waits for the lease its flush
    writes; one Scrapy finished before that is acknowledged as soon as the lease is known."""

    def __init__(self, stats: StatsCollector) -> None:
        self.stats = stats
        # id of its Child (in the write buffers) -> that child (kept so that its id stays its
        # own) and its request
        self._waiting: dict[int, tuple[Child, Request]] = {}
        self._unleased: set[Request] = set()
        self._finished: set[Request] = set()

    def __len__(self) -> int:
        """How many own requests wait for their lease (a flush has not written them yet)."""
        return len(self._unleased)

    def wait(self, request: Request, child: Child) -> None:
        self._waiting[id(child)] = (child, request)
        self._unleased.add(request)

    def __contains__(self, request: object) -> bool:
        """Whether ``request`` is an own one waiting for its lease."""
        return request in self._unleased

    def finished(self, request: Request) -> bool:
        """Scrapy is done with ``request``; returns whether it is one waiting for its lease
        (then it is acknowledged once the lease is known)."""
        if request in self._unleased:
            self._finished.add(request)
            return True
        return False

    def written(
        self,
        own: list[tuple[Child, Lease | None]],
        *,
        queue: LocalQueue,
        leased: dict[Request, Lease],
        acks: list[Lease],
    ) -> None:
        """A flush wrote ``own`` (each child with its lease; None: the dupefilter had its
        URL): the request gets its lease, or its ack goes out with the next flush."""
        for child, lease in own:
            waiting = self._waiting.pop(id(child), None)
            if waiting is None:
                continue
            request = waiting[1]
            self._unleased.discard(request)
            finished = request in self._finished
            self._finished.discard(request)
            if lease is None:
                # solo mode says the dupefilter cannot hold it: its invariant broke (one not
                # started yet is not fetched, at least)
                started = not queue.drop(request)
                self.stats.inc_value(stat_keys.OWN_SEEN)
                logger.warning(
                    "Own request %s was already in the shared dupefilter when written (%s): "
                    "solo mode's guarantee broke (frontier/own/seen)",
                    request,
                    "fetched twice" if started else "not fetched here",
                )
                continue
            self.stats.inc_value(stat_keys.ENQUEUED)
            self.stats.inc_value(stat_keys.SCHEDULER_ENQUEUED)
            self.stats.inc_value(stat_keys.SCHEDULER_ENQUEUED_REDIS)
            if finished:
                acks.append(lease)
            else:
                leased[request] = lease
