"""The I/O loop of a node: the background task that does all its Redis I/O, one ``sync`` per
round trip, held while the engine has work and backing off while Redis is away."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import TYPE_CHECKING, Any

from distcrawl.base.config.entries import PREFETCH_PER_SLOT
from distcrawl.base.names import stats as stat_keys
from distcrawl.base.rates import SITE_DEFAULTS
from distcrawl.frontier.batch import new_rid_tag
from distcrawl.frontier.outages import classify
from distcrawl.frontier.wake import WakeListener
from distcrawl.node.scheduler.outage import RedisOutage
from distcrawl.node.scheduler.reconcile import reconcile_leases
from distcrawl.node.scheduler.sites import log_site_events

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Collection

    from scrapy import Request
    from scrapy.statscollectors import StatsCollector

    from distcrawl.frontier.batch import Child, Lease, SiteBudget, SiteEvent
    from distcrawl.frontier.store import FrontierStore, SyncResult
    from distcrawl.node.scheduler.buffers import WriteBuffers
    from distcrawl.node.scheduler.drain import DrainWatch
    from distcrawl.node.scheduler.leases import LeaseIntake
    from distcrawl.node.scheduler.membership import Membership
    from distcrawl.node.scheduler.memory import MemoryWatch
    from distcrawl.node.scheduler.ready import ReadyQueue
    from distcrawl.node.scheduler.revisits import RevisitHooks
    from distcrawl.node.scheduler.seeds import SeedFeed
    from distcrawl.node.scheduler.solo import SoloMode
    from distcrawl.node.scheduler.vanished import CrawlOrigin

__all__ = [
    "DEFAULT_IDLE_MAX_WAIT",
    "LEASE_WINDOW",
    "FrontierLoop",
    "write_hold",
]

logger = logging.getLogger(__name__)

#: a node holds at most this many times its CONCURRENT_REQUESTS, downloads included: its
#: prefetch (DISTCRAWL_PREFETCH, derived: PREFETCH_PER_SLOT times the concurrency) beside its
#: downloads. With 16 that is up to 64 prefetched beside 16 downloads, and the node flushes at
#: 8 left: a round trip carries the writes of up to ~56 pages, against ~24 with three times
#: (~33 and ~22 measured: links that outrank prefetched work go at once). Redis' CPU per page
#: falls with the round trips (bench/throughput.py measures them).
LEASE_WINDOW = PREFETCH_PER_SLOT + 1
#: longest idle wait between polls of an empty frontier (the wait doubles from 20 ms up to this)
DEFAULT_IDLE_MAX_WAIT = 1.0

#: the first idle wait, and the wait after a round trip that did something
_BUSY_WAIT = 0.02
#: the waits after failed round trips: from the first up to the longest, doubling
_RETRY_WAIT = 0.25
_RETRY_WAIT_MAX = 5.0


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


class FrontierLoop:
    """Round trips while the node runs: each pushes the buffered writes, acknowledges what the
    engine finished and leases up to ``prefetch`` requests for the free slots; seeds are taken
    when nothing was leased, heartbeats and recovery ride along, and a failed round trip is
    followed by a reconcile of the node's leases.

    ``ready`` and ``leased`` are the scheduler's own (prefetched requests; request -> lease,
    until acked): the requests started are those leased and no longer ready. ``wake`` is set
    by the scheduler when the engine wants work or a write should not wait.
    """

    def __init__(
        self,
        *,
        store: FrontierStore,
        client: Any,
        node_id: str,
        membership: Membership,
        writes: WriteBuffers,
        ready: ReadyQueue,
        leased: dict[Request, Lease],
        intake: LeaseIntake,
        seeds: SeedFeed,
        drain: DrainWatch,
        close_when_drained: bool,
        revisits: RevisitHooks | None,
        wake: asyncio.Event,
        stats: StatsCollector,
        budget: SiteBudget,
        prefetch: int,
        concurrency: int,
        low_water: int,
        flush_delay: float,
        heartbeat_timeout: float,
        downloading: Callable[[], int],
        on_rewind: Callable[[bytes], None],
        holds_work: Callable[[], bool],
        on_drained: Callable[[], None],
        memory: MemoryWatch | None = None,
        on_own: Callable[[list[tuple[Child, Lease | None]]], None] | None = None,
        solo: SoloMode | None = None,
        origin: CrawlOrigin | None = None,
        before_flush: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self.store = store
        self.client = client
        self.node_id = node_id
        self.membership = membership
        self.writes = writes
        self.ready = ready
        self.leased = leased
        self.intake = intake
        self.seeds = seeds
        self.drain = drain
        self.close_when_drained = close_when_drained
        self.revisits = revisits
        self.wake = wake
        self.stats = stats
        self.budget = budget
        self.prefetch = max(1, prefetch)
        self.concurrency = concurrency
        self.low_water = low_water
        self.flush_delay = flush_delay
        self.heartbeat_timeout = heartbeat_timeout
        self.downloading = downloading
        self.on_rewind = on_rewind
        self.on_own = on_own
        #: solo mode (None: the node always shares the crawl, as the benches' loops do)
        self.solo = solo
        #: the crawl's start marker (None: not watched, as the benches' loops do): a crawl
        #: whose state vanished ends the loop
        self.origin = origin
        #: writes that go before each round trip (leases given back unstarted)
        self.before_flush = before_flush
        #: sites an adaptive cut holds (their requests are never the node's own)
        self.cut_sites: set[str] = set()
        self.holds_work = holds_work
        self.on_drained = on_drained
        self.memory = memory
        #: the node stops: no more leases, and the task ends after its current round trip
        self.closing = False
        #: [CLOSE_WHEN_DRAINED] the loop saw the whole crawl drained for the drain grace, and
        #: the node has had no work since: the scheduler tells Scrapy it has nothing pending
        self.drained = False
        self.outage = RedisOutage(node_id, stats, heartbeat_timeout=heartbeat_timeout)
        #: hears of the adaptive cuts and recoveries each round trip reports (the watch)
        self.on_site_events: Callable[[list[SiteEvent]], None] | None = None
        # Redis rewind detection: every sync writes a new mark in each shard it calls and
        # expects to find the last one there; the tag goes into the rids this node creates and
        # changes after a rewind
        self.tag = new_rid_tag()
        self._needs_reconcile = False  # a round trip failed: leases may be unknown to us
        # the loop keeps its writes while the engine has work (see _hold_writes): it then needs
        # waking only at low water or for something urgent, not at every page
        self._holding = False
        self._flushed_at = 0.0  # monotonic time the last round trip began
        self._next_due: float | None = None  # monotonic time the next retry/site falls due
        self._task: asyncio.Task[None] | None = None
        self._listener: asyncio.Task[None] | None = None
        self._stopping = asyncio.Event()

    # -- what the scheduler calls ----------------------------------------------------------------

    def start(self, *, wake_channel: str) -> None:
        """Start the task, and the listener of ``wake_channel`` (work arrived elsewhere)."""
        self._task = asyncio.ensure_future(self._run())
        listener = WakeListener(
            self.client, wake_channel, on_wake=self.work_arrived, stopped=lambda: self.closing
        )
        self._listener = asyncio.ensure_future(listener.run())

    async def stop(self) -> None:
        """End the listener, and the task after its current round trip (waiting up to 60 s)."""
        self.closing = True
        self.wake.set()
        self._stopping.set()
        if self._listener is not None:
            self._listener.cancel()
            await asyncio.wait([self._listener], timeout=5)
        if self._task is not None:
            await asyncio.wait([self._task], timeout=60)

    def wrote(self) -> None:
        """A page's ack or a link joined the buffers: wake the loop unless it is holding its
        writes and the engine still has work (it wakes at low water or its deadline)."""
        if not self._holding or len(self.ready.startable) <= self.low_water:
            self.wake.set()

    def work_arrived(self, shard: int | None) -> None:
        """The wake channel said work arrived in ``shard``: read it at the next lease, and
        wake the loop if the engine has nothing prefetched."""
        self.store.views.poke(shard)
        if not self.ready.startable:
            self.stats.inc_value(stat_keys.WOKEN)
            self.wake.set()

    def work_again(self) -> None:
        """The node has work again after the crawl looked drained (a spider_idle handler or a
        seed queued a request): drain detection starts over."""
        self.drained = False
        self.drain.reset()

    def started(self) -> int:
        """Leased requests the engine is working on."""
        return len(self.leased) - len(self.ready)

    async def write_out(self) -> None:
        """Flush what is buffered, leasing nothing: up to four round trips, for links probed
        before they are pushed, acks held back behind their children and what a rewound shard
        did not take."""
        for _ in range(4):
            await self.flush(lease=0)
            if not self.writes.pending():
                break

    def heartbeat_info(self) -> dict[str, Any]:
        """What the node publishes of its work with each heartbeat, and the per-site budget
        defaults it leases with (0: no limit), which ``status`` shows for sites without
        limits of their own."""
        return {
            "started": self.started(),
            "prefetched": len(self.ready),
            SITE_DEFAULTS: {"rate": self.budget.rate, "concurrency": self.budget.concurrency},
        }

    # -- the loop --------------------------------------------------------------------------------

    def _free_slots(self) -> int:
        """How many more leases keep every download slot busy with refills in hand: up to
        ``LEASE_WINDOW`` times the concurrency, downloads included. The node flushes its writes
        at low water (or after ``DISTCRAWL_FLUSH_DELAY``), and what it holds must keep the
        slots busy while that round trip is on its way.

        Counted against the downloader's requests, not every started one: a response that
        waits for the spider (Scrapy's scraper queue, long on a CPU-bound node) frees its
        download slot, and Scrapy's own scheduler would hand that slot a request at once.
        """
        window = self.concurrency * LEASE_WINDOW
        # requests held back (their robots.txt, their site's share, a server's budget) take
        # no download slot: up to a window of them does not keep the node from leasing more
        held = self.ready.held
        return window - self.downloading() - (len(self.ready) - min(held, window))

    async def _run(self) -> None:
        wait = _BUSY_WAIT
        errors = _ErrorStreak(self.node_id, self.stats)
        while not self.closing and not self._lost():
            failed = False
            if self.outage.down or errors.count:
                # the first round trip that Redis may serve again recovers nobody: every
                # heartbeat may have gone stale meanwhile, the live nodes' as well as ours
                # (an error of a class no outage names may be the whole server's too)
                self.membership.recover_after(time.monotonic() + self.heartbeat_timeout)
            try:
                if self._needs_reconcile:
                    # a member again before the next lease (the node may have been presumed
                    # dead, or Redis may have lost C:nodes): leases of a node outside C:nodes
                    # are seen neither by recovery nor by drain detection
                    await self.membership.heartbeat(self.heartbeat_info())
                    await self._reconcile()
                    self._needs_reconcile = False
                got = await self._cycle()
                if self.outage.answered() | errors.ended():
                    # every heartbeat went stale while Redis was away, ours as well as the
                    # live nodes': silence counts again only from now
                    self.membership.recover_after(time.monotonic() + self.heartbeat_timeout)
                wait = _BUSY_WAIT if got else min(wait * 2, DEFAULT_IDLE_MAX_WAIT)
            except Exception as exc:
                # the outcome of a failed round trip is unknown: reconcile before leasing
                self._needs_reconcile = True
                failed = True
                if self.solo is not None:
                    self.solo.leave("a round trip failed")
                if classify(exc) is not None:
                    self.outage.failed(exc, waiting=self._waiting())
                else:
                    errors.failed(exc)
                # a node retries well within a heartbeat timeout: once Redis is back, the
                # others' guard against recovering it lasts that long
                wait = min(max(wait * 2, _RETRY_WAIT), _RETRY_WAIT_MAX, self.heartbeat_timeout / 4)
            if self.closing or self._lost():
                break
            if self.writes.pending() and not failed:
                hold = self._hold_writes()
                if hold > 0:
                    # the engine still has work: the acks and links of more pages join this
                    # round trip, until the work runs low or the writes have waited enough
                    self.wake.clear()
                    self._holding = True
                    try:
                        await asyncio.wait_for(self.wake.wait(), timeout=hold)
                    except TimeoutError:
                        pass
                    finally:
                        self._holding = False
                continue
            self.wake.clear()
            if self._next_due is not None and self._free_slots() > 0 and not failed:
                # wake up when a parked retry or a waiting site falls due, not a poll later
                wait = min(wait, max(0.002, self._next_due - time.monotonic()))
            if failed:
                # a failed round trip is retried after its wait, whatever else wakes the
                # loop (only a stop does): writes and leases keep until Redis serves again
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stopping.wait(), timeout=wait)
                continue
            try:
                await asyncio.wait_for(self.wake.wait(), timeout=wait)
                wait = _BUSY_WAIT
            except TimeoutError:
                pass
        self.outage.finish()
        self.seeds.finish()

    def _lost(self) -> bool:
        """Whether the crawl's state vanished (the node then writes nothing more)."""
        return self.origin is not None and self.origin.lost

    def _waiting(self) -> str:
        """What the node holds for Redis, for the outage's log line."""
        writes = self.writes
        parts = (
            (len(writes.held_leases()), "acks"),
            (len(writes.links()), "links"),
            (len(writes.dead), "dead letters"),
            (len(self.ready), "prefetched requests"),
            (self.started(), "requests in progress"),
        )
        return ", ".join(f"{n} {what}" for n, what in parts if n)

    def _hold_writes(self) -> float:
        """How much longer the buffered writes may wait (0: flush now).

        A dead letter, a refused entry, taken seeds and a closing node flush at once; else see
        :func:`write_hold`."""
        if self.closing or self.writes.urgent():
            return 0.0
        return write_hold(
            ready=self.ready.startable,
            low_water=self.low_water,
            children=self.writes.links(),
            idle_nodes=self.store.idle_nodes,
            until=self._flushed_at + self.flush_delay,
            now=time.monotonic(),
        )

    async def _reconcile(self) -> None:
        """Leases Redis holds for this node and it does not know go back; prefetched requests
        whose lease it lost are dropped (see :func:`reconcile_leases`)."""
        writes = self.writes
        adopted = await reconcile_leases(
            self.store,
            self.node_id,
            leased=self.leased,
            acks=writes.held_leases,
            ready=self.ready,
            stats=self.stats,
            own=[c for c in writes.children if c.own],
        )
        if adopted:
            # a failed round trip wrote these own children after all: sending them again
            # would find their URLs seen, and returning their leases would fetch them twice
            ids = {id(child) for child, _ in adopted}
            writes.children = [c for c in writes.children if id(c) not in ids]
            if self.on_own is not None:
                self.on_own([(child, lease) for child, lease in adopted])
        if self.revisits is not None:
            self.revisits.forget_dropped()

    async def _cycle(self) -> bool:
        """One round of I/O; returns whether anything happened (to pace the idle wait)."""
        began = time.monotonic()
        free = self._free_slots()
        lease = min(self.prefetch, free) if free > 0 and not self.closing else 0
        if self.revisits is not None:
            await self.revisits.before_flush(self.client)
        if self.before_flush is not None:
            await self.before_flush()
        leased = await self.flush(lease=lease)
        progressed = leased > 0
        # a node waiting for the solo node to share the crawl takes no seed and judges no drain
        blocked = self.solo is not None and self.solo.blocked
        if leased == 0 and lease > 0 and not blocked and await self.seeds.take():
            await self.flush(lease=0)
            progressed = True
        if time.monotonic() - began > self.heartbeat_timeout / 2:
            # Redis (or this node) stood still long enough for heartbeats to go stale, the
            # live nodes' as well as ours, without a failed call to say so (a frozen server
            # answers late, not never): silence counts again only from now
            self.membership.recover_after(time.monotonic() + self.heartbeat_timeout)
        if await self.membership.tick(self.heartbeat_info()):
            self.wake.set()
        if self.origin is not None and await self.origin.check():
            return False  # the crawl's state vanished: nothing more is written or judged
        if self.memory is not None:
            await self.memory.tick()
        if self.close_when_drained and not progressed and not self.drained and not blocked:
            busy = bool(self.ready or self.started() or self.writes.pending() or self.holds_work())
            if await self.drain.check(busy=busy):
                if self.origin is not None and await self.origin.check(read=True):
                    return False  # drained because the crawl's state vanished: not finished
                # Scrapy finds the spider idle and closes it (or its idle handlers keep it)
                self.drained = True
                self.on_drained()
        return progressed

    async def flush(self, *, lease: int) -> int:
        """Push, ack and lease in one round trip; returns the entries leased. Buffers are
        cleared only once Redis said OK (see :class:`WriteBuffers` for the order of acks). In
        solo mode the round trip first reads the handshake (``SoloMode.gate``); a node that
        waits for the solo node to share the crawl writes and leases nothing."""
        solo = self.solo
        if solo is not None and not await solo.gate():
            return 0
        taken = await self._flush(lease=lease)
        if solo is not None:
            await solo.after_flush(own_pending=any(c.own for c in self.writes.children))
        return taken

    async def _flush(self, *, lease: int) -> int:
        self._flushed_at = self.ready.round_started = time.monotonic()
        out = self.writes.take(self.store.keys.shard_of, lease=lease)
        if out is None:
            return 0
        try:
            result = await self.store.sync(
                self.node_id,
                children=out.children,
                probes=out.probes,
                acks=out.acks,
                dead=out.dead,
                rejected=out.rejected,
                seeds_done=out.seeds_done,
                lease=lease,
                budget=self.budget,
                feedback=out.feedback,
                tag=self.tag,
                revisits=out.revisits,
            )
        except BaseException:
            self.writes.restore(out)
            raise
        self.writes.sent(out, result)
        if (
            result.rewound is not None
            and self.origin is not None
            and await self.origin.check(read=True)
        ):
            return 0  # not a rewind: the crawl's state vanished; nothing is pushed again
        if result.rewound is not None:
            # the node forgets what it pushed, takes a new tag, and reconciles before it leases
            self.on_rewind(result.rewound)
            self.tag = new_rid_tag()
            self._needs_reconcile = True
        if result.own and self.on_own is not None:
            self.on_own(result.own)
        if result.site_events:
            log_site_events(result.site_events, recovery=self.budget.recovery, stats=self.stats)
            if self.on_site_events is not None:
                self.on_site_events(result.site_events)
            for event in result.site_events:
                if event.kind == "cut":
                    self.cut_sites.add(event.site)
                else:
                    self.cut_sites.discard(event.site)
        due = result.next_due_ms
        self._next_due = time.monotonic() + due / 1000 if due >= 0 else None
        self._count_round_trip(result)
        taken = self.intake.accept(result.leased)
        if taken and self.drained:
            self.work_again()
        return taken

    def _count_round_trip(self, result: SyncResult) -> None:
        stats = self.stats
        stats.inc_value(stat_keys.ROUNDTRIPS)
        for key, value in (
            (stat_keys.ENQUEUED, result.added),
            (stat_keys.FILTERED, result.filtered),
            (stat_keys.PARKED, result.parked),
            (stat_keys.ACKED, result.acked),
            (stat_keys.STALE_ACKS, result.stale_acks),
            (stat_keys.PRIORITY_INVERSIONS, result.priority_inversions),
        ):
            if value:
                stats.inc_value(key, value)
        if result.added:
            stats.inc_value(stat_keys.SCHEDULER_ENQUEUED, result.added)
            stats.inc_value(stat_keys.SCHEDULER_ENQUEUED_REDIS, result.added)
        if result.filtered:
            stats.inc_value(stat_keys.DUPEFILTER_FILTERED, result.filtered)
        if result.stale_acks:
            # reports for leases this node no longer holds (it was presumed dead): fenced off
            logger.warning(
                "Node %s: %d acks or dead letters for leases it no longer holds were ignored",
                self.node_id,
                result.stale_acks,
            )


class _ErrorStreak:
    """Failed round trips that are no outage (a bug, a reply the node cannot read): the first
    of a kind is logged with its traceback, repeats only counted (``frontier/loop_errors``),
    and the end of the streak is one line with the count."""

    def __init__(self, node_id: str, stats: StatsCollector) -> None:
        self.node_id = node_id
        self.stats = stats
        self.count = 0
        self._seen: set[tuple[str, str]] = set()

    def failed(self, exc: Exception) -> None:
        self.count += 1
        self.stats.inc_value(stat_keys.LOOP_ERRORS)
        kind = (type(exc).__name__, str(exc)[:200])
        if kind in self._seen:
            return
        self._seen.add(kind)
        logger.error(
            "Frontier loop error on node %s; retrying (repeats of this error are counted, "
            "not logged)",
            self.node_id,
            exc_info=exc,
        )

    def ended(self) -> bool:
        """A round trip succeeded; returns whether it ended a streak."""
        if not self.count:
            return False
        logger.warning(
            "Frontier loop of node %s works again after %d failed round trips",
            self.node_id,
            self.count,
        )
        self.count = 0
        self._seen.clear()
        return True
