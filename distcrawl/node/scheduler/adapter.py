"""Scrapy's scheduler API over the frontier: requests in and out of a local window, Scrapy's
signals and engine hooks; the Redis I/O is the I/O loop's (``loop.py``)."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import secrets
import time
from collections import deque
from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.core.scheduler import BaseScheduler
from scrapy.exceptions import CloseSpider, DontCloseSpider
from scrapy.utils.defer import deferred_from_coro
from scrapy.utils.httpobj import urlparse_cached

from distcrawl.base.config import SETTINGS
from distcrawl.base.names import reasons
from distcrawl.base.names import stats as stat_keys
from distcrawl.base.recent import RecentKeys
from distcrawl.base.urls import mask_url
from distcrawl.frontier import connection
from distcrawl.frontier.batch import Child, SiteBudget
from distcrawl.frontier.keys import FrontierKeys
from distcrawl.frontier.store import CrawlFormatError, Dupefilter, FrontierStore
from distcrawl.node import compat
from distcrawl.node import signals as dc_signals
from distcrawl.node.internals import check_engine
from distcrawl.node.requests import codec
from distcrawl.node.revisit.schedule import RevisitPolicy
from distcrawl.node.scheduler.buffers import WriteBuffers
from distcrawl.node.scheduler.crawlwide import REFUSED_REASON, admit
from distcrawl.node.scheduler.deadletter import dead_letter
from distcrawl.node.scheduler.drain import DrainWatch, waits_for_seeds
from distcrawl.node.scheduler.identity import (
    NodeIdInUse,
    NodeRefused,
    claim_node_id,
    default_node_id,
    refuse,
    rejoin,
)
from distcrawl.node.scheduler.leases import LeaseIntake
from distcrawl.node.scheduler.local import LocalQueue, OwnLeases
from distcrawl.node.scheduler.loop import DEFAULT_IDLE_MAX_WAIT, LEASE_WINDOW, FrontierLoop
from distcrawl.node.scheduler.membership import Membership
from distcrawl.node.scheduler.memory import EvictingRedis, MemoryWatch, check_memory_at_open
from distcrawl.node.scheduler.outage import RedisUnreachableAtStart, StartWait
from distcrawl.node.scheduler.reconcile import report_rewind
from distcrawl.node.scheduler.revisits import RevisitHooks, log_revisit_mode, unlisted_watch
from distcrawl.node.scheduler.seeds import SeedFeed
from distcrawl.node.scheduler.sites import publish_site_limits, site_limits
from distcrawl.node.scheduler.solo import SoloMode
from distcrawl.node.scheduler.tracking import DEFAULT_KNOWN_FINGERPRINTS, InProgress, SiteActivity
from distcrawl.node.seeds.sources import SeedSource

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Self

    from scrapy import Request, Spider
    from scrapy.crawler import Crawler
    from scrapy.statscollectors import StatsCollector
    from twisted.internet.defer import Deferred

    from distcrawl.frontier.batch import Lease

__all__ = ["FrontierScheduler", "unreturned_leases"]

logger = logging.getLogger(__name__)

#: node id -> its scheduler, from its open until it returned its leases at a clean close
_HOLDING: dict[str, FrontierScheduler] = {}


def unreturned_leases() -> dict[str, int]:
    """Node id -> leases a scheduler of this process held when the process stopped without
    returning them (a forced stop, Redis away at close): they return to the queue only once
    the node's heartbeat times out, and ``scrapy crawl`` says so with its exit status."""
    held = {node: scheduler.leases_held() for node, scheduler in _HOLDING.items()}
    return {node: n for node, n in held.items() if n}


