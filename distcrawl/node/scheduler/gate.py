"""The gate between a node's leased requests and its engine: which leased request may start
now, and what becomes of one that may not.

A leased request starts once its site's robots.txt is read on this node (the fetch starts
when the first one comes by; until then they wait here, not in a download slot), its site is
not held, its site is within its share of the node's download slots while other sites have
work waiting, and (with server budgets) the node holds a grant of its server. Otherwise it
waits here under that reason, or goes back: to the frontier unstarted when its site's
robots.txt cannot be read (the frontier holds the site) or when it was leased before the
node knew its site's Crawl-delay; to the dead letters when robots.txt was given up on or
the site is set aside.

A site's share is the node's ``CONCURRENT_REQUESTS`` over the sites with work on the node (in
progress or waiting): a site that hangs or trickles keeps at most that many slots, whatever
its queue. A site may take more only while it flows (a request of it finished on this node in
the last :data:`FLOWING` seconds) and no other site waits for a slot. A site that does not flow
(its requests never finish, or finish seconds apart) gets half its share, and never more than
a quarter of the slots even when it is alone: the next site to come finds room.

A request whose lease spent its site's rate token and that then waited here starts without
its token: the token let it go when it was leased, and sent later it would join the requests
leased since (a site's start on each node, where the requests leased while its robots.txt is
read go out together). It takes a new token of its site before it is sent
(:class:`~distcrawl.node.middlewares.politeness.OutsideRequestsMiddleware`); the first one is
spent for nothing.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections import Counter
from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING, Any, NamedTuple

from scrapy.utils.httpobj import urlparse_cached

from distcrawl.base.names import reasons
from distcrawl.base.names import stats as stat_keys
from distcrawl.node.politeness.robots import RobotsState
from distcrawl.node.scheduler.ready import SHARE, ReadyQueue

if TYPE_CHECKING:
    from urllib.parse import ParseResult

    from scrapy import Request

    from distcrawl.node.politeness.hub import Politeness

__all__ = ["GO", "Gate", "Verdict"]

logger = logging.getLogger(__name__)

#: seconds since a site's last finished request on this node within which it *flows*: then it
#: may use slots no other site waits for, beyond its share
FLOWING = 1.0
#: what kinds of wait a held request's key names (SHARE: it only waits for a slot)
ROBOTS, SERVER, RESOLVE, HOLD = "robots", "server", "resolve", "hold"


class Verdict(NamedTuple):
    """``go``; ``hold`` under ``key``; ``give_back`` (to the frontier, unstarted); ``dead``
    (a dead letter with the reason ``key``)."""

    kind: str
    key: Any = None


GO = Verdict("go")


def _site(request: Request) -> str:
    return urlparse_cached(request).hostname or ""


class Gate:
    """Hands the engine the leased requests that may start (see the module)."""

    def __init__(
        self,
        *,
        politeness: Politeness,
        ready: ReadyQueue,
        concurrency: int,
        give_back: Callable[[Request], None],
        dead_letter: Callable[[Request, str], None],
        wake_engine: Callable[[], None],
    ) -> None:
        self.politeness = politeness
        self.ready = ready
        self.concurrency = max(1, concurrency)
        self.give_back = give_back
        self.dead_letter = dead_letter
        self.wake_engine = wake_engine
        #: requests handed to the engine: site and the server whose grant it holds ("": none)
        self._started: dict[Request, tuple[str, str]] = {}
        #: the site of each request counted in ``queued`` (a request's site is read from its
        #: URL once while it waits, not at each count)
        self._queued_sites: dict[Request, str] = {}
        self.in_progress: Counter[str] = Counter()
        #: requests waiting for a slot per site (startable, or held at their share)
        self.queued: Counter[str] = Counter()
        self.queued_total = 0
        #: sites with work on the node: queued or in progress
        self.work: Counter[str] = Counter()
        self._fetching: set[str] = set()
        #: site -> monotonic time a request of it last finished here
        self._finished: dict[str, float] = {}
        self._timers: dict[str, asyncio.TimerHandle] = {}
        ready.on_queued = self._queued
        politeness.robots.listeners.append(self._robots_changed)
        servers = politeness.servers
        servers.wanted = lambda server: ready.holding((SERVER, server))
        servers.on_grants = self._grants
        servers.on_resolved = lambda site: self._release((RESOLVE, site))
        politeness.on_hold = self._hold_changed

    # -- what the queue and the engine tell the gate ----------------------------------------

    def _queued(self, request: Request, delta: int) -> None:
        if delta > 0:
            site = self._queued_sites[request] = _site(request)
        else:
            found = self._queued_sites.pop(request, None)
            site = _site(request) if found is None else found
        queued = self.queued
        queued[site] += delta
        self.queued_total += delta
        if queued[site] <= 0:
            del queued[site]
        # the site's work, as _count counts it (inline: this runs twice a page)
        work = self.work
        work[site] += delta
        if work[site] <= 0:
            del work[site]

    def _count(self, site: str, delta: int) -> None:
        self.work[site] += delta
        if self.work[site] <= 0:
            del self.work[site]

    def started(
        self, request: Request, server: str = "", *, passed: bool = True, stale: bool = False
    ) -> None:
        """``request`` goes to the engine (a lease through :meth:`next`, or from the node's
        memory); ``passed``: its site's budget admitted it (not one kept in memory);
        ``stale``: it was admitted, then held here: it takes a new token of its site's rate
        before it is sent (its server's grant, if any, it holds already)."""
        self._start(request, _site(request), server, passed=passed, stale=stale)

    def _start(
        self, request: Request, site: str, server: str, *, passed: bool, stale: bool
    ) -> None:
        self._started[request] = (site, server)
        self.in_progress[site] += 1
        self.work[site] += 1
        if passed:
            self.politeness.passed[request] = not stale
            if stale:
                self.politeness.stats.inc_value(stat_keys.TOKENS_TAKEN_AGAIN)

    def done(self, request: Request) -> None:
        """The engine is done with ``request``: its slot and its server's grant are free."""
        got = self._started.pop(request, None)
        if got is None:
            return
        site, server = got
        self._finished[site] = time.monotonic()
        in_progress = self.in_progress
        in_progress[site] -= 1
        if in_progress[site] <= 0:
            del in_progress[site]
        self._count(site, -1)
        if server:
            self.politeness.servers.done(server)
        if self.ready.release((SHARE, site), 1):
            self.wake_engine()

    def in_progress_of(self, request: Request) -> bool:
        return request in self._started

    def site_of(self, request: Request) -> str:
        """The site of ``request`` (its URL's host; "" for none), as the gate counts it while
        the engine works on it: read once, at its start."""
        started = self._started.get(request)
        return _site(request) if started is None else started[0]

    # -- handing out ------------------------------------------------------------------------

    def next(self) -> Request | None:
        """The next leased request that may start, or None."""
        ready = self.ready
        while ready.startable:
            request = ready.popleft()
            verdict = self.check(request)
            if verdict.kind == "go":
                return request
            self._act(request, verdict)
        # nothing else waits: a site at its share that flows may take a slot nobody else wants
        for key in ready.held_keys():
            if isinstance(key, tuple) and key[0] == SHARE and self._flows(key[1]):
                ready.release(key, 1)
                request = ready.popleft()
                verdict = self.check(request, spare=True)
                if verdict.kind == "go":
                    return request
                self._act(request, verdict)
        return None

    def _act(self, request: Request, verdict: Verdict) -> None:
        if verdict.kind == "hold":
            self.ready.hold(verdict.key, request)
            if verdict.key[0] == SHARE:
                self.politeness.stats.inc_value(stat_keys.SHARE_WAITS)
        elif verdict.kind == "give_back":
            self.give_back(request)
        else:
            self.politeness.stats.inc_value(stat_keys.SET_ASIDE(verdict.key))
            self.dead_letter(request, verdict.key)

    def check(self, request: Request, *, spare: bool = False) -> Verdict:
        """May ``request`` start now? On ``go`` it is counted as started (and holds its
        server's grant). ``spare``: no other site waits for a slot."""
        url = urlparse_cached(request)
        site = url.hostname or ""
        politeness = self.politeness
        if politeness.holds and politeness.held_for(site) > 0:
            self._timer(site)
            return Verdict("hold", (HOLD, site))
        verdict = self._robots(request, url)
        if verdict is not None:
            return verdict
        flows = self._flows(site)
        if self.in_progress[site] >= self._share(flows) and (
            not flows or (not spare and self.queued_total > self.queued[site])
        ):
            return Verdict("hold", (SHARE, site))
        server = ""
        servers = politeness.servers
        if servers.enabled:
            found = servers.server_of(site)
            if found is None:
                return Verdict("hold", (RESOLVE, site))
            if found and not servers.take(found):
                servers.want(found)
                return Verdict("hold", (SERVER, found))
            server = found
        self._start(request, site, server, passed=True, stale=self.ready.stale_token(request))
        return GO

    def _flows(self, site: str) -> bool:
        """Whether a request of ``site`` finished here lately, and it did not time out."""
        last = self._finished.get(site)
        if last is None or time.monotonic() - last > FLOWING:
            return False
        return not self.politeness.is_slow(site)

    def _share(self, flows: bool) -> int:
        """A site's share of the node's slots: over the sites with work. A site that does not
        flow gets half its share, and keeps room for one more site even while it is alone
        (the next one to come): a quarter of the slots at most."""
        if flows:
            return math.ceil(self.concurrency / max(1, len(self.work)))
        return max(1, math.ceil(self.concurrency / max(2, len(self.work)) / 2))

    def _robots(self, request: Request, url: ParseResult) -> Verdict | None:
        politeness = self.politeness
        fetch = politeness.robots_parser
        if fetch is None or request.meta.get("dont_obey_robotstxt"):
            return None
        if url.scheme not in ("http", "https"):
            return None
        netloc = url.netloc
        rules = politeness.robots
        entry = rules.get(netloc)
        if entry is None or rules.fetch_due(netloc):
            self._fetch(netloc, request)
            return Verdict("hold", (ROBOTS, netloc))
        state = entry.state
        if state is RobotsState.FETCHING:
            return Verdict("hold", (ROBOTS, netloc))
        if state is RobotsState.FAILED:
            return Verdict("give_back")
        if state is RobotsState.GIVEN_UP:
            return Verdict("dead", reasons.ROBOTS_UNAVAILABLE)
        if entry.set_aside:
            return Verdict("dead", reasons.CRAWL_DELAY_OVER_MAX)
        if entry.delay and self.ready.leased_at(request) < entry.delay_known:
            return Verdict("give_back")  # leased before the frontier had the delay
        return None

    # -- releasing held requests ------------------------------------------------------------

    def _release(self, key: Hashable, n: int | None = None) -> None:
        if self.ready.release(key, n):
            self.wake_engine()

    def _fetch(self, netloc: str, request: Request) -> None:
        if netloc in self._fetching:
            return
        fetch = self.politeness.robots_parser
        assert fetch is not None
        self._fetching.add(netloc)
        task = asyncio.ensure_future(fetch(request))

        def fetched(done: asyncio.Future[Any]) -> None:
            self._fetching.discard(netloc)
            if not done.cancelled() and done.exception() is not None:
                logger.error("robots.txt of %s: %r", netloc, done.exception())
            self._release((ROBOTS, netloc))

        task.add_done_callback(fetched)

    def _robots_changed(self, netloc: str) -> None:
        if netloc not in self._fetching:
            self._release((ROBOTS, netloc))

    def _grants(self, server: str, n: int) -> None:
        self._release((SERVER, server), n)

    def _hold_changed(self, site: str) -> None:
        self._timer(site)

    def _timer(self, site: str) -> None:
        """Release the site's held requests when its hold ends."""
        left = self.politeness.held_for(site)
        handle = self._timers.pop(site, None)
        if handle is not None:
            handle.cancel()
        if left <= 0:
            self._release((HOLD, site))
            return
        loop = asyncio.get_running_loop()
        self._timers[site] = loop.call_later(left + 0.01, self._timer, site)

    def close(self) -> None:
        for handle in self._timers.values():
            handle.cancel()
        self._timers.clear()
