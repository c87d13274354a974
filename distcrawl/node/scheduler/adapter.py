"""Scrapy's scheduler over the frontier, :class:`FrontierScheduler`: its open and close;
its parts are ``state``, ``window``, ``refusal`` and ``hooks``, the Redis I/O is ``loop``'s."""

from __future__ import annotations

import dataclasses
import logging
import time
from typing import TYPE_CHECKING

from scrapy import signals
from scrapy.utils.defer import deferred_from_coro

from distcrawl.base.urls import mask_url
from distcrawl.frontier import connection
from distcrawl.frontier.keys import FrontierKeys
from distcrawl.frontier.store import FrontierStore
from distcrawl.node import compat
from distcrawl.node import signals as dc_signals
from distcrawl.node.internals import check_engine
from distcrawl.node.observe.buffer import Observations
from distcrawl.node.observe.watch import Watch
from distcrawl.node.revisit.schedule import RevisitPolicy
from distcrawl.node.scheduler.crawlwide import admit
from distcrawl.node.scheduler.drain import DrainWatch, waits_for_seeds
from distcrawl.node.scheduler.gate import Gate
from distcrawl.node.scheduler.hooks import EngineHooks
from distcrawl.node.scheduler.identity import rejoin
from distcrawl.node.scheduler.leases import LeaseIntake
from distcrawl.node.scheduler.loop import FrontierLoop
from distcrawl.node.scheduler.membership import Membership
from distcrawl.node.scheduler.memory import EvictingRedis, MemoryWatch, check_memory_at_open
from distcrawl.node.scheduler.outage import RedisUnreachableAtStart, StartWait
from distcrawl.node.scheduler.refusal import StartRefusal
from distcrawl.node.scheduler.revisits import RevisitHooks, log_revisit_mode, unlisted_watch
from distcrawl.node.scheduler.seeds import SeedFeed
from distcrawl.node.scheduler.shutdown import ShutdownGuard
from distcrawl.node.scheduler.sites import publish_site_limits, site_limits
from distcrawl.node.scheduler.solo import SoloMode
from distcrawl.node.scheduler.tracking import InProgress
from distcrawl.node.scheduler.vanished import CrawlOrigin
from distcrawl.node.scheduler.window import RequestWindow
from distcrawl.node.seeds.sources import SeedSource

if TYPE_CHECKING:
    from scrapy import Spider
    from twisted.internet.defer import Deferred

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


