"""What a node's scheduler holds: its settings, read once from the crawler, and its local
window onto the frontier (shared with the I/O loop)."""

from __future__ import annotations

import asyncio
import secrets
from typing import TYPE_CHECKING, Any

from scrapy.core.scheduler import BaseScheduler

from distcrawl.base.config import SETTINGS
from distcrawl.base.recent import RecentKeys
from distcrawl.frontier import connection
from distcrawl.frontier.batch import SiteBudget
from distcrawl.frontier.store import Dupefilter
from distcrawl.node.politeness import Politeness
from distcrawl.node.scheduler.buffers import WriteBuffers
from distcrawl.node.scheduler.identity import default_node_id
from distcrawl.node.scheduler.local import LocalQueue, OwnLeases
from distcrawl.node.scheduler.ready import ReadyQueue
from distcrawl.node.scheduler.tracking import (
    DEFAULT_KNOWN_FINGERPRINTS,
    SiteActivity,
    StartedTally,
)

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Self

    from scrapy import Request, Spider
    from scrapy.crawler import Crawler
    from scrapy.statscollectors import StatsCollector

    from distcrawl.frontier.batch import Lease
    from distcrawl.frontier.store import FrontierStore
    from distcrawl.node.observe.watch import Watch
    from distcrawl.node.revisit.schedule import RevisitPolicy
    from distcrawl.node.scheduler.gate import Gate
    from distcrawl.node.scheduler.loop import FrontierLoop
    from distcrawl.node.scheduler.revisits import RevisitHooks
    from distcrawl.node.scheduler.shutdown import ShutdownGuard
    from distcrawl.node.scheduler.solo import SoloMode
    from distcrawl.node.scheduler.vanished import CrawlOrigin

__all__ = ["SchedulerState"]


