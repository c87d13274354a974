"""The Scrapy scheduler of a node: a local window onto the shared, lossless Redis frontier.

``next_request()`` and ``enqueue_request()`` never touch the network. A background task on
the asyncio reactor does all Redis I/O in one script call per flush (``sync`` in
``frontier.lua``): it pushes the children discovered since the last flush, acknowledges the
requests Scrapy has finished with, and leases the next batch, sized to the node's free slots.

A request is acknowledged only when Scrapy is done with it for good: its response was parsed,
every item it produced went through the item pipelines (which complete only once an item is
durable), and every child request is in the same flush, ahead of the ack. Requests the node
never started are returned to the queue on a clean stop; a node that dies is recovered by any
live node once its heartbeat is older than ``DISTCRAWL_HEARTBEAT_TIMEOUT``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import os
import secrets
import socket
import time
from collections import deque
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING, Any, TypeVar

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError
from scrapy import signals
from scrapy.core.scheduler import BaseScheduler
from scrapy.exceptions import DontCloseSpider
from scrapy.utils.defer import deferred_from_coro
from scrapy.utils.httpobj import urlparse_cached

from distcrawl.base.durations import parse_duration
from distcrawl.base.processes import pid_alive
from distcrawl.base.recent import RecentKeys
from distcrawl.base.urls import mask_url, parse_allow_private, printable
from distcrawl.extract import canonicalize_url
from distcrawl.frontier import connection
from distcrawl.frontier.batch import (
    Child,
    DeadLetter,
    Lease,
    Leased,
    Revisit,
    SiteBudget,
    SiteEvent,
    new_rid_tag,
)
from distcrawl.frontier.keys import FrontierKeys
from distcrawl.frontier.store import Dupefilter, FrontierStore, is_tombstone
from distcrawl.frontier.wake import WakeListener
from distcrawl.node import compat
from distcrawl.node import signals as dc_signals
from distcrawl.node.internals import check_engine
from distcrawl.node.membership import Membership
from distcrawl.node.outage import RedisOutage
from distcrawl.node.reconcile import reconcile_leases
from distcrawl.node.requests import codec
from distcrawl.node.revisit.schedule import (
    META_KEY,
    Outcome,
    RevisitPolicy,
    conditional_headers,
    revisit_payload,
)
from distcrawl.node.revisit.unlisted import (
    LISTED_META,
    UNLISTED_META,
    UnlistedWatch,
    decode_links,
    encode_links,
)
from distcrawl.node.seeds.intake import SeedIntake, rejection_record
from distcrawl.node.seeds.sources import SeedSource
from distcrawl.node.tracking import (
    DEFAULT_KNOWN_FINGERPRINTS,
    PUBLISHED_SITES,
    InProgress,
    SiteFeedback,
)

if TYPE_CHECKING:
    from typing import Self

    from scrapy import Request, Spider
    from scrapy.crawler import Crawler
    from scrapy.statscollectors import StatsCollector
    from twisted.internet.defer import Deferred

__all__ = ["FrontierScheduler", "NodeIdInUse"]

logger = logging.getLogger(__name__)

#: seconds between heartbeats when the node is otherwise quiet
DEFAULT_HEARTBEAT_INTERVAL = 2.0
#: a node whose last heartbeat is older than this many seconds is dead; its leases return
DEFAULT_HEARTBEAT_TIMEOUT = 30.0
#: most requests leased in one round trip (the node also never holds more than its free slots)
DEFAULT_PREFETCH = 64
#: a node holds at most this many times its CONCURRENT_REQUESTS, downloads included. With the
#: default 16 that is up to 64 prefetched beside 16 downloads, and the node flushes at 8 left:
#: a round trip carries the writes of up to ~56 pages, against ~24 with three times (~33 and
#: ~22 measured: links that outrank prefetched work go at once). Redis' CPU per page falls with
#: the round trips (bench/throughput.py measures them).
LEASE_WINDOW = 5
#: seeds taken from the start list in one round trip
DEFAULT_SEED_BATCH = 64
#: seconds the whole cluster must look drained before a node with CLOSE_WHEN_DRAINED stops
DEFAULT_DRAIN_GRACE = 3.0
#: longest a node keeps finished pages' acks and found links to itself while it still has more
#: than a low-water mark of work prefetched (half its concurrency): one round trip then carries
#: the pages of that whole wait, not of one turn of its I/O loop
DEFAULT_FLUSH_DELAY = 0.2
#: an answer slower than this many seconds counts as a sign of an overloaded site
DEFAULT_SITE_LATENCY_TARGET = 5.0
#: longest idle wait between polls of an empty frontier (the wait doubles from 20 ms up to this)
DEFAULT_IDLE_MAX_WAIT = 1.0


_RETRY_META = frozenset({"retry_times", "retry_first_attempt", "distcrawl_delay"})


class NodeIdInUse(RuntimeError):
    """Another live process heart-beats under this node's id."""

    def __init__(self, node_id: str, host: Any, pid: Any, age: float) -> None:
        super().__init__(
            f"node id {node_id!r} is in use by a live process: pid {pid} on host {host} "
            f"(heart-beat {age:.1f}s ago and still beating); give every process its own "
            f"DISTCRAWL_NODE_ID, or stop that one first"
        )


_A = TypeVar("_A")


def hold_back(
    acks: list[_A], kid_shards: set[int], shard: Callable[[_A], int]
) -> tuple[list[_A], list[_A]]:
    """``acks`` split into those that may go with a flush pushing children to ``kid_shards``
    (it pushes none, or only to their own shard: one script call with them) and those held
    back until Redis said it has those children."""
    if not kid_shards:
        return acks, []
    now = [a for a in acks if kid_shards == {shard(a)}]
    return now, [a for a in acks if kid_shards != {shard(a)}]


