"""A node that refuses to start: Redis out of reach or evicting, another frontier format,
its node id held by another live process; the spider then closes touching nothing."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from scrapy import signals
from scrapy.exceptions import CloseSpider

from distcrawl.base.names import reasons
from distcrawl.frontier.store import CrawlFormatError
from distcrawl.node.scheduler.crawlwide import REFUSED_REASON
from distcrawl.node.scheduler.identity import NodeIdInUse, NodeRefused, claim_node_id, refuse
from distcrawl.node.scheduler.loop import DEFAULT_IDLE_MAX_WAIT
from distcrawl.node.scheduler.outage import RedisUnreachableAtStart
from distcrawl.node.scheduler.state import SchedulerState

if TYPE_CHECKING:
    from scrapy import Spider

__all__ = ["StartRefusal"]

logger = logging.getLogger(__name__)


class StartRefusal(SchedulerState):
    """The checks at open that may refuse the node, and the refusal itself."""

    def _refused_at_start(self, exc: Exception) -> None:
        """Redis out of reach, or evicting (whose check logged it): one error line, and the
        spider closes once open (nothing was leased: close touches nothing)."""
        if isinstance(exc, RedisUnreachableAtStart):
            logger.error("Node refuses to start: %s", exc)
            self._refuse_start(reasons.REDIS_UNREACHABLE, str(exc))
        else:
            self._refuse_start(reasons.REDIS_EVICTS, str(exc))

    def _refuse(self, spider: Spider) -> None:
        raise CloseSpider(REFUSED_REASON)

    async def _check_format(self) -> None:
        """Refuse a crawl of another frontier format before anything is written to it (the
        record of the crawl-wide settings included); the claim checks it again, atomically."""
        assert self.store is not None
        try:
            await self.store.check_format()
        except CrawlFormatError as refused:
            logger.error("Node refuses to start: %s", refused)
            self._refuse_start(reasons.OTHER_FORMAT, str(refused))

    async def _check_origin(self) -> None:
        """Refuse a crawl marked lost (its state vanished while nodes ran) before the node
        writes anything to it."""
        assert self.store is not None
        found = await self.store.read_origin()
        if found.lost:
            message = found.refusal(self.store.keys.spider)
            logger.error("Node refuses to start: %s", message)
            self._refuse_start(reasons.CRAWL_STATE_LOST, message)

    async def _open_origin(self) -> None:
        """Learn the crawl's start marker (written now by a crawl's first node); a crawl
        marked lost meanwhile is refused."""
        assert self._origin is not None
        message = await self._origin.open()
        if message is not None:
            logger.error("Node refuses to start: %s", message)
            self._refuse_start(reasons.CRAWL_STATE_LOST, message)

    def _state_lost(self) -> None:
        """The crawl's state vanished (``vanished.py`` said so): the spider closes with the
        reason ``crawl_state_lost``, and the node writes nothing more."""
        engine = self.crawler.engine
        if engine is not None and engine.spider is not None:
            self._closing_task = asyncio.ensure_future(
                engine.close_spider_async(reason=reasons.CRAWL_STATE_LOST)
            )

    async def _claim_node_id(self) -> None:
        assert self.store is not None
        try:
            await claim_node_id(
                self.store,
                node_id=self.node_id,
                run_id=self._run_id,
                heartbeat_timeout=self.heartbeat_timeout,
                # a few of the other owner's beats: it beats at least once per idle wait
                watch=max(2.0 * self.heartbeat_interval, 2.0 * DEFAULT_IDLE_MAX_WAIT) + 0.5,
            )
        except (NodeIdInUse, CrawlFormatError) as refusal:
            # the leases are another process's, or the crawl another format's: close touches none
            reason = refusal.reason if isinstance(refusal, NodeRefused) else reasons.OTHER_FORMAT
            self._refuse_start(reason, str(refusal))

    def _refuse_start(self, reason: str, message: str) -> None:
        """The node refuses to start: one log line, and the spider closes once it is open with
        *reason* as its finish reason (an exception while it opens would end the crawl under
        Scrapy's own tracebacks); close touches nothing of the crawl."""
        self._refused = True
        refuse(self.node_id, message)

        def close_at_once(spider: Spider) -> None:
            raise CloseSpider(reason)

        self._close_at_once = close_at_once  # signals hold their receivers weakly
        self.crawler.signals.connect(close_at_once, signal=signals.spider_opened)
