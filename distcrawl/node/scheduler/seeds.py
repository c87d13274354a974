"""Seed feed: a node takes a batch of seeds from the crawl's seed list when it has nothing
leased, and queues the requests they make like any other link.

A seed leaves the list for the node's taken list (one script in the list's own slot, wherever
its name hashes), its requests go to the shards with the node's next flush, and only then does
it leave the taken list. A node that stops or dies in between gives its taken seeds back; taken
again, their requests go through the dupefilter: those already in the crawl are not queued
twice."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from distcrawl.base.names import stats as stat_keys
from distcrawl.base.urls import mask_url
from distcrawl.node.seeds.intake import SeedIntake

if TYPE_CHECKING:
    from collections.abc import Callable

    from scrapy import Request, Spider
    from scrapy.statscollectors import StatsCollector

    from distcrawl.frontier.store import FrontierStore
    from distcrawl.node.scheduler.buffers import WriteBuffers
    from distcrawl.node.scheduler.drain import DrainWatch
    from distcrawl.node.seeds.sources import SeedSource

__all__ = ["SEED_LOG_INTERVAL", "SEED_RECHECK", "AcceptedSeeds", "SeedFeed"]

logger = logging.getLogger(__name__)

#: seconds between two log lines about accepted seeds: a node taking 200,000 seeds writes their
#: count once per interval, not a line per seed (a refused seed is a line of its own)
SEED_LOG_INTERVAL = 10.0
#: seconds a node that found the seed list empty leaves it before it looks again: a node whose
#: leases come back empty while it is busy (its site's slots full, the queue dry) is woken by
#: every answer, and each look is a round trip. An idle node looks about as often anyway (its
#: I/O loop waits up to a second between rounds)
SEED_RECHECK = 1.0


class AcceptedSeeds:
    """The log lines of the seeds a node accepts: the first at once, then at most one per
    ``interval`` seconds with the counts since the last (and ``finish`` says what is left)."""

    def __init__(
        self,
        node_id: str,
        *,
        interval: float = SEED_LOG_INTERVAL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.node_id = node_id
        self.interval = interval
        self.clock = clock
        self.total = 0  # seeds accepted (or taken again) by this node
        self._accepted = 0  # since the last line
        self._again = 0
        self._last: tuple[str, int] | None = None  # the last seed's URL and priority
        self._logged_at: float | None = None

    def add(self, request: Request, *, again: bool = False) -> None:
        if again:
            self._again += 1
        else:
            self._accepted += 1
        self.total += 1
        self._last = (mask_url(request.url), int(request.priority))

    def report(self, *, finish: bool = False) -> None:
        """A line with the seeds since the last one, where one is due (or ``finish``)."""
        if not (self._accepted or self._again) or self._last is None:
            return
        now = self.clock()
        if not finish and self._logged_at is not None and now - self._logged_at < self.interval:
            return
        url, priority = self._last
        if self._accepted + self._again == 1:
            if self._accepted:
                logger.info("Seed accepted: %s (priority %d)", url, priority)
            else:
                logger.info("Seed taken again: %s", url)
        else:
            logger.info(
                "Seeds accepted: %d, taken again: %d (%d in all by node %s); the last: %s "
                "(priority %d)",
                self._accepted,
                self._again,
                self.total,
                self.node_id,
                url,
                priority,
            )
        self._accepted = self._again = 0
        self._logged_at = now


class SeedFeed:
    """Takes up to ``batch`` seeds from ``source`` into this node's taken list; their
    requests go to ``enqueue`` and the seeds leave that list with the flush that queues them
    (a node that dies in between leaves them for recovery)."""

    def __init__(
        self,
        *,
        store: FrontierStore,
        client: Any,
        source: SeedSource,
        spider: Spider,
        node_id: str,
        batch: int,
        allow_private: bool | frozenset[str],
        stats: StatsCollector,
        writes: WriteBuffers,
        drain: DrainWatch,
        enqueue: Callable[[Request], bool],
        recheck: float = SEED_RECHECK,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = store
        self.client = client
        self.source = source
        self.spider = spider
        self.node_id = node_id
        self.batch = max(1, batch)
        self.allow_private = allow_private
        self.stats = stats
        self.writes = writes
        self.drain = drain
        self.enqueue = enqueue
        self.log = AcceptedSeeds(node_id)
        self.recheck = recheck
        self.clock = clock
        #: when the list may be looked at again after it was found empty
        self._empty_until = 0.0

    def finish(self) -> None:
        """The node stops: the seeds it accepted since its last line are logged."""
        self.log.report(finish=True)

    async def take(self) -> bool:
        """Take a batch of seeds; returns whether there were any (they then wait in the write
        buffers: the caller flushes). Within ``recheck`` seconds of finding none it does not
        look: returns False."""
        if self._empty_until and self.clock() < self._empty_until:
            return False
        if self.source.kind != "list":
            # a set or zset of seeds is staged into a list first
            await self.source.stage(self.client, self.batch)
        # with no taken seed pending, any in this node's taken list come from a take whose
        # reply was lost: they are taken again (resume)
        pending = self.writes.seeds_pending
        taken = await self.store.take_seeds(self.node_id, self.batch, resume=not pending)
        if not taken:
            self._empty_until = self.clock() + self.recheck
            return False
        self._empty_until = 0.0
        await self.drain.seeds_taken()
        intake = SeedIntake(
            self.spider, node_id=self.node_id, allow_private=self.allow_private, stats=self.stats
        )
        if taken.again:
            # given back by a node that stopped or died before it said they were in the crawl,
            # or taken by this node in a take whose reply was lost: they may be in the crawl,
            # so the dupefilter decides (a repeat is harmless)
            again, rejected = intake.read(taken.again)
            self.writes.rejected += rejected
            for request in again:
                self.stats.inc_value(stat_keys.SEEDS_TAKEN_AGAIN)
                self.log.add(request, again=True)
                self.enqueue(request.replace(dont_filter=False))
        requests, rejected = intake.read(taken.fresh)
        self.writes.rejected += rejected
        for request in requests:
            self.stats.inc_value(stat_keys.SEEDS_ACCEPTED)
            self.log.add(request)
            self.enqueue(request)
        self.log.report()
        # the seeds leave this node's taken list once the flush that queues them is in
        self.writes.seeds_pending = True
        return True