class SchedulerState(BaseScheduler):
    """The settings and the state the parts of :class:`FrontierScheduler` share; the settings
    it reads are listed there."""

    def __init__(
        self,
        *,
        crawler: Crawler,
        redis_url: str,
        node_id: str,
        prefetch: int,
        seed_batch: int,
        heartbeat_interval: float,
        heartbeat_timeout: float,
        close_when_drained: bool,
        drain_grace: float,
        allow_private: bool | frozenset[str],
        concurrency: int,
        budget: SiteBudget,
        site_limits: dict[str, dict[str, Any]],
        latency_target: float,
        flush_delay: float,
        dupefilter: Dupefilter,
        record_dont_filter: bool,
        unlisted: bool,
        unlisted_grace: float | None,
        start_timeout: float,
        allow_eviction: bool,
    ) -> None:
        self.crawler = crawler
        self.stats: StatsCollector = crawler.stats
        self.redis_url = redis_url
        self.node_id = node_id
        self.prefetch = max(1, prefetch)
        self.seed_batch = max(1, seed_batch)
        self.heartbeat_interval = heartbeat_interval
        self.heartbeat_timeout = heartbeat_timeout
        self.close_when_drained = close_when_drained
        self.drain_grace = drain_grace
        self.allow_private = allow_private
        self.concurrency = max(1, concurrency)
        self.budget = budget
        self.dupefilter = dupefilter
        self.flush_delay = flush_delay
        #: below this many prefetched requests the node flushes at once (to lease more)
        self.low_water = max(1, self.concurrency // 2)
        self.record_dont_filter = record_dont_filter
        self.site_limits = dict(site_limits)
        self.latency_target = latency_target
        self.unlisted = unlisted
        self.unlisted_grace = unlisted_grace
        self.start_timeout = start_timeout
        self.allow_eviction = allow_eviction

        self.spider: Spider | None = None
        self.store: FrontierStore | None = None
        self._client: Any = None
        # The local window, shared with the I/O loop: leased requests not yet handed to the
        # engine, and each leased request's lease until it is acked (those leased and not
        # ready are the ones the engine works on)
        self._ready = ReadyQueue()
        self._leased: dict[Request, Lease] = {}
        #: robots.txt, holds, server budgets; the gate hands the engine what may start
        self._politeness = Politeness.of(crawler)
        self._gate: Gate | None = None
        #: requests handed out from memory: those no queue entry can carry (data: URLs,
        #: unserializable meta), and in solo mode the node's own, written as its leases
        self._local = LocalQueue(self.stats)
        self._own = OwnLeases(self.stats)
        self._solo: SoloMode | None = None
        self._writes = WriteBuffers(latency_target=latency_target)
        self._feedback = self._writes.feedback
        self._politeness.feedback = self._feedback
        self._sites = SiteActivity()
        #: leased requests handed to the engine, added to the stats when they are read
        self._started = StartedTally(self.stats)
        self._wake = asyncio.Event()  # the I/O loop waits on it
        #: a page's ack or a link joined the write buffers: the I/O loop's ``wrote`` once open
        self._wrote: Callable[[], None] = self._wake.set
        self._known = RecentKeys(DEFAULT_KNOWN_FINGERPRINTS)  # fingerprints this node pushed
        self._known_until = 0.0  # [revisit] monotonic time the known fingerprints are wiped
        self._loop: FrontierLoop | None = None
        self._refused = False  # another live process has this node id: this one never ran
        self._unreturned: int | None = None  # leases a close could not return (None: no close)
        self._closing = False  # the close has begun
        self._closed = False  # the close is over
        #: a graceful stop before the engine runs still returns the leases (``shutdown.py``)
        self._shutdown: ShutdownGuard | None = None
        #: the crawl's start marker (``vanished.py``), and the close it asks for once gone
        self._origin: CrawlOrigin | None = None
        self._closing_task: asyncio.Future[None] | None = None
        self._run_id = secrets.token_hex(4)  # this process, as the owner of its node id
        #: revisit mode (set at open, from the settings and the spider's profiles)
        self.revisit: RevisitPolicy | None = None
        self._revisits: RevisitHooks | None = None
        #: judges findings and sends notices (set at open)
        self._watch: Watch | None = None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        s = crawler.settings

        def get(name: str) -> Any:
            return SETTINGS.value(s, name)

        return cls(
            crawler=crawler,
            redis_url=connection.settings_url(s),
            node_id=get("DISTCRAWL_NODE_ID") or default_node_id(),
            prefetch=get("DISTCRAWL_PREFETCH"),
            seed_batch=get("DISTCRAWL_SEED_BATCH"),
            heartbeat_interval=get("DISTCRAWL_HEARTBEAT_INTERVAL"),
            heartbeat_timeout=get("DISTCRAWL_HEARTBEAT_TIMEOUT"),
            close_when_drained=get("DISTCRAWL_CLOSE_WHEN_DRAINED"),
            drain_grace=get("DISTCRAWL_DRAIN_GRACE"),
            allow_private=get("DISTCRAWL_ALLOW_PRIVATE"),
            concurrency=get("CONCURRENT_REQUESTS"),
            budget=SiteBudget.from_settings(s),
            site_limits=get("DISTCRAWL_SITE_LIMITS"),
            flush_delay=get("DISTCRAWL_FLUSH_DELAY"),
            latency_target=get("DISTCRAWL_SITE_LATENCY_TARGET"),
            dupefilter=Dupefilter(
                kind=get("DISTCRAWL_DUPEFILTER"),
                capacity=get("DISTCRAWL_BLOOM_CAPACITY"),
                error_rate=get("DISTCRAWL_BLOOM_ERROR_RATE"),
            ),
            record_dont_filter=get("DISTCRAWL_RECORD_DONT_FILTER"),
            unlisted=get("DISTCRAWL_UNLISTED"),
            unlisted_grace=get("DISTCRAWL_UNLISTED_GRACE") or None,
            start_timeout=get("DISTCRAWL_REDIS_START_TIMEOUT"),
            allow_eviction=get("DISTCRAWL_ALLOW_EVICTION"),
        )
