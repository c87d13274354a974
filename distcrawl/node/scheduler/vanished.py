"""A crawl whose state vanished from Redis: noticed by the start marker the crawl's first node
writes (``origin`` in the control slot), never crawled again in silence.

A node learns the marker at its open and finds it again with every heartbeat, and after any
round trip that found its last write gone. Redis back with older data (a rewind) still holds
the marker: the node carries on as after any rewind. Redis restarted empty, a ``FLUSHALL``, or
a ``REDIS_URL`` that names another database hold none (or another crawl's): the node writes in
its place that the crawl's state is lost, says so in one ERROR line with what to do, and stops
(its finish reason ``crawl_state_lost``; ``scrapy crawl`` exits with status 6). A node or a
command that meets a lost marker refuses the crawl, in one line, until ``control reset``.
"""

from __future__ import annotations

import contextlib
import logging
from typing import TYPE_CHECKING

from distcrawl.base.names import stats as stat_keys
from distcrawl.frontier import connection
from distcrawl.frontier.protocol.membership import lost_advice

if TYPE_CHECKING:
    from collections.abc import Callable

    from scrapy.statscollectors import StatsCollector

    from distcrawl.frontier.store import FrontierStore, Origin

__all__ = ["CrawlOrigin"]

logger = logging.getLogger(__name__)


class CrawlOrigin:
    """This node's knowledge of the crawl's start marker, and what it does when it is gone:
    ``on_lost()`` once (the scheduler closes the spider)."""

    def __init__(
        self,
        store: FrontierStore,
        *,
        node_id: str,
        stats: StatsCollector,
        on_lost: Callable[[], None],
    ) -> None:
        self.store = store
        self.node_id = node_id
        self.stats = stats
        self.on_lost = on_lost
        self.known = ""  # the marker this node opened the crawl with ("": not open yet)
        self.lost = False

    async def open(self) -> str | None:
        """At open, once a member: the marker (written now if the crawl has none yet); the
        refusal, where the crawl is marked lost."""
        found: Origin = await self.store.start(self.node_id)
        if found.lost:
            return found.refusal(self.store.keys.spider)
        self.known = found.marker
        return None

    async def check(self, *, read: bool = False) -> bool:
        """Whether the crawl's state is gone, from the marker the last heartbeat found (or
        read now); the first time, say so and mark the crawl lost."""
        if self.lost:
            return True
        if not self.known:
            return False
        if read:
            await self.store.read_origin()
        found = self.store.origin
        if found.marker == self.known:
            return False
        self.lost = True
        self.stats.inc_value(stat_keys.STATE_LOST)
        if not found.marker:
            # best effort: another node, or the next command, finds the marker gone too
            with contextlib.suppress(*connection.REDIS_FAILURES):
                await self.store.mark_lost(self.node_id, self.known)
        spider = self.store.keys.spider
        logger.error(
            "The state of crawl %r is gone from Redis: its start marker %r (written when the "
            "crawl began) is %s (Redis restarted empty, a FLUSHALL, or REDIS_URL names another "
            "database); node %s stops and crawls nothing again; %s",
            spider,
            self.known,
            f"replaced by {found.marker!r}" if found.marker else "missing",
            self.node_id,
            lost_advice(spider),
        )
        self.on_lost()
        return True