class FrontierScheduler(BaseScheduler):
    """Scheduler backed by the Redis frontier.

    Settings (read through the registry, :mod:`distcrawl.base.config`, which says what
    each does): ``REDIS_URL``, ``DISTCRAWL_NODE_ID``, ``DISTCRAWL_START_URLS_KEY``,
    ``DISTCRAWL_HEARTBEAT_TIMEOUT`` (and the interval derived from it),
    ``DISTCRAWL_CLOSE_WHEN_DRAINED`` (and the drain grace), ``DISTCRAWL_ALLOW_PRIVATE``,
    ``CONCURRENT_REQUESTS`` (and the prefetch and seed batch derived from it),
    ``DISTCRAWL_FLUSH_DELAY``, the per-site budget (``DISTCRAWL_SITE_*``), the dupefilter
    (``DISTCRAWL_DUPEFILTER``, ``DISTCRAWL_BLOOM_*``), ``DISTCRAWL_RECORD_DONT_FILTER``,
    Redis at start (``DISTCRAWL_REDIS_START_TIMEOUT``, ``DISTCRAWL_ALLOW_EVICTION``: a Redis
    whose ``maxmemory-policy`` may evict the frontier's keys is refused) and revisit mode
    (``DISTCRAWL_REVISIT*``, ``DISTCRAWL_UNLISTED*``).

    Solo mode (``solo.py``): a node that opens a crawl that never held a request, with the
    exact dupefilter, no revisit mode, no shared site budget or limits and
    ``DISTCRAWL_RECORD_DONT_FILTER`` off, may win the crawl's ``solo`` key; until another node
    joins it hands what it finds to Scrapy at once, as Scrapy's own scheduler does.

    At open, the node's crawl-wide settings are recorded in the crawl (by its first node) or
    compared with the record (``crawlwide``): a node that differs closes at once
    (``crawl_settings_differ``), having touched nothing of the crawl.
    """

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
        self._ready: deque[Request] = deque()
        self._leased: dict[Request, Lease] = {}
        #: requests handed out from memory: those no queue entry can carry (data: URLs,
        #: unserializable meta), and in solo mode the node's own, written as its leases
        self._local = LocalQueue(self.stats)
        self._own = OwnLeases(self.stats)
        self._solo: SoloMode | None = None
        self._writes = WriteBuffers(latency_target=latency_target)
        self._feedback = self._writes.feedback
        self._sites = SiteActivity()
        self._wake = asyncio.Event()  # the I/O loop waits on it
        #: a page's ack or a link joined the write buffers: the I/O loop's ``wrote`` once open
        self._wrote: Callable[[], None] = self._wake.set
        self._known = RecentKeys(DEFAULT_KNOWN_FINGERPRINTS)  # fingerprints this node pushed
        self._known_until = 0.0  # [revisit] monotonic time the known fingerprints are wiped
        self._loop: FrontierLoop | None = None
        self._refused = False  # another live process has this node id: this one never ran
        self._unreturned: int | None = None  # leases a close could not return (None: no close)
        self._run_id = secrets.token_hex(4)  # this process, as the owner of its node id
        #: revisit mode (set at open, from the settings and the spider's profiles)
        self.revisit: RevisitPolicy | None = None
        self._revisits: RevisitHooks | None = None

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

    # -- Scrapy's scheduler interface ----------------------------------------------------------

    def open(self, spider: Spider) -> Deferred[None]:
        return deferred_from_coro(self._open(spider))

    def close(self, reason: str) -> Deferred[None]:
        return deferred_from_coro(self._close(reason))

    def has_pending_requests(self) -> bool:
        """Whether the node holds requests for the engine; for a spider that ends once the
        crawl is drained also whether the whole crawl still may have work: until the I/O loop
        saw every node drained for the drain grace. Scrapy then finds the spider idle once,
        sends ``spider_idle`` and closes it (``finished``) unless a handler says otherwise."""
        if self._ready or self._local:
            return True
        loop = self._loop
        return self.close_when_drained and (loop is None or not loop.drained)

    def enqueue_request(self, request: Request) -> bool:
        # the delay is for this parking only: a redirect or a later retry must not inherit it
        delay = request.meta.pop("distcrawl_delay", 0)
        # with DISTCRAWL_RECORD_DONT_FILTER a dont_filter request (a seed, a retry) is recorded
        # too: the dupefilter then knows the URL when a page links back to it
        fp = self.crawler.request_fingerprinter.fingerprint(request)[:16]
        if not request.dont_filter:
            if self.revisit is not None and time.monotonic() >= self._known_until:
                # [revisit] the shared dupefilter forgets: this node's memory of what it sent
                # is wiped once a generation, so a forgotten URL is new again here too
                self._known.clear()
                self._known_until = time.monotonic() + self.revisit.forget_ms / 1000
                self.crawler.signals.send_catch_log(dc_signals.frontier_forgot)
            known = fp.hex()
            if known in self._known:
                # this node already sent it: the shared dupefilter holds it for good
                self.stats.inc_value(stat_keys.FILTERED_LOCALLY)
                self.stats.inc_value(stat_keys.DUPEFILTER_FILTERED)
                return False
            self._known.add(known)
            if self._solo is not None and len(self._known) >= self._known.limit:
                # the next one would make it forget: then it could not tell a new URL
                self._solo.leave("its memory of sent fingerprints is full")
        elif not self.record_dont_filter:
            fp = b""  # as Scrapy's own dupefilter: neither checked nor recorded
        loop = self._loop
        if loop is not None and loop.drained:
            loop.work_again()
        try:
            # the order score carries the priority; the lease hands it back
            payload = codec.encode(request, self.spider, priority=False)
        except ValueError as exc:
            # as Scrapy keeps a request its disk queue cannot serialise in its memory queue
            self._local.keep(request, reasons.UNQUEUEABLE, str(exc))
            return True
        refused = codec.entry_refusal(request, payload)
        if refused is not None:
            # Scrapy may download it (data:, an unknown scheme fails there as on Scrapy); a
            # queue entry never holds it, so no node is made to open a file: URL from Redis
            self._local.keep(request, refused)
            return True
        delay_ms = int(max(0.0, float(delay or 0)) * 1000)
        site = urlparse_cached(request).hostname or ""
        child = Child(fp, int(request.priority), request.dont_filter, delay_ms, site, payload)
        if not delay_ms and self._may_own(site):
            # Scrapy gets it at once, as from its own scheduler: the next flush writes it as
            # this node's lease (the ack of the page that found it waits for that flush)
            child = child._replace(own=True)
            self._local.add_own(request)
            self._own.wait(request, child)
            self.stats.inc_value(stat_keys.OWN)
        self._writes.children.append(child)
        self._wrote()
        return True

    def _may_own(self, site: str) -> bool:
        """Whether a request of ``site`` found now is this node's own: the node is solo (no
        other node or tool can have recorded its URL: see ``solo.py``), the crawl is not
        paused, no adaptive cut holds the site, nothing the node knows of waits in the shared
        queue or its write buffers (it would come first), and the node has fewer of its own
        queued than it would lease at once, and fewer not written yet than that plus those in
        progress (its held hash stays the size of a prefetch, not of the crawl)."""
        loop, store, solo = self._loop, self.store, self._solo
        if solo is None or loop is None or store is None or not solo.solo:
            return False
        if store.paused or site in loop.cut_sites:
            return False
        limit = max(self.prefetch, self.concurrency * LEASE_WINDOW)
        if self._local.own >= limit or len(self._own) >= limit + self.concurrency:
            return False
        if store.views.queued_anywhere():
            return False
        return all(c.own for c in self._writes.children)

    def next_request(self) -> Request | None:
        ready, local = self._ready, self._local
        if local and (not ready or local.priority() > ready[0].priority):
            return local.pop()
        if not ready:
            if len(self._leased) < self.concurrency:
                # the engine had a free slot and nothing was leased for it
                self.stats.inc_value(stat_keys.STARVED)
            self._wake.set()
            return None
        request = ready.popleft()
        self.stats.inc_value(stat_keys.STARTED)
        self.stats.inc_value(stat_keys.SCHEDULER_DEQUEUED)
        self.stats.inc_value(stat_keys.SCHEDULER_DEQUEUED_REDIS)
        if len(ready) <= self.low_water:
            self._wake.set()
        return request

    # -- lifecycle -------------------------------------------------------------------------------

    async def _open(self, spider: Spider) -> None:
        self.spider = spider
        settings = self.crawler.settings
        keys = FrontierKeys.for_spider(spider.name, settings)
        # a scrapy-redis spider's own redis_key; a set or zset is staged into a list
        source = SeedSource.for_spider(spider, settings, keys.start_urls)
        keys = dataclasses.replace(keys, start_urls=source.list_key)
        compat.adopt_spider(self.crawler, spider)
        self._client = client = connection.async_client(
            self.redis_url, socket_timeout=30, socket_connect_timeout=10, health_check_interval=30
        )
        profiles = getattr(spider, "profiles", ())
        self.revisit = policy = RevisitPolicy.from_settings(settings, profiles)
        self.store = store = FrontierStore(
            client, keys, dupefilter=self.dupefilter, forget_ms=policy.forget_ms if policy else None
        )
        # a node that cannot reach Redis at its start gives up after start_timeout (a wrong
        # REDIS_URL must not look like a node waiting); an outage later is waited out
        start = StartWait(timeout=self.start_timeout, where=mask_url(self.redis_url))
        try:
            await start.run(self._check_format)
            if self._refused:
                return
            # an evicting Redis is refused before the node writes anything, the record included
            await start.run(
                lambda: check_memory_at_open(client, allow_eviction=self.allow_eviction)
            )
            admitted = await admit(
                client, keys, settings, self.dupefilter, policy, node_id=self.node_id, start=start
            )
        except (RedisUnreachableAtStart, EvictingRedis) as exc:
            self._refused_at_start(exc)
            raise
        if not admitted:
            # Scrapy closes a spider cleanly on a CloseSpider from spider_opened; raised from
            # the scheduler's open it would skip opening the scraper, whose close then fails
            self._refused = True  # no claim, no lease, no heartbeat: close touches nothing
            self.crawler.signals.connect(self._refuse, signal=signals.spider_opened)
            return
        membership = Membership(
            store=store,
            node_id=self.node_id,
            stats=self.stats,
            heartbeat_interval=self.heartbeat_interval,
            heartbeat_timeout=self.heartbeat_timeout,
            sites=self._sites,
        )
        drain = DrainWatch(
            store=store,
            node_id=self.node_id,
            drain_grace=self.drain_grace,
            revisit_grace=policy.grace if policy else None,
            waits_for_seeds=waits_for_seeds(spider, settings),
            stats=self.stats,
        )
        engine = self.crawler.engine
        # the private hooks below, or a clear error instead of silence
        check_engine(engine, InProgress)
        slot = engine._slot
        assert slot is not None
        slot.inprogress = InProgress(slot.inprogress, self._request_done)
        self.crawler.signals.connect(self._spider_idle, signal=signals.spider_idle)
        self.crawler.signals.connect(self._dead_letter, signal=dc_signals.request_dead_lettered)
        # response_downloaded fires for every answer, also those the retry middleware turns
        # into a retry (response_received would only see the last one)
        self.crawler.signals.connect(self._response_received, signal=signals.response_downloaded)
        # pages per site, counted as Scrapy counts the node's pages (response_received_count)
        self.crawler.signals.connect(self._page_received, signal=signals.response_received)
        if policy is not None:
            self._revisits = self._revisit_hooks(policy, store, keys)
            # the answer that leaves the downloader middlewares (not one turned into a retry)
            self.crawler.signals.connect(self._revisits.answered, signal=signals.response_received)
        self._solo = solo = SoloMode(
            store=store,
            node_id=self.node_id,
            heartbeat_timeout=self.heartbeat_timeout,
        )
        self._loop = loop = FrontierLoop(
            store=store,
            client=client,
            node_id=self.node_id,
            membership=membership,
            writes=self._writes,
            ready=self._ready,
            leased=self._leased,
            intake=LeaseIntake(
                spider=spider,
                node_id=self.node_id,
                ready=self._ready,
                leased=self._leased,
                writes=self._writes,
                revisits=self._revisits,
                stats=self.stats,
                wake_engine=self._wake_engine,
            ),
            seeds=SeedFeed(
                store=store,
                client=client,
                source=source,
                spider=spider,
                node_id=self.node_id,
                batch=self.seed_batch,
                allow_private=self.allow_private,
                stats=self.stats,
                writes=self._writes,
                drain=drain,
                enqueue=self.enqueue_request,
            ),
            drain=drain,
            close_when_drained=self.close_when_drained,
            revisits=self._revisits,
            wake=self._wake,
            stats=self.stats,
            budget=self.budget,
            prefetch=self.prefetch,
            concurrency=self.concurrency,
            low_water=self.low_water,
            flush_delay=self.flush_delay,
            heartbeat_timeout=self.heartbeat_timeout,
            downloading=self._downloading,
            on_rewind=self._forget_pushed,
            holds_work=self._holds_work,
            on_drained=self._wake_engine,
            memory=MemoryWatch(client, self.stats),
            on_own=self._own_written,
            solo=solo,
        )
        self._wrote = loop.wrote
        logger.info(
            "Frontier node %s on %s (%d shards of crawl %s, seeds from %s)",
            self.node_id,
            mask_url(self.redis_url),
            keys.shards,
            keys.prefix,
            source.key,
        )
        try:
            await start.run(self._claim_node_id)
            if self._refused:
                return
            await start.run(lambda: rejoin(store, node_id=self.node_id, stats=self.stats))
            limits = site_limits(profiles, self.site_limits)
            await start.run(lambda: publish_site_limits(store, limits))
            shared_budget = self.budget.rate > 0 or self.budget.concurrency > 0 or bool(limits)
            eligible = (
                policy is None
                and not shared_budget
                and self.dupefilter.kind == "exact"
                and not self.record_dont_filter
            )
            # a member already: a node that finds it holding solo sees it live
            await start.run(lambda: solo.open(eligible=eligible))
        except RedisUnreachableAtStart as exc:
            self._refused_at_start(exc)
            raise
        _HOLDING[self.node_id] = self
        loop.start(wake_channel=keys.wake)

    def _revisit_hooks(
        self, policy: RevisitPolicy, store: FrontierStore, keys: FrontierKeys
    ) -> RevisitHooks:
        unlisted = unlisted_watch(
            policy, keys.unlisted, enabled=self.unlisted, grace=self.unlisted_grace
        )
        log_revisit_mode(policy)
        return RevisitHooks(
            policy=policy,
            store=store,
            leased=self._leased,
            writes=self._writes,
            fingerprint=self.crawler.request_fingerprinter.fingerprint,
            stats=self.stats,
            unlisted=unlisted,
        )

    def _refused_at_start(self, exc: Exception) -> None:
        if isinstance(exc, RedisUnreachableAtStart):
            logger.error("Node refuses to start: %s", exc)
        self._refused = True  # nothing was leased: close touches nothing

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

    async def _close(self, reason: str) -> None:
        loop = self._loop
        if loop is not None:
            loop.closing = True
        if self._refused or loop is None or self.store is None:
            if self._client is not None:
                await self._client.aclose()
            return
        if self._solo is not None:
            self._solo.leave("the node closes")
        await loop.stop()
        kept, own = self._local.clear()
        if kept:
            logger.warning(
                "Node %s closes with %d requests kept in its memory not crawled (no queue entry "
                "could carry them: they are not returned to the frontier)",
                self.node_id,
                kept,
            )
        holding = self.leases_held()
        # never started: they return with the node's leases below (own ones once written)
        unstarted = len(self._ready) + own
        for request in self._ready:
            self._leased.pop(request, None)
        self._ready.clear()
        self._unreturned = holding
        try:
            # what the engine finished is acked here; the rest (never started, or cut short
            # by an unclean stop) goes back to the queue at once
            await loop.write_out()
            if self._solo is not None and self._solo.blocked and self._writes.children:
                logger.warning(
                    "Node %s closes with %d requests not written: it was waiting for the "
                    "crawl's solo node to share the crawl",
                    self.node_id,
                    len(self._writes.children),
                )
            info = {"started": loop.started(), "prefetched": 0}
            await loop.membership.leave(info, reason=reason, unstarted=unstarted)
            self._unreturned = 0
            _HOLDING.pop(self.node_id, None)
        except connection.REDIS_FAILURES as exc:
            logger.error(
                "Node %s could not return its leases (%s); they return when its heartbeat "
                "times out after %.0fs",
                self.node_id,
                exc,
                self.heartbeat_timeout,
            )
        await self._client.aclose()

    def leases_held(self) -> int:
        """Leases this node holds in Redis as far as it knows: leased and not acked (those
        prefetched too), and acks waiting to be written; after a close, those it could not
        return."""
        if self._unreturned is not None:
            return self._unreturned
        return len(self._leased) + len(self._writes.held_leases())

    # -- engine hooks and signals ----------------------------------------------------------------

    def _request_done(self, request: Request) -> None:
        """The engine is done with ``request`` for good (see :class:`InProgress`): ack it."""
        lease = self._leased.pop(request, None)
        if lease is None:
            # one of the node's own not written yet (acked once it is), or one kept in memory
            self._own.finished(request)
            return
        revisits = self._revisits
        if revisits is None or not revisits.schedule(request, lease):
            self._writes.acks.append(lease)
        self._wrote()

    def _dead_letter(self, request: Request, reason: str, **details: Any) -> None:
        """``request_dead_lettered``: the request goes to the dead letters with its reason."""
        if self._revisits is not None:
            self._revisits.dead_lettered(request)
        self._writes.dead.append(
            dead_letter(
                request,
                reason,
                details,
                spider=self.spider,
                node_id=self.node_id,
                fingerprint=self.crawler.request_fingerprinter.fingerprint(request),
                lease=self._leased.get(request),
            )
        )
        self.stats.inc_value(stat_keys.DEAD_LETTERED)
        self._wake.set()

    def _response_received(self, response: Any, request: Request, spider: Spider) -> None:
        site = urlparse_cached(request).hostname
        if not site:
            return
        self._feedback.record(
            site,
            response.status,
            b"Retry-After" in response.headers,
            float(request.meta.get("download_latency", 0.0)),
        )

    def _page_received(self, response: Any, request: Request, spider: Spider) -> None:
        site = urlparse_cached(request).hostname
        if site:
            self._sites.record(site)

    def _spider_idle(self, spider: Spider) -> None:
        # a spider that ends once the crawl is drained is idle only then (see
        # has_pending_requests): Scrapy closes it, or its own handlers keep it open
        if not self.close_when_drained and (self._loop is None or not self._loop.closing):
            raise DontCloseSpider("waiting for the frontier")

    def _downloading(self) -> int:
        engine = self.crawler.engine
        if engine is None:
            return len(self._leased) - len(self._ready)
        return len(engine.downloader.active)

    def _wake_engine(self) -> None:
        # The engine polls next_request() only when it is told to (or on a 5 s heartbeat);
        # without this nudge a prefetched batch would wait for that heartbeat.
        slot = getattr(self.crawler.engine, "_slot", None)
        if slot is not None:
            slot.nextcall.schedule()

    def _forget_pushed(self, found: bytes) -> None:
        """A shard lacked this node's last mark (see :func:`report_rewind`): what the node
        remembers having pushed may be gone, so it and the spider forget it."""
        report_rewind(
            found,
            node_id=self.node_id,
            heartbeat_timeout=self.heartbeat_timeout,
            forgotten=len(self._known),
            stats=self.stats,
        )
        self._known.clear()
        if self._solo is not None:
            self._solo.leave("Redis lost writes")
        self.crawler.signals.send_catch_log(dc_signals.frontier_rewound)

    def _own_written(self, own: list[tuple[Child, Lease | None]]) -> None:
        self._own.written(own, queue=self._local, leased=self._leased, acks=self._writes.acks)
        self._wrote()

    def _holds_work(self) -> bool:
        """Work of this node the I/O loop does not see: requests kept in memory, and a
        ``start()`` not exhausted yet (it may still yield requests)."""
        engine = self.crawler.engine
        return bool(self._local) or (engine is not None and engine._start is not None)