class FrontierScheduler(RequestWindow, StartRefusal, EngineHooks):
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

    def open(self, spider: Spider) -> Deferred[None]:
        return deferred_from_coro(self._open(spider))

    def close(self, reason: str) -> Deferred[None]:
        return deferred_from_coro(self._close(reason))

    # -- lifecycle -------------------------------------------------------------------------------

    async def _open(self, spider: Spider) -> None:
        self.spider = spider
        self._shutdown = guard = ShutdownGuard(
            self.crawler,
            node_id=self.node_id,
            closing=lambda: self._closing,
            closed=lambda: self._closed,
            close=self._close,
        )
        guard.install()
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
        self._writes.probing = store.probing
        # a node that cannot reach Redis at its start gives up after start_timeout (a wrong
        # REDIS_URL must not look like a node waiting); an outage later is waited out
        start = StartWait(
            timeout=self.start_timeout,
            where=mask_url(self.redis_url),
            stopped=lambda: guard.stopping,
        )
        try:
            await start.run(self._check_format)
            if self._refused:
                return
            await start.run(self._check_origin)
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
            return
        if not admitted:
            # Scrapy closes a spider cleanly on a CloseSpider from spider_opened; raised from
            # the scheduler's open it would skip opening the scraper, whose close then fails
            self._refused = True  # no claim, no lease, no heartbeat: close touches nothing
            self.crawler.signals.connect(self._refuse, signal=signals.spider_opened)
            return
        observations = Observations.of(self.crawler)
        self._watch = watch = Watch.from_settings(
            settings,
            store=store,
            observations=observations,
            stats=self.stats,
            spider=spider.name,
            node_id=self.node_id,
        )
        membership = Membership(
            store=store,
            node_id=self.node_id,
            stats=self.stats,
            heartbeat_interval=self.heartbeat_interval,
            heartbeat_timeout=self.heartbeat_timeout,
            sites=self._sites,
            started=self._started,
            observations=observations,
            on_recovered=watch.nodes_dead,
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
        # The two per-page handlers are held strongly (the scheduler lives as long as its
        # crawler) and take any keyword: pydispatch then neither resolves a weak reference nor
        # filters the signal's arguments for them on every page.
        # response_downloaded fires for every answer, also those the retry middleware turns
        # into a retry (response_received would only see the last one)
        self.crawler.signals.connect(
            self._response_received, signal=signals.response_downloaded, weak=False
        )
        # pages per site, counted as Scrapy counts the node's pages (response_received_count)
        self.crawler.signals.connect(
            self._page_received, signal=signals.response_received, weak=False
        )
        if policy is not None:
            self._revisits = self._revisit_hooks(policy, store, keys)
            # the answer that leaves the downloader middlewares (not one turned into a retry)
            self.crawler.signals.connect(self._revisits.answered, signal=signals.response_received)
        self._origin = origin = CrawlOrigin(
            store, node_id=self.node_id, stats=self.stats, on_lost=self._state_lost
        )
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
                requeued=self._politeness.requeued,
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
            origin=origin,
            before_flush=self._politeness.before_flush,
        )
        self._wrote = loop.wrote
        loop.outage.on_start = watch.outage
        recovery = self.budget.recovery
        loop.on_site_events = lambda events: watch.site_events(events, recovery)
        self._gate = Gate(
            politeness=self._politeness,
            ready=self._ready,
            concurrency=self.concurrency,
            give_back=self._give_back,
            dead_letter=self._set_aside,
            wake_engine=self._wake_engine,
        )
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
            await start.run(watch.open)
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
            await start.run(self._open_origin)
            if self._refused:
                return
        except RedisUnreachableAtStart as exc:
            self._refused_at_start(exc)
            return
        _HOLDING[self.node_id] = self
        # a node recovers nobody before it has watched the others for a heartbeat timeout: a
        # member silent at its start may be dead, or live after an outage this node never saw
        # (it started after it ended, or waited through it), whose beats failed alike
        membership.recover_after(time.monotonic() + self.heartbeat_timeout)
        self._politeness.open(store, self.node_id, self.budget)
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

    async def _close(self, reason: str) -> None:
        if self._closing:
            return  # a graceful stop before the engine ran closed the node already
        self._closing = True
        try:
            await self._close_node(reason)
        finally:
            self._started.add_to_stats()  # before Scrapy dumps the stats
            self._closed = True
            if self._shutdown is not None:
                self._shutdown.remove()

    async def _close_node(self, reason: str) -> None:
        loop = self._loop
        if loop is not None:
            loop.closing = True
        if self._refused or loop is None or self.store is None:
            if self._client is not None:
                await self._client.aclose()
            return
        if loop.origin is not None and loop.origin.lost:
            # the crawl's state is gone: its leases with it; writing anything now would begin
            # a crawl again in silence
            await loop.stop()
            self._local.clear()
            self._unreturned = 0
            _HOLDING.pop(self.node_id, None)
            await self._client.aclose()
            return
        if self._solo is not None:
            self._solo.leave("the node closes")
        await loop.stop()
        if self._gate is not None:
            self._gate.close()
        await self._politeness.close()
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
            if self._solo is not None and self._solo.blocked and self._writes.links():
                logger.warning(
                    "Node %s closes with %d requests not written: it was waiting for the "
                    "crawl's solo node to share the crawl",
                    self.node_id,
                    len(self._writes.links()),
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
        if self._watch is not None:
            # what the last heartbeat brought back is judged and notified, with Redis still open
            Observations.of(self.crawler).drained = loop.drained
            await self._watch.close()
        await self._client.aclose()

    def leases_held(self) -> int:
        """Leases this node holds in Redis as far as it knows: leased and not acked (those
        prefetched too), and acks waiting to be written; after a close, those it could not
        return."""
        if self._unreturned is not None:
            return self._unreturned
        return len(self._leased) + len(self._writes.held_leases())
