"""Drain detection: when the whole crawl has looked done for long enough that a node with
``DISTCRAWL_CLOSE_WHEN_DRAINED`` lets Scrapy find its spider idle."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from scrapy_redis.spiders import RedisMixin

from distcrawl.base.config import SETTINGS
from distcrawl.base.names import stats as stat_keys
from distcrawl.base.names.commands import RESET_CRAWL
from distcrawl.node.seeds.sources import spider_redis_key

if TYPE_CHECKING:
    from scrapy import Spider
    from scrapy.settings import BaseSettings

    from distcrawl.frontier.store import FrontierStore

__all__ = ["DrainWatch", "waits_for_seeds"]

logger = logging.getLogger(__name__)


def waits_for_seeds(spider: Spider, settings: BaseSettings) -> bool:
    """Whether ``spider`` is seeded from Redis (a scrapy-redis spider, a ``redis_key``, or
    ``DISTCRAWL_START_URLS_KEY``): its crawl begins with the first seed, and a node started
    before it waits. Any other spider's crawl begins with its own ``start()``."""
    named: Any = SETTINGS.value(settings, "DISTCRAWL_START_URLS_KEY")
    return isinstance(spider, RedisMixin) or spider_redis_key(spider) is not None or bool(named)


class DrainWatch:
    """Tells when every shard, node and seed list has looked empty for ``drain_grace`` s (in
    revisit mode, also with no revisit due within ``revisit_grace`` s), once the crawl began:
    with a seed for a spider that ``waits_for_seeds``, else as soon as the node is idle (its
    ``start()`` is exhausted then, whether it yielded requests, only items, or nothing)."""

    def __init__(
        self,
        *,
        store: FrontierStore,
        node_id: str,
        drain_grace: float,
        revisit_grace: float | None = None,
        waits_for_seeds: bool = True,
        stats: Any = None,
    ) -> None:
        self.store = store
        self.node_id = node_id
        self.drain_grace = drain_grace
        self.revisit_grace = revisit_grace
        self.waits_for_seeds = waits_for_seeds
        self.stats = stats
        self._drained_since: float | None = None
        #: whether the frontier ever held a request (CLOSE_WHEN_DRAINED waits until it did)
        self._crawl_begun = False
        self._waiting_logged = False
        #: URLs the dupefilter held when this node first took seeds (None: it took none, or
        #: revisit mode, whose dupefilter forgets)
        self._seen_at_seeds: int | None = None

    def crawl_begun(self) -> None:
        """The node took seeds: the crawl has begun."""
        self._crawl_begun = True

    def reset(self) -> None:
        """The node has work again: the grace starts over at the next empty look."""
        self._drained_since = None

    async def seeds_taken(self) -> None:
        """The node took seeds (their requests not pushed yet): the crawl has begun, and the
        first time, what the dupefilter holds is noted (see :meth:`nothing_new`)."""
        self.crawl_begun()
        if self._seen_at_seeds is None and self.revisit_grace is None:
            self._seen_at_seeds = int(await self.store.seen())

    async def check(self, *, busy: bool) -> bool:
        """Whether the crawl is drained; ``busy``: this node still holds work or writes."""
        if busy:
            self._drained_since = None
            return False
        if await self.drained():
            logger.info(
                "Frontier drained on every node for %.1fs: node %s closes once its spider is idle",
                self.drain_grace,
                self.node_id,
            )
            await self.nothing_new()
            return True
        return False

    async def nothing_new(self) -> bool:
        """At the drain: says once, with the numbers and what to do, when the crawl found
        nothing new since this node took its seeds (the dupefilter persists with the crawl: a
        second crawl of a site fetches its seeds and finds every link seen before)."""
        before, self._seen_at_seeds = self._seen_at_seeds, None
        if before is None or not before:
            return False
        held = int(await self.store.seen())
        filtered = int(self.stats.get_value(stat_keys.FILTERED, 0)) if self.stats else 0
        if held != before:
            return False
        spider = self.store.keys.spider
        logger.warning(
            "Crawl %s drained with nothing new: every link found after the seeds was seen "
            "before (%d filtered on node %s; the dupefilter, which persists with the crawl, "
            "holds %d URLs). To crawl afresh: %s; to "
            "fetch pages again on a schedule: revisit mode (DISTCRAWL_REVISIT)",
            spider,
            filtered,
            self.node_id,
            held,
            RESET_CRAWL.line(spider=spider),
        )
        return True

    async def drained(self) -> bool:
        """Whether every shard, node and seed list has looked empty for ``drain_grace`` s."""
        counts = await self.store.drained()
        if any(int(c) for c in counts):
            self._drained_since = None
            return False
        if self.revisit_grace is not None:
            revisits = await self.store.revisit_status(self.revisit_grace)
            if revisits["due_within_grace"] or revisits["due_queued"]:
                self._drained_since = None
                return False
        if not self._crawl_begun:
            # Nodes may start before the first seed: an empty frontier that never held a
            # request is a crawl not begun yet, not a drained one. Wait for work. A spider of
            # its own start requests began with them (it is asked only once they are all out)
            self._crawl_begun = not self.waits_for_seeds or bool(await self.store.ever_used())
            if not self._crawl_begun:
                if not self._waiting_logged:
                    logger.info(
                        "Frontier empty and never seeded: node %s waits for the first seed (%s)",
                        self.node_id,
                        self.store.keys.start_urls,
                    )
                    self._waiting_logged = True
                return False
        now = time.monotonic()
        if self._drained_since is None:
            self._drained_since = now
            return False
        return now - self._drained_since >= self.drain_grace