def write_hold(
    *,
    ready: Collection[Request],
    low_water: int,
    children: list[Child],
    idle_nodes: int,
    until: float,
    now: float,
) -> float:
    """How much longer a node's buffered writes may wait (0: flush now), ``until`` being the
    last round trip's start plus ``DISTCRAWL_FLUSH_DELAY``.

    A round trip costs Redis and the node about as much for one page as for thirty, so while
    the engine has more than ``low_water`` requests prefetched (``ready``) the writes wait.
    Links go at once where they are work for a node with none (``idle_nodes`` sleep) or where
    they outrank the node's own prefetched work (a category or the next listing page found
    among products): holding them would slow the crawl's widening."""
    if len(ready) <= low_water:
        return 0.0
    if children:
        if idle_nodes > 0:
            return 0.0
        if max(c.priority for c in children) > min(r.priority for r in ready):
            return 0.0
    return until - now


class FrontierScheduler(BaseScheduler):
    """Scheduler backed by the Redis frontier.

    Settings: ``REDIS_URL``, ``DISTCRAWL_NODE_ID`` (default ``host-pid``; a node restarted
    with the same id takes its old leases back at once), ``DISTCRAWL_START_URLS_KEY``
    (default ``<spider>:start_urls``), ``DISTCRAWL_PREFETCH``, ``DISTCRAWL_SEED_BATCH``,
    ``DISTCRAWL_HEARTBEAT_INTERVAL``, ``DISTCRAWL_HEARTBEAT_TIMEOUT``,
    ``DISTCRAWL_CLOSE_WHEN_DRAINED`` (default False: wait for new seeds, as scrapy-redis
    spiders do), ``DISTCRAWL_DRAIN_GRACE``, ``DISTCRAWL_ALLOW_PRIVATE`` (hosts allowed although
    private, e.g. ``127.0.0.1``), ``CONCURRENT_REQUESTS``; the per-site budget shared by
    the cluster: ``DISTCRAWL_SITE_RATE`` (requests/s, 0 = no limit), ``DISTCRAWL_SITE_CONCURRENCY``
    (in flight on all nodes, 0 = no limit), ``DISTCRAWL_SITE_BURST``, ``DISTCRAWL_SITE_LIMITS``
    (``{host: {"rate": r, "concurrency": c}}``; site profiles' ``[politeness]`` too),
    ``DISTCRAWL_ADAPTIVE_RATE`` (rate given to an unlimited site once it pushes back),
    ``DISTCRAWL_SITE_LATENCY_TARGET``, ``DISTCRAWL_FLUSH_DELAY``, ``DISTCRAWL_RECORD_DONT_FILTER``
    (default True; False keeps Scrapy's rule that a ``dont_filter`` request does not mark
    its URL seen, as the ``distcrawl.Frontier`` add-on sets); revisit mode:
    ``DISTCRAWL_REVISIT`` and the settings of
    :class:`~distcrawl.node.revisit.schedule.RevisitPolicy`.
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
        budget: SiteBudget | None = None,
        site_limits: dict[str, dict[str, Any]] | None = None,
        latency_target: float = DEFAULT_SITE_LATENCY_TARGET,
        flush_delay: float = DEFAULT_FLUSH_DELAY,
        dupefilter: Dupefilter | None = None,
        record_dont_filter: bool = True,
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
        self.budget = budget or SiteBudget()
        self.dupefilter = dupefilter or Dupefilter()
        self.flush_delay = flush_delay
        #: below this many prefetched requests the node flushes at once (to lease more)
        self.low_water = max(1, self.concurrency // 2)
        self.record_dont_filter = record_dont_filter
        self.site_limits = dict(site_limits or {})
        self.latency_target = latency_target
        self._feedback = SiteFeedback(latency_target)
        self._known = RecentKeys(DEFAULT_KNOWN_FINGERPRINTS)

        self.spider: Spider | None = None
        self.store: FrontierStore | None = None
        self.membership: Membership | None = None
        self._client: Any = None
        self._ready: deque[Request] = deque()  # leased, not yet handed to the engine
        self._leased: dict[Request, Lease] = {}  # request object -> its lease, until acked
        self._started = 0  # leased requests the engine is working on
        self._children: list[Child] = []
        self._acks: list[Lease] = []
        # acks held back by a flush that pushed children to other shards than theirs: they go
        # with the next flush, once Redis said it has those children (see _flush)
        self._acks_after: list[Lease] = []
        self._dead: list[DeadLetter] = []
        self._rejected: list[str] = []
        self._seeds_pending = False
        self._wake = asyncio.Event()
        # the I/O loop keeps its writes while the engine has work (see _hold_writes): it then
        # needs waking only at low water or for something urgent, not at every page
        self._holding = False
        self._flushed_at = 0.0  # monotonic time the last round trip began
        self._task: asyncio.Task[None] | None = None
        self._listener: asyncio.Task[None] | None = None
        self._seed_source = SeedSource(key="")
        self._closing = False
        self._outage = RedisOutage(node_id, self.stats, heartbeat_timeout=heartbeat_timeout)
        self._refused = False  # another live process has this node id: this one never ran
        self._run_id = secrets.token_hex(4)  # this process, as the owner of its node id
        # Redis rewind detection: every sync writes a new mark in each shard it calls and
        # expects to find the last one there; the tag goes into the rids this node creates and
        # changes after a rewind
        self._tag = new_rid_tag()
        self._needs_reconcile = False  # a round trip failed: leases may be unknown to us
        self._next_due: float | None = None  # monotonic time the next retry/site falls due
        # [revisit] revisit mode (set at open, from the settings and the spider's profiles)
        self.revisit: RevisitPolicy | None = None
        self._revisits: list[Revisit] = []
        self._revisits_after: list[Revisit] = []  # held back as _acks_after
        self._payloads: dict[Request, bytes] = {}  # leased request -> the payload it came with
        self._outcomes: dict[Request, Outcome] = {}  # request -> its final answer
        self._no_revisit: set[Request] = set()  # dead-lettered: not scheduled again
        self._known_until = 0.0  # monotonic time this node's known fingerprints are wiped
        self._unlisted: UnlistedWatch | None = None  # products in no listing (unlisted.py)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        s = crawler.settings
        allow_private = parse_allow_private(s.get("DISTCRAWL_ALLOW_PRIVATE", False))
        return cls(
            crawler=crawler,
            redis_url=connection.settings_url(s),
            node_id=s.get("DISTCRAWL_NODE_ID") or f"{socket.gethostname()}-{os.getpid()}",
            prefetch=s.getint("DISTCRAWL_PREFETCH", DEFAULT_PREFETCH),
            seed_batch=s.getint("DISTCRAWL_SEED_BATCH", DEFAULT_SEED_BATCH),
            heartbeat_interval=s.getfloat(
                "DISTCRAWL_HEARTBEAT_INTERVAL", DEFAULT_HEARTBEAT_INTERVAL
            ),
            heartbeat_timeout=s.getfloat("DISTCRAWL_HEARTBEAT_TIMEOUT", DEFAULT_HEARTBEAT_TIMEOUT),
            close_when_drained=s.getbool("DISTCRAWL_CLOSE_WHEN_DRAINED", False),
            drain_grace=s.getfloat("DISTCRAWL_DRAIN_GRACE", DEFAULT_DRAIN_GRACE),
            allow_private=allow_private,
            concurrency=s.getint("CONCURRENT_REQUESTS", 16),
            budget=SiteBudget.from_settings(s),
            site_limits=s.getdict("DISTCRAWL_SITE_LIMITS"),
            flush_delay=s.getfloat("DISTCRAWL_FLUSH_DELAY", DEFAULT_FLUSH_DELAY),
            latency_target=s.getfloat("DISTCRAWL_SITE_LATENCY_TARGET", DEFAULT_SITE_LATENCY_TARGET),
            dupefilter=Dupefilter.from_settings(s),
            record_dont_filter=s.getbool("DISTCRAWL_RECORD_DONT_FILTER", True),
        )

    # -- Scrapy's scheduler interface ----------------------------------------------------------

    def open(self, spider: Spider) -> Deferred[None]:
        return deferred_from_coro(self._open(spider))

    def close(self, reason: str) -> Deferred[None]:
        return deferred_from_coro(self._close(reason))

    def has_pending_requests(self) -> bool:
        return bool(self._ready)

    def enqueue_request(self, request: Request) -> bool:
        # the delay is for this parking only: a redirect or a later retry must not inherit it
        delay = request.meta.pop("distcrawl_delay", 0)
        # recorded even for dont_filter requests (seeds, retries): the dupefilter then knows
        # the URL when a page links back to it
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
                self.stats.inc_value("frontier/filtered_locally")
                self.stats.inc_value("dupefilter/filtered")
                return False
            self._known.add(known)
        elif not self.record_dont_filter:
            fp = b""  # as Scrapy's own dupefilter: neither checked nor recorded
        try:
            # the order score carries the priority; the lease hands it back
            payload = codec.encode(request, self.spider, priority=False)
        except ValueError as exc:
            logger.error("Cannot queue %s: %s", request.url, exc)
            self.stats.inc_value("frontier/unqueueable")
            # kept where an operator looks for what the frontier refused
            self._rejected.append(self._rejection(request.url, str(exc), kind="unqueueable"))
            return False
        delay_ms = int(max(0.0, float(delay or 0)) * 1000)
        site = urlparse_cached(request).hostname or ""
        self._children.append(
            Child(fp, int(request.priority), request.dont_filter, delay_ms, site, payload)
        )
        self._wrote()
        return True

    def next_request(self) -> Request | None:
        if not self._ready:
            if self._started < self.concurrency:
                # the engine had a free slot and nothing was leased for it
                self.stats.inc_value("frontier/starved")
            self._wake.set()
            return None
        request = self._ready.popleft()
        self._started += 1
        self.stats.inc_value("frontier/started")
        self.stats.inc_value("scheduler/dequeued")
        self.stats.inc_value("scheduler/dequeued/redis")
        if len(self._ready) <= self.low_water:
            self._wake.set()
        return request

    # -- lifecycle -------------------------------------------------------------------------------

    async def _open(self, spider: Spider) -> None:
        self.spider = spider
        keys = FrontierKeys.for_spider(spider.name, self.crawler.settings)
        # a scrapy-redis spider's own redis_key; a set or zset is staged into a list
        self._seed_source = SeedSource.for_spider(spider, self.crawler.settings, keys.start_urls)
        keys = dataclasses.replace(keys, start_urls=self._seed_source.list_key)
        compat.adopt_spider(self.crawler, spider)
        self._client = connection.async_client(
            self.redis_url, socket_timeout=30, socket_connect_timeout=10, health_check_interval=30
        )
        self.revisit = RevisitPolicy.from_settings(
            self.crawler.settings, getattr(spider, "profiles", ())
        )
        self.store = FrontierStore(
            self._client,
            keys,
            dupefilter=self.dupefilter,
            forget_ms=self.revisit.forget_ms if self.revisit else None,
        )
        self.membership = Membership(
            self.store,
            self.node_id,
            self.stats,
            heartbeat_interval=self.heartbeat_interval,
            heartbeat_timeout=self.heartbeat_timeout,
            drain_grace=self.drain_grace,
        )
        engine = self.crawler.engine
        check_engine(engine)  # the private hooks below, or a clear error instead of silence
        slot = engine._slot
        assert slot is not None
        slot.inprogress = InProgress(slot.inprogress, self._request_done)
        self.crawler.signals.connect(self._spider_idle, signal=signals.spider_idle)
        self.crawler.signals.connect(self._dead_letter, signal=dc_signals.request_dead_lettered)
        # response_downloaded fires for every answer, also those the retry middleware turns
        # into a retry (response_received would only see the last one)
        self.crawler.signals.connect(self._response_received, signal=signals.response_downloaded)
        if self.revisit is not None:
            # the answer that leaves the downloader middlewares (not one turned into a retry)
            self.crawler.signals.connect(self._revisit_answer, signal=signals.response_received)
            self.membership.revisit_grace = self.revisit.grace
            self._unlisted = self._unlisted_watch(keys)
            policy = self.revisit
            logger.info(
                "Revisit mode: %s (fixed rate, %.0f%% early; %s; URLs forgotten %.0f-%.0fs "
                "after their last visit)",
                ", ".join(f"{k} every {v:.0f}s" for k, v in policy.intervals.items())
                or "site profiles only",
                100 * policy.early,
                f"backoff x{policy.backoff:.2f} up to x{policy.max_backoff:.1f}"
                if policy.max_backoff > 1
                else "no backoff",
                policy.forget_ms / 1000,
                2 * policy.forget_ms / 1000,
            )
        logger.info(
            "Frontier node %s on %s (%d shards of crawl %s, seeds from %s)",
            self.node_id,
            mask_url(self.redis_url),
            keys.shards,
            keys.prefix,
            self._seed_source.key,
        )
        await self._with_retry(self._claim_node_id)
        await self._with_retry(self._reclaim_own_leases)
        await self._with_retry(self._publish_site_limits)
        self._task = asyncio.ensure_future(self._run())
        listener = WakeListener(
            self._client,
            keys.wake,
            on_wake=self._work_arrived,
            stopped=lambda: self._closing,
        )
        self._listener = asyncio.ensure_future(listener.run())

    async def _claim_node_id(self) -> None:
        """Refuse to start while another live process heart-beats under this node id.

        Two processes with one id would take each other's leases at open and hand them back
        and forth. The claim is atomic (``claim`` in the script), so of two processes started
        at once with one id, one wins. A process that died is no obstacle: on this host its
        pid is gone; on another host its heartbeat stops advancing (watched for a few beats).
        """
        assert self.store is not None
        owner = json.dumps({"host": socket.gethostname(), "pid": os.getpid(), "run": self._run_id})
        timeout_ms = int(self.heartbeat_timeout * 1000)
        claimed, other, age_ms = await self.store.claim(self.node_id, owner, timeout_ms)
        if int(claimed):
            return
        try:
            info = json.loads(other)
        except ValueError:
            info = {}
        host, pid = info.get("host"), info.get("pid")
        here = host == socket.gethostname() and isinstance(pid, int) and pid != os.getpid()
        if not (here and not pid_alive(int(pid or 0))):
            # alive here, or on another host: does it still beat?
            keys = self.store.keys
            beat = await self._client.zscore(keys.nodes, self.node_id)
            watch = max(2.0 * self.heartbeat_interval, 2.0 * DEFAULT_IDLE_MAX_WAIT) + 0.5
            deadline = time.monotonic() + watch
            while time.monotonic() < deadline:
                await asyncio.sleep(0.2)
                now_beat = await self._client.zscore(keys.nodes, self.node_id)
                if now_beat is not None and (beat is None or now_beat > beat):
                    self._refused = True  # the leases are the other one's: close touches none
                    error = NodeIdInUse(self.node_id, host, pid, int(age_ms) / 1000)
                    logger.error("Node refuses to start: %s", error)
                    raise error
        logger.info(
            "Node id %s was last used by pid %s on %s, which is gone", self.node_id, pid, host
        )
        await self.store.claim(self.node_id, owner, timeout_ms, force=True)

    async def _reclaim_own_leases(self) -> None:
        assert self.store is not None
        # the node stays a member: from its first lease on, a death is seen by recovery
        moved = await self.store.rejoin(self.node_id)
        if moved:
            logger.info(
                "Returned %d requests leased by an earlier run of node %s", moved, self.node_id
            )
            self.stats.inc_value("frontier/reclaimed", int(moved))

    async def _publish_site_limits(self) -> None:
        """Per-site limits from settings and site profiles, shared with every node."""
        assert self.store is not None
        limits: dict[str, dict[str, Any]] = {}
        for profile in getattr(self.spider, "profiles", ()):
            if profile.politeness:
                for domain in profile.domains:
                    limits[domain] = dict(profile.politeness)
        for site, limit in self.site_limits.items():
            limits[site] = dict(limit)
        for site, limit in limits.items():
            rate, conc = limit.get("rate"), limit.get("concurrency")
            await self.store.set_site_limits(
                site,
                rate=float(rate) if rate is not None else None,
                concurrency=int(conc) if conc is not None else None,
            )
            logger.info("Site budget for %s: rate %s/s, concurrency %s", site, rate, conc)

    async def _close(self, reason: str) -> None:
        self._closing = True
        if self._refused:
            await self._client.aclose()
            return
        self._wake.set()
        if self._listener is not None:
            self._listener.cancel()
            await asyncio.wait([self._listener], timeout=5)
        if self._task is not None:
            await asyncio.wait([self._task], timeout=60)
        assert self.store is not None
        unstarted = len(self._ready)
        self._ready.clear()
        try:
            # what the engine finished is acked here (a second and a third flush: acks held
            # back behind their children, what a rewound shard did not take); the rest (never
            # started, or cut short by an unclean stop) goes back to the queue at once
            for _ in range(3):
                await self._flush(lease=0)
                if not self._pending_writes():
                    break
            # the last stats (the pipeline's close, e.g. products left in its journal) stay
            # readable in `status` once the node is gone
            assert self.membership is not None
            await self.membership.heartbeat(
                {"started": self._started, "prefetched": len(self._ready)}
            )
            moved = await self.store.release(self.node_id)
            logger.info(
                "Node %s closing (%s): returned %d requests to the frontier (%d prefetched, "
                "never started)",
                self.node_id,
                reason,
                moved,
                unstarted,
            )
            self.stats.inc_value("frontier/returned", int(moved))
        except RedisError as exc:
            logger.error(
                "Node %s could not return its leases (%s); they return when its heartbeat "
                "times out after %.0fs",
                self.node_id,
                exc,
                self.heartbeat_timeout,
            )
        await self._client.aclose()

    # -- completion ------------------------------------------------------------------------------

    def _request_done(self, request: Request) -> None:
        rid = self._leased.pop(request, None)
        if rid is None:
            return
        self._started -= 1
        if self.revisit is None or not self._schedule_revisit(request, rid):
            self._acks.append(rid)
        self._wrote()

    # -- [revisit] ---------------------------------------------------------------------------

    def _unlisted_watch(self, keys: FrontierKeys) -> UnlistedWatch | None:
        assert self.revisit is not None
        settings = self.crawler.settings
        listing = self.revisit.longest("listing")
        if listing is None or not settings.getbool("DISTCRAWL_UNLISTED", True):
            return None
        grace = settings.get("DISTCRAWL_UNLISTED_GRACE")
        if grace:
            grace_s = parse_duration(grace, "DISTCRAWL_UNLISTED_GRACE")
        else:
            grace_s = 2 * listing * max(1.0, self.revisit.max_backoff)
        logger.info("Products in no listing for %.0fs are marked gone", grace_s)
        return UnlistedWatch(keys.unlisted, grace_s)

    def _revisit_answer(self, response: Any, request: Request, spider: Spider) -> None:
        if request in self._leased:
            self._outcomes[request] = Outcome.of(response)
            if response.status == 304:
                self.stats.inc_value("revisit/not_modified")
            unlisted = self._unlisted
            if (
                unlisted is not None
                and unlisted.gone
                and request.meta.get("page_kind") == "product"
                and canonicalize_url(response.url) in unlisted.gone
            ):
                # the product is in no listing: this visit marks it gone (freshness.py)
                request.meta[UNLISTED_META] = True

    def _schedule_revisit(self, request: Request, lease: Lease) -> bool:
        """Ack ``request`` as a page to fetch again, if its kind is revisited and it got a
        final answer (not a retry, a redirect, a dead letter or a download error)."""
        assert self.revisit is not None
        payload = self._payloads.pop(request, None)
        outcome = self._outcomes.pop(request, None)
        if request in self._no_revisit:
            self._no_revisit.discard(request)
            return False
        if payload is None or outcome is None:
            return False
        kind = str(request.meta.get("page_kind") or "")
        old = request.meta.get(META_KEY)
        assert self.store is not None
        plan = self.revisit.next_visit(
            request.url,
            kind,
            old,
            outcome,
            # due times travel between nodes: on Redis' clock, as every other frontier time
            self.store.server_time(),
            gone=bool(request.meta.get(UNLISTED_META)),
        )
        if plan is None:
            return False
        seconds, state, verdict = plan
        if self._unlisted is not None:
            self._listing_visited(request, old, outcome, state)
        try:
            new_payload = revisit_payload(payload, state)
        except (ValueError, UnicodeDecodeError) as exc:
            logger.warning(
                "Not revisiting %s: its payload cannot be rebuilt (%s)", request.url, exc
            )
            self.stats.inc_value("revisit/unschedulable")
            return False
        fp = self.crawler.request_fingerprinter.fingerprint(request)[:16]
        self._revisits.append(Revisit(lease, int(seconds * 1000), new_payload, fp))
        self.stats.inc_value(f"revisit/{verdict}")
        self.stats.inc_value("revisit/scheduled")
        return True

    def _listing_visited(
        self, request: Request, old: Any, outcome: Outcome, state: dict[str, Any]
    ) -> None:
        """A listing page's product links go into its next state (``k``); the products it
        dropped since its last visit are unlisted, the ones it links listed again."""
        assert self._unlisted is not None
        before = decode_links(old.get("k")) if isinstance(old, dict) else None
        listed = request.meta.get(LISTED_META)
        if outcome.status == 304:
            links = before
        elif isinstance(listed, (list, tuple, set, frozenset)):
            links = {str(u) for u in listed}
        else:
            links = None
        if links is None:
            return
        if links:
            state["k"] = encode_links(links)
        dropped = self._unlisted.visited(links, before)
        if dropped:
            self.stats.inc_value("revisit/unlisted", dropped)

    def _send_conditional(self, request: Request, payload: bytes) -> None:
        assert self.revisit is not None
        self._payloads[request] = payload
        headers = conditional_headers(request.meta.get(META_KEY))
        if headers:
            for name, value in headers.items():
                request.headers[name] = value
            self.stats.inc_value("revisit/conditional")

    # -- [/revisit] --------------------------------------------------------------------------

    def _dead_letter(self, request: Request, reason: str, **details: Any) -> None:
        # re-queued later as a fresh request: its retry count starts again
        meta = {k: v for k, v in request.meta.items() if k not in _RETRY_META}
        meta["distcrawl_dead_letter"] = reason  # counted as re-queued if an operator does so
        fresh = request.replace(meta=meta, dont_filter=True)
        if self.revisit is not None and request in self._leased:
            self._no_revisit.add(request)  # [revisit] a dead letter is not scheduled again
        record = {
            "request": codec.encode(fresh, self.spider, strict=False),
            "url": request.url,
            "priority": request.priority,
            "site": urlparse_cached(request).hostname or "",
            "reason": reason,
            "node": self.node_id,
            "at": time.time(),
            **{k: v for k, v in details.items() if codec.json_safe(v)},
        }
        fp = self.crawler.request_fingerprinter.fingerprint(request).hex()
        lease = self._leased.get(request)
        # ends that lease (fenced: written only while this node holds it); else written as is
        self._dead.append(
            DeadLetter(fp, json.dumps(record, separators=(",", ":")), record["site"], lease)
        )
        self.stats.inc_value("frontier/dead_lettered")
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

    def _spider_idle(self, spider: Spider) -> None:
        if not self._closing:
            raise DontCloseSpider("waiting for the frontier")

    # -- the I/O loop ----------------------------------------------------------------------------

    def _free_slots(self) -> int:
        """How many more leases keep every download slot busy with refills in hand: up to
        ``LEASE_WINDOW`` times the concurrency, downloads included. The node flushes its writes
        at low water (or after ``DISTCRAWL_FLUSH_DELAY``), and what it holds must keep the
        slots busy while that round trip is on its way.

        Counted against the downloader's requests, not every started one: a response that
        waits for the spider (Scrapy's scraper queue, long on a CPU-bound node) frees its
        download slot, and Scrapy's own scheduler would hand that slot a request at once.
        """
        engine = self.crawler.engine
        downloading = len(engine.downloader.active) if engine is not None else self._started
        return self.concurrency * LEASE_WINDOW - downloading - len(self._ready)

    async def _run(self) -> None:
        wait = 0.02
        while not self._closing:
            try:
                if self._needs_reconcile:
                    # a member again before the next lease (the node may have been presumed
                    # dead, or Redis may have lost C:nodes): leases of a node outside C:nodes
                    # are seen neither by recovery nor by drain detection
                    assert self.membership is not None
                    await self.membership.heartbeat(self._heartbeat_info())
                    await self._reconcile_leases()
                    self._needs_reconcile = False
                got = await self._cycle()
                if self._outage.answered() and self.membership is not None:
                    # every heartbeat went stale while Redis was away, ours as well as the
                    # live nodes': silence counts again only from now
                    self.membership.recover_after(time.monotonic() + self.heartbeat_timeout)
                wait = 0.02 if got else min(wait * 2, DEFAULT_IDLE_MAX_WAIT)
            except (RedisConnectionError, RedisTimeoutError, OSError) as exc:
                self._needs_reconcile = True
                self._outage.failed(exc)
                wait = min(max(wait * 2, 0.25), 5.0)
            except Exception:
                self._needs_reconcile = True
                logger.exception("Frontier loop error on node %s; retrying", self.node_id)
                wait = 1.0
            if self._closing:
                break
            if self._pending_writes() and not self._outage.down:
                hold = self._hold_writes()
                if hold > 0:
                    # the engine still has work: the acks and links of more pages join this
                    # round trip, until the work runs low or the writes have waited enough
                    self._wake.clear()
                    self._holding = True
                    try:
                        await asyncio.wait_for(self._wake.wait(), timeout=hold)
                    except TimeoutError:
                        pass
                    finally:
                        self._holding = False
                continue
            self._wake.clear()
            if self._next_due is not None and self._free_slots() > 0:
                # wake up when a parked retry or a waiting site falls due, not a poll later
                wait = min(wait, max(0.002, self._next_due - time.monotonic()))
            try:
                await asyncio.wait_for(self._wake.wait(), timeout=wait)
                wait = 0.02 if not self._outage.down else wait
            except TimeoutError:
                pass

    def _hold_writes(self) -> float:
        """How much longer the buffered writes may wait (0: flush now).

        A dead letter, a refused seed and a closing node flush at once; else see
        :func:`write_hold`."""
        if self._closing or self._dead or self._rejected or self._seeds_pending:
            return 0.0
        assert self.store is not None
        return write_hold(
            ready=self._ready,
            low_water=self.low_water,
            children=self._children,
            idle_nodes=self.store.idle_nodes,
            until=self._flushed_at + self.flush_delay,
            now=time.monotonic(),
        )

    def _wrote(self) -> None:
        """A page's ack or a link joined the buffers: wake the I/O loop unless it is holding
        its writes and the engine still has work (it wakes at low water or its deadline)."""
        if not self._holding or len(self._ready) <= self.low_water:
            self._wake.set()

    def _work_arrived(self, shard: int | None) -> None:
        """The wake channel said work arrived in ``shard``: read it at the next lease, and
        wake the I/O loop if the engine has nothing prefetched."""
        if self.store is None:
            return
        self.store.views.poke(shard)
        if not self._ready:
            self.stats.inc_value("frontier/woken")
            self._wake.set()

    async def _reconcile_leases(self) -> None:
        """Leases Redis holds for this node and it does not know go back; prefetched requests
        whose lease it lost are dropped (see :func:`reconcile_leases`)."""
        assert self.store is not None
        self._ready = await reconcile_leases(
            self.store,
            self.node_id,
            leased=self._leased,
            acks=[
                *self._acks,
                *self._acks_after,
                *(rv.lease for rv in (*self._revisits, *self._revisits_after)),
            ],
            ready=self._ready,
            stats=self.stats,
        )
        if self._payloads:  # [revisit] dropped requests forget their payload
            for request in [r for r in self._payloads if r not in self._leased]:
                del self._payloads[request]

    def _pending_writes(self) -> bool:
        return bool(
            self._children
            or self._acks
            or self._acks_after
            or self._dead
            or self._rejected
            or self._revisits
            or self._revisits_after
        )

    async def _cycle(self) -> bool:
        """One round of I/O; returns whether anything happened (to pace the idle wait)."""
        assert self.store is not None
        now = time.monotonic()
        free = self._free_slots()
        lease = min(self.prefetch, free) if free > 0 and not self._closing else 0
        if self._unlisted is not None:
            # [revisit] what listing visits found, before their acks (which write the listings'
            # new link sets): a crash in between repeats a visit, whose writes are idempotent,
            # and never loses a product a listing dropped
            await self._unlisted.tick(self._client, self.store.server_time())
        leased = await self._flush(lease=lease)
        progressed = leased > 0
        if leased == 0 and lease > 0:
            progressed |= await self._take_seeds()
        assert self.membership is not None
        if await self.membership.tick(self._heartbeat_info()):
            self._wake.set()
        if self.close_when_drained and not progressed:
            await self._check_drained()
        del now
        return progressed

    def _heartbeat_info(self) -> dict[str, Any]:
        return {
            "started": self._started,
            "prefetched": len(self._ready),
            "sites": self._feedback.activity.top(PUBLISHED_SITES),
        }

    async def _flush(self, *, lease: int) -> int:
        """Push, ack and lease in one round trip. Buffers are cleared only once Redis said OK.

        A page's ack and its children are one script call where they share a shard (its
        site's). Children bound for other shards are separate calls, which a node killed mid
        round trip (or a cluster's masters, each on its own) may run without the ack's, or the
        ack's without them: so an ack goes only in a flush that pushes children to its own
        shard or none, else in the next one, once Redis said it has them."""
        assert self.store is not None
        self._flushed_at = time.monotonic()
        children, dead, rejected = self._children, self._dead, self._rejected
        seeds_done = self._seeds_pending
        kid_shards = {self.store.keys.shard_of(c.site) for c in children}
        acks_now, acks_later = hold_back(self._acks, kid_shards, lambda a: a.shard)
        acks = self._acks_after + acks_now
        revisits_now, revisits_later = hold_back(
            self._revisits, kid_shards, lambda r: r.lease.shard
        )
        revisits = self._revisits_after + revisits_now
        if not (children or acks or dead or rejected or seeds_done or lease or revisits):
            return 0  # (acks are held back only by a flush with children)
        self._children, self._acks, self._dead, self._rejected = [], [], [], []
        self._acks_after, self._revisits, self._revisits_after = [], [], []
        self._seeds_pending = False
        feedback = self._feedback.take()
        try:
            result = await self.store.sync(
                self.node_id,
                children=children,
                acks=acks,
                dead=dead,
                rejected=rejected,
                seeds_done=seeds_done,
                lease=lease,
                budget=self.budget,
                feedback=feedback,
                tag=self._tag,
                revisits=revisits,
            )
        except BaseException:
            # nothing was written (a script is all or nothing): keep it all for the next try
            self._children[:0] = children
            self._acks[:0] = acks + acks_later
            self._revisits[:0] = revisits + revisits_later
            self._dead[:0] = dead
            self._rejected[:0] = rejected
            self._seeds_pending = self._seeds_pending or seeds_done
            self._feedback.restore(feedback)
            raise
        if result.rewound is not None:
            # the shards that lacked this node's last mark wrote nothing: their part goes
            # again with the next flush, after the node forgot what it pushed
            for batch in result.unsent:
                self._children[:0] = batch.children
                self._acks[:0] = batch.acks
                self._revisits[:0] = batch.revisits
                self._dead[:0] = batch.dead
                self._feedback.restore(batch.feedback)
            self._after_rewind(result.rewound)
            # their children may be among what a rewound shard did not take
            self._acks[:0] = acks_later
            self._revisits[:0] = revisits_later
        else:
            self._acks_after, self._revisits_after = acks_later, revisits_later
        if result.seeds_pending:
            self._seeds_pending = True
        if result.site_events:
            self._log_site_events(result.site_events)
        due = result.next_due_ms
        self._next_due = time.monotonic() + due / 1000 if due >= 0 else None
        stats = self.stats
        stats.inc_value("frontier/roundtrips")
        for key, value in (
            ("enqueued", result.added),
            ("filtered", result.filtered),
            ("parked", result.parked),
            ("acked", result.acked),
            ("acks/stale", result.stale_acks),
            ("priority_inversions", result.priority_inversions),
        ):
            if value:
                stats.inc_value(f"frontier/{key}", value)
        if result.added:
            stats.inc_value("scheduler/enqueued", result.added)
            stats.inc_value("scheduler/enqueued/redis", result.added)
        if result.filtered:
            stats.inc_value("dupefilter/filtered", result.filtered)
        if result.stale_acks:
            # reports for leases this node no longer holds (it was presumed dead): fenced off
            logger.warning(
                "Node %s: %d acks or dead letters for leases it no longer holds were ignored",
                self.node_id,
                result.stale_acks,
            )
        return self._accept_leases(result.leased)

    def _after_rewind(self, found: bytes) -> None:
        """A shard lacked this node's last mark: Redis came back without the node's last writes
        (restarted from older data, a failover to a lagging replica, a reset), or another node
        presumed this one dead and recovered its leases (the shard holds the recovery's
        tombstone). What the node remembers having pushed may be gone (a tombstone, too, may
        be what an older state of Redis holds), so it forgets it, takes a new rid tag, and
        reconciles its leases, a member again (a heartbeat) before it leases."""
        if is_tombstone(found):
            self.stats.inc_value("frontier/presumed_dead")
            logger.warning(
                "Node %s was presumed dead and its leases were recovered by another node (its "
                "heartbeat was older than %.0fs: a long pause, or Redis out of its reach): it "
                "joins the cluster again, forgets %d pushed fingerprints and the spider's "
                "known links, and drops prefetched requests it no longer holds",
                self.node_id,
                self.heartbeat_timeout,
                len(self._known),
            )
        else:
            self.stats.inc_value("frontier/redis_rewinds")
            logger.warning(
                "Redis lost this node's last writes (its last mark is gone, found %r): node %s "
                "forgets %d pushed fingerprints and the spider's known links, and reconciles "
                "its leases",
                found.decode("utf-8", "backslashreplace") or "none",
                self.node_id,
                len(self._known),
            )
        self._known.clear()
        self.crawler.signals.send_catch_log(dc_signals.frontier_rewound)
        self._tag = new_rid_tag()
        self._needs_reconcile = True

    def _log_site_events(self, events: list[SiteEvent]) -> None:
        """One line per adaptive cut of a site's shared rate, and per cut worn off."""
        for site, kind, before, after, detail in events:
            if kind == "cut":
                why = "answered 429/503" if detail == "throttled" else "answered slowly"
                logger.warning(
                    "Site %s %s: its shared rate is cut for every node, factor %.3f -> %.3f "
                    "(wears off within %.0fs)",
                    site,
                    why,
                    before,
                    after,
                    (1 - after) * self.budget.recovery,
                )
                self.stats.inc_value(f"frontier/site_cuts/{detail}")
            else:
                logger.info(
                    "Site %s is back at its full shared rate (factor was %.3f, cut %.0fs ago)",
                    site,
                    before,
                    float(detail) / 1000,
                )
                self.stats.inc_value("frontier/site_recoveries")

    def _accept_leases(self, leased: list[Leased]) -> int:
        n = 0
        bad: list[Lease] = []
        for lease, payload, priority, paced in leased:
            rid = lease.rid
            try:
                request = codec.decode(payload, self.spider, allow_private=True, priority=priority)
            except codec.BadEntry as exc:
                shown = rid if isinstance(rid, str) else rid.decode("utf-8", "backslashreplace")
                logger.warning("Refused queue entry %s: %s", printable(shown), printable(str(exc)))
                self.stats.inc_value(f"frontier/refused/{exc.reason}")
                self._rejected.append(self._rejection(payload, exc.reason, kind="queue"))
                bad.append(lease)
                continue
            if request.meta.pop("distcrawl_dead_letter", None) is not None:
                self.stats.inc_value("frontier/requeued_dead_letters")
            self._leased[request] = lease
            if self.revisit is not None:
                self._send_conditional(request, payload)
            if paced:
                # its site's token was spent for now: it goes before what is already waiting
                self._ready.appendleft(request)
            else:
                self._ready.append(request)
            n += 1
        if bad:
            self._acks.extend(bad)  # moved aside into the rejected list, in the next flush
        if n:
            self.stats.inc_value("frontier/leased", n)
            self._wake_engine()
        return n + len(bad)

    def _rejection(self, raw: bytes | str, reason: str, *, kind: str) -> str:
        return rejection_record(raw, reason, kind=kind, node=self.node_id)

    def _wake_engine(self) -> None:
        # The engine polls next_request() only when it is told to (or on a 5 s heartbeat);
        # without this nudge a prefetched batch would wait for that heartbeat.
        slot = getattr(self.crawler.engine, "_slot", None)
        if slot is not None:
            slot.nextcall.schedule()

    async def _take_seeds(self) -> bool:
        assert self.store is not None and self.spider is not None
        if self._seed_source.kind != "list":
            await self._seed_source.stage(self._client, self.seed_batch)
        raws = await self.store.take_seeds(self.node_id, self.seed_batch)
        if not raws:
            return False
        assert self.membership is not None
        self.membership.crawl_begun()
        intake = SeedIntake(
            self.spider, node_id=self.node_id, allow_private=self.allow_private, stats=self.stats
        )
        requests, rejected = intake.read(raws)
        self._rejected += rejected
        for request in requests:
            self._seed_accepted(request)
        # the seeds leave this node's seeding list in the same flush that queues them
        self._seeds_pending = True
        await self._flush(lease=0)
        return True

    def _seed_accepted(self, request: Request) -> None:
        self.stats.inc_value("frontier/seeds/accepted")
        logger.info("Seed accepted: %s (priority %d)", mask_url(request.url), request.priority)
        self.enqueue_request(request)

    async def _check_drained(self) -> None:
        assert self.membership is not None
        if self._ready or self._started or self._pending_writes():
            self.membership.not_drained()
            return
        if await self.membership.drained():
            logger.info(
                "Frontier drained on every node for %.1fs: node %s closes",
                self.drain_grace,
                self.node_id,
            )
            self._closing = True
            engine = self.crawler.engine
            assert engine is not None
            deferred_from_coro(engine.close_spider_async(reason="frontier_drained"))

    async def _with_retry(self, func: Any) -> None:
        delay = 0.5
        while True:
            try:
                await func()
                return
            except (RedisConnectionError, RedisTimeoutError, OSError) as exc:
                logger.error("Redis unavailable at start (%s); retrying in %.1fs", exc, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 10.0)
