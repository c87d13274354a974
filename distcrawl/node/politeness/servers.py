"""Server budgets on a node: which server (IP address) each site answers from, as the node's
resolver says (Scrapy's ``DNS_RESOLVER`` and its cache: the address the download connects to),
and the grants of each server's budget shared by the cluster. A request of a site starts only
with a grant of its server; the grant goes back when the request is done.

One task asks the frontier for the grants the node lacks and gives back those it is done with,
in one call to the control slot, at once when something comes back and every
:data:`POLL_INTERVAL` while requests wait for a full server.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import time
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from distcrawl.base.names import stats as stat_keys
from distcrawl.frontier import connection
from distcrawl.frontier.protocol.servers import ServerLimits

if TYPE_CHECKING:
    from scrapy.statscollectors import StatsCollector

    from distcrawl.frontier.store import FrontierStore

__all__ = ["POLL_INTERVAL", "Resolve", "ServerBudget", "resolve_with_reactor"]

logger = logging.getLogger(__name__)

#: seconds between two asks for grants while requests wait for a full server
POLL_INTERVAL = 0.05
#: the longest wait between asks when the frontier names when a grant is due
_LONGEST_WAIT = 1.0

#: host -> the address the downloader connects to ("" when it does not resolve)
Resolve = Callable[[str], Any]


async def resolve_with_reactor(host: str) -> str:
    """The address the downloader would connect to for ``host``: asked of the reactor's
    resolver (Scrapy's ``DNS_RESOLVER``, which caches answers while ``DNSCACHE_ENABLED``)."""
    from scrapy.utils.defer import maybe_deferred_to_future
    from twisted.internet import reactor

    try:
        address = await maybe_deferred_to_future(reactor.resolve(host))  # type: ignore[arg-type]
    except Exception:  # a name that does not resolve: its download fails as it would anyway
        return ""
    return str(address)


def _literal(host: str) -> str | None:
    try:
        return str(ipaddress.ip_address(host.strip("[]")))
    except ValueError:
        return None


class ServerBudget:
    """The server budgets as one node takes part in them.

    Settings: ``DISTCRAWL_SERVER_LIMITS``,
    ``DISTCRAWL_SITE_BURST`` (the rate's burst), ``DISTCRAWL_DNS_TTL`` (how long a resolved
    server is trusted), ``DISTCRAWL_HEARTBEAT_TIMEOUT`` (grants of a silent node come back).
    """

    def __init__(
        self,
        *,
        limits: ServerLimits,
        dns_ttl: float,
        heartbeat_timeout: float,
        stats: StatsCollector,
        resolve: Resolve = resolve_with_reactor,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.limits = limits
        self.enabled = limits.concurrency > 0 or limits.rate > 0
        self.dns_ttl = dns_ttl
        self.timeout_ms = int(heartbeat_timeout * 1000)
        self.stats = stats
        self._resolve = resolve
        self._clock = clock
        self.store: FrontierStore | None = None
        self.node_id = ""
        #: site -> (server, trusted until); server "" when it does not resolve
        self._servers: dict[str, tuple[str, float]] = {}
        self._resolving: dict[str, asyncio.Future[str]] = {}
        #: (site, server) pairs the frontier has not been told yet
        self._to_note: list[tuple[str, str]] = []
        #: grants this node holds and has not used, per server
        self.available: Counter[str] = Counter()
        #: grants used by requests now in progress, per server
        self.in_use: Counter[str] = Counter()
        #: grants to give back at the next ask
        self._done: Counter[str] = Counter()
        #: requests that want a grant, per server: held by the scheduler's gate, and those of
        #: the downloader's own waiting in the middleware
        self.wanted: Callable[[str], int] = lambda server: 0
        self._waiters: dict[str, list[asyncio.Future[None]]] = {}
        self._wanting: set[str] = set()
        #: called with a server some grants came for, and with a site just resolved
        self.on_grants: Callable[[str, int], None] = lambda server, n: None
        self.on_resolved: Callable[[str], None] = lambda site: None
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._closing = False

    # -- which server -----------------------------------------------------------------------

    def server_of(self, site: str) -> str | None:
        """The server ``site`` answers from ("" when it does not resolve), or None while it is
        being resolved (:attr:`on_resolved` says when it is known)."""
        known = self._servers.get(site)
        if known is not None and known[1] > self._clock():
            return known[0]
        literal = _literal(site)
        if literal is not None:
            self._learn(site, literal)
            return literal
        if site not in self._resolving:
            self._resolving[site] = future = asyncio.ensure_future(self._resolve(site))
            future.add_done_callback(lambda f, site=site: self._resolved(site, f))
        # a stale answer keeps serving while it is asked again
        return known[0] if known is not None else None

    async def resolved(self, site: str) -> str:
        """The server ``site`` answers from ("": none), resolving it if need be."""
        server = self.server_of(site)
        while server is None:
            await asyncio.shield(self._resolving[site])
            server = self.server_of(site)
        return server

    def _resolved(self, site: str, future: asyncio.Future[str]) -> None:
        self._resolving.pop(site, None)
        server = "" if future.cancelled() or future.exception() else future.result()
        self._learn(site, server)
        self.on_resolved(site)

    def answered_from(self, site: str, address: object) -> None:
        """``site`` answered from ``address`` (a response's, its server once written as a
        string): told to the frontier once, for the status, when server budgets are off (on,
        each site is resolved before its first request)."""
        if not self.enabled and site not in self._servers:
            self._learn(site, str(address))

    def _learn(self, site: str, server: str) -> None:
        known = self._servers.get(site)
        self._servers[site] = (server, self._clock() + self.dns_ttl)
        if server and (known is None or known[0] != server):
            self._to_note.append((site, server))
            self._wake.set()

    # -- grants -----------------------------------------------------------------------------

    def take(self, server: str) -> bool:
        """Use a grant of ``server`` for a request that starts now, if the node holds one."""
        if self.available[server] <= 0:
            return False
        self.available[server] -= 1
        self.in_use[server] += 1
        return True

    def want(self, server: str) -> None:
        """A request waits for a grant of ``server``: ask for it."""
        self.stats.inc_value(stat_keys.SERVER_WAITS)
        self._wanting.add(server)
        self._wake.set()

    def done(self, server: str) -> None:
        """A request that used a grant of ``server`` is done: the grant goes back."""
        if self.in_use[server] <= 0:
            return
        self.in_use[server] -= 1
        if not self.in_use[server]:
            del self.in_use[server]
        self._done[server] += 1
        self._wake.set()

    async def acquire(self, server: str) -> None:
        """Wait for a grant of ``server`` (a request of the downloader's own)."""
        while not self.take(server):
            future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters.setdefault(server, []).append(future)
            self.want(server)
            try:
                await future
            finally:
                waiters = self._waiters.get(server, [])
                if future in waiters:
                    waiters.remove(future)

    # -- the task ---------------------------------------------------------------------------

    def start(self, store: FrontierStore, node_id: str) -> None:
        self.store, self.node_id = store, node_id
        if self._task is None:
            self._task = asyncio.ensure_future(self._run())

    async def stop(self) -> None:
        """Give back every grant this node holds, and end the task."""
        self._closing = True
        self._wake.set()
        if self._task is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait([self._task], timeout=5)
        for server, n in list(self.available.items()) + list(self.in_use.items()):
            self._done[server] += n
        self.available.clear()
        self.in_use.clear()
        if self.store is not None and self._done:
            with contextlib.suppress(*connection.REDIS_FAILURES):
                await self._ask(closing=True)

    def _demand(self, server: str) -> int:
        return self.wanted(server) + len(self._waiters.get(server, ())) - self.available[server]

    async def _run(self) -> None:
        wait: float | None = None
        while not self._closing:
            try:
                if wait is None:
                    await self._wake.wait()
                else:
                    await asyncio.wait_for(self._wake.wait(), timeout=wait)
            except TimeoutError:
                pass
            self._wake.clear()
            if self._closing:
                break
            try:
                wait = await self._ask()
            except connection.REDIS_FAILURES as exc:
                logger.debug("Server grants not asked for: %s", exc)
                wait = 0.5
            except Exception:
                logger.exception("Server budget task failed; asking again")
                wait = 1.0

    async def _ask(self, *, closing: bool = False) -> float | None:
        """One call: grants wanted and given back, sites' servers noted. Returns how long to
        wait before the next ask (None: until something happens)."""
        store = self.store
        assert store is not None
        notes, self._to_note = self._to_note, []
        if notes:
            try:
                await store.note_servers(notes)
                self.stats.inc_value(stat_keys.SERVERS_NOTED, len(notes))
            except BaseException:
                self._to_note[:0] = notes
                raise
        if not self.enabled:
            return None
        servers = set(self._done)
        if not closing:
            servers |= {s for s in self._demand_servers() if self._demand(s) > 0}
        if not servers:
            return None
        asks = [(s, 0 if closing else max(0, self._demand(s)), self._done[s]) for s in servers]
        done = Counter(self._done)
        self._done.clear()
        try:
            grants = await store.take_server(
                self.node_id, asks, limits=self.limits, timeout_ms=self.timeout_ms
            )
        except BaseException:
            self._done.update(done)
            raise
        wait: float | None = None
        for (server, want, _), grant in zip(asks, grants, strict=True):
            if grant.granted:
                self.available[server] += grant.granted
                self._hand_out(server, grant.granted)
            if want > grant.granted:
                due = POLL_INTERVAL if grant.due_ms < 0 else min(grant.due_ms / 1000, _LONGEST_WAIT)
                wait = due if wait is None else min(wait, due)
        return max(0.005, wait) if wait is not None else None

    def _demand_servers(self) -> set[str]:
        wanting = {s for s in self._wanting | set(self._waiters) if self._demand(s) > 0}
        self._wanting = wanting
        return wanting

    def _hand_out(self, server: str, n: int) -> None:
        # the downloader's own requests first (they hold a download slot while they wait)
        for future in list(self._waiters.get(server, ()))[:n]:
            if not future.done():
                future.set_result(None)
        self.on_grants(server, n)
