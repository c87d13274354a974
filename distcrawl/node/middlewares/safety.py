"""Hostile input at the downloader: where a node may connect, and how much of a site it takes.

Every request passes through here before it is sent: seeds, links, queue entries, retries and
redirects alike (a redirect goes back through the frontier and then through every downloader
middleware again). Two downloader middlewares (robots.txt, which binds every request too, is
:mod:`distcrawl.node.middlewares.robots`'s):

- :class:`AddressGuardMiddleware` refuses private, loopback, link-local, reserved and cloud
  metadata addresses, checked on the address the host name resolves to, so neither a seed, a
  queue entry nor a redirect can point the cluster at its own Redis, MongoDB or metadata service;
  the node's own Redis and MongoDB and the crawl's dashboards are refused even where
  ``DISTCRAWL_ALLOW_PRIVATE`` allows their addresses (``own.py``).
- :class:`PageLimitsMiddleware` ends traps and hostile pages with a counted reason: a page budget
  per site shared by the whole cluster, redirect loops, bodies over ``DOWNLOAD_MAXSIZE``.

Depth is bounded by Scrapy's own ``DepthMiddleware`` (``DEPTH_LIMIT``; it counts
``depth/request_ignored_count``). Refusals are counted as ``safety/refused/<reason>``.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit
from weakref import WeakKeyDictionary

from scrapy import signals
from scrapy.exceptions import CannotResolveHostError, DownloadCancelledError, IgnoreRequest
from scrapy.http.request import NO_CALLBACK
from scrapy.utils.defer import maybe_deferred_to_future
from scrapy.utils.httpobj import urlparse_cached
from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IResolutionReceiver
from zope.interface import implementer

from distcrawl.base.config import SETTINGS
from distcrawl.base.names import reasons
from distcrawl.base.names import stats as stat_keys
from distcrawl.base.urls import (
    ALLOWED_SCHEMES,
    is_metadata_address,
    is_private_address,
    mask_url,
    printable,
    private_allowed,
)
from distcrawl.frontier import connection
from distcrawl.frontier.keys import ControlKeys, FrontierKeys
from distcrawl.node.middlewares.own import OwnAddresses, endpoints

if TYPE_CHECKING:
    from typing import Self

    from scrapy import Request, Spider
    from scrapy.crawler import Crawler
    from scrapy.statscollectors import StatsCollector
    from twisted.internet.interfaces import IAddress, IHostResolution

__all__ = [
    "AddressGuardMiddleware",
    "PageLimitsMiddleware",
    "Refused",
    "resolve_with_reactor",
]

logger = logging.getLogger(__name__)

#: host names remembered by the address guard at most (the oldest is forgotten first): a
#: crawl of a few thousand sites never forgets one within DISTCRAWL_DNS_TTL
DNS_CACHE_SIZE = 10_000
#: seconds a node trusts its "this site's budget is used up" before asking Redis again
BUDGET_RECHECK = 30.0
#: most pages of a site a node reserves in one Redis round trip (fewer for small budgets)
BUDGET_CHUNK = 16
#: a redirect chain that reaches the same URL this many times is a loop
REDIRECT_LOOP_REPEATS = 2

_DEFAULT_PORTS = {"http": 80, "https": 443}

#: resolve(host, port) -> the addresses a connection to host:port may use
Resolver = Callable[[str, int], Awaitable[list[str]]]


class Refused(IgnoreRequest):
    """A request dropped by a safety check; ``reason`` is short and stable for stats."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {printable(detail)}" if detail else reason)
        self.reason = reason


@implementer(IResolutionReceiver)
class _Addresses:
    """Collects what a Twisted name resolver answers."""

    def __init__(self) -> None:
        self.done: Deferred[list[str]] = Deferred()
        self.hosts: list[str] = []

    def resolutionBegan(self, resolution: IHostResolution) -> None:
        pass

    def addressResolved(self, address: IAddress) -> None:
        host = getattr(address, "host", None)
        if isinstance(host, str):
            self.hosts.append(host)

    def resolutionComplete(self) -> None:
        self.done.callback(self.hosts)


async def resolve_with_reactor(host: str, port: int) -> list[str]:
    """The addresses the downloader would connect to for ``host``, asked of the same resolver.

    Scrapy's downloader connects through the reactor's name resolver (``DNS_RESOLVER``, which
    caches answers while ``DNSCACHE_ENABLED``, Scrapy's default): asking that resolver here,
    on the reactor without blocking it, puts the checked answer in its cache, so the connection
    goes to the address that was checked and a DNS rebinding between check and connect finds
    no second lookup to answer differently.
    """
    # imported here: importing the reactor at module level would install Twisted's default
    # reactor before Scrapy installs the asyncio one
    from twisted.internet import reactor

    receiver = _Addresses()
    reactor.nameResolver.resolveHostName(receiver, host, portNumber=port)
    return await maybe_deferred_to_future(receiver.done)


def _refuse(stats: StatsCollector, reason: str, detail: str) -> Refused:
    stats.inc_value(stat_keys.SAFETY_REFUSED(reason))
    return Refused(reason, detail)


class AddressGuardMiddleware:
    """Refuses requests to addresses that are not public unless ``DISTCRAWL_ALLOW_PRIVATE``
    allows them, after DNS resolution: a name that resolves to 127.0.0.1 is refused like
    127.0.0.1 itself. Only http and https are fetched at all.

    A host name that does not resolve raises ``CannotResolveHostError`` (retried with backoff,
    then dead-lettered, as the download itself would have failed), so a request never reaches
    the downloader with an address that was not checked.

    Settings: ``DISTCRAWL_ALLOW_PRIVATE`` (False, True, or entries: ``host``, ``host:port``,
    ``10.0.0.0/8``), ``DISTCRAWL_DNS_TTL``.
    """

    def __init__(
        self,
        *,
        stats: StatsCollector,
        allow_private: bool | frozenset[str],
        dns_ttl: float = SETTINGS.default("DISTCRAWL_DNS_TTL"),
        dns_cache_size: int = DNS_CACHE_SIZE,
        resolve: Resolver = resolve_with_reactor,
        clock: Callable[[], float] = time.monotonic,
        own: OwnAddresses | None = None,
    ) -> None:
        self.stats = stats
        self.allow_private = allow_private
        #: the node's own Redis, MongoDB and the crawl's dashboards: never fetched
        self.own = own
        self._clock = clock  # when cached answers expire (a test's clock can be moved by hand)
        self.dns_ttl = dns_ttl
        self.dns_cache_size = max(1, dns_cache_size)
        self._resolve = resolve
        self._cache: OrderedDict[tuple[str, int], tuple[float, list[str]]] = OrderedDict()
        # lookups under way: requests to a host not cached yet wait for the same answer
        self._pending: dict[tuple[str, int], asyncio.Future[list[str]]] = {}
        self._logged: set[tuple[str, str, int]] = set()
        self._client: Any = None  # the crawl's Redis, read for its dashboards' addresses
        self._signals: tuple[Any, ...] = ()

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        s = crawler.settings
        assert crawler.stats is not None
        redis_url = connection.settings_url(s)
        own = OwnAddresses(
            endpoints(redis_url, SETTINGS.value(s, "MONGO_URI")), resolve=resolve_with_reactor
        )
        mw = cls(
            stats=crawler.stats,
            allow_private=SETTINGS.value(s, "DISTCRAWL_ALLOW_PRIVATE"),
            dns_ttl=SETTINGS.value(s, "DISTCRAWL_DNS_TTL"),
            own=own,
        )

        def opened(spider: Spider) -> None:
            # the crawl's dashboards record where they listen in the crawl
            mw._client = connection.async_client(
                redis_url, socket_timeout=10, socket_connect_timeout=10
            )
            own.open(mw._client, FrontierKeys.for_spider(spider.name, s))

        async def closed(spider: Spider) -> None:
            own.close()
            if mw._client is not None:
                await mw._client.aclose()
                mw._client = None

        mw._signals = (opened, closed)  # signals hold their receivers weakly
        crawler.signals.connect(opened, signal=signals.spider_opened)
        crawler.signals.connect(closed, signal=signals.spider_closed)
        return mw

    async def process_request(self, request: Request) -> None:
        try:
            await self.check(request.url)
        except Refused as exc:
            if not _is_robots_txt(request):
                # robots.txt of a refused place is no rules; its pages meet the same refusal
                # and are counted, each once
                self.stats.inc_value(stat_keys.SAFETY_REFUSED(exc.reason))
            self._log(request, exc)
            raise

    async def check(self, url: str) -> None:
        """Raise :class:`Refused` unless the crawler may connect where ``url`` points (the
        caller counts it)."""
        scheme, host, port = _where(url)
        if scheme not in ALLOWED_SCHEMES:
            raise Refused(reasons.BAD_SCHEME, url)
        if not host or port is None:
            raise Refused(reasons.MALFORMED_URL, url)
        if self.own is not None:
            await self.own.refresh()
            if port in self.own.ports():
                # whatever DISTCRAWL_ALLOW_PRIVATE allows, in any notation of the address
                addresses = [host] if _is_ip(host) else await self._addresses(host, port)
                what = await self.own.whose(host, port, addresses)
                if what is not None:
                    raise Refused(reasons.OWN_ADDRESS, f"{host}:{port} is the crawl's {what}")
        if self.allow_private is True or private_allowed(self.allow_private, host, port):
            return
        if is_metadata_address(host):
            raise Refused(reasons.METADATA_ADDRESS, host)
        if is_private_address(host):
            raise Refused(reasons.PRIVATE_ADDRESS, host)
        if _is_ip(host):
            return
        for address in await self._addresses(host, port):
            if is_metadata_address(address):
                raise Refused(reasons.METADATA_ADDRESS, f"{host} resolves to {address}")
            if is_private_address(address) and not private_allowed(
                self.allow_private, host, port, address
            ):
                raise Refused(reasons.PRIVATE_ADDRESS, f"{host} resolves to {address}")

    async def _addresses(self, host: str, port: int) -> list[str]:
        key = (host, port)
        now = self._clock()
        cached = self._cache.get(key)
        if cached is not None and cached[0] > now:
            return cached[1]
        pending = self._pending.get(key)
        if pending is None:
            pending = asyncio.ensure_future(self._resolve(host, port))
            self._pending[key] = pending
            pending.add_done_callback(lambda _: self._pending.pop(key, None))
        # shielded: one request cancelled while waiting must not cancel the others' lookup
        addresses = await asyncio.shield(pending)
        if not addresses:
            self.stats.inc_value(stat_keys.SAFETY_UNRESOLVED)
            raise CannotResolveHostError(f"{host} does not resolve")
        self._cache[key] = (now + self.dns_ttl, addresses)
        self._cache.move_to_end(key)
        while len(self._cache) > self.dns_cache_size:
            self._cache.popitem(last=False)
        return addresses

    def _log(self, request: Request, exc: Refused) -> None:
        # one warning per place a cluster is pointed at; the stats count every request
        parts = urlparse_cached(request)
        key = (exc.reason, parts.hostname or "", parts.port or 0)
        level = logging.DEBUG if key in self._logged else logging.WARNING
        self._logged.add(key)
        logger.log(level, "Refused %s: %s", mask_url(request.url), exc)


def _is_robots_txt(request: Request) -> bool:
    """Whether *request* is a robots.txt fetch of the downloader's own (no callback)."""
    return request.callback is NO_CALLBACK and urlparse_cached(request).path == "/robots.txt"


def _where(url: str) -> tuple[str, str, int | None]:
    """(scheme, host, port) of ``url``; port None when it is not a valid port."""
    try:
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        port = parts.port or _DEFAULT_PORTS.get(scheme)
    except ValueError:
        return "", "", None
    return scheme, (parts.hostname or ""), port


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return True


class PageLimitsMiddleware:
    """Ends crawler traps and hostile pages with a counted reason instead of an endless crawl.

    - ``page_budget``: a site (host name) whose pages the whole cluster has fetched
      ``DISTCRAWL_MAX_PAGES_PER_SITE`` times gets no more; the count is one Redis counter per
      site, ``{<spider>}:pages:<site>`` (the frontier's hash tag), so every node shares it.
      A node reserves pages a few at a time (one ``INCRBY`` per up to :data:`BUDGET_CHUNK`
      pages, 1 for budgets under 100 pages): the cluster never fetches more than the budget,
      and at most (chunk - 1) pages per node go unused when a site runs out. Retries and
      robots.txt do not count. If Redis cannot be reached the page is fetched (the frontier
      pauses on its own when Redis is gone; dropping pages here would lose them).
    - ``redirect_loop``: a redirect chain that comes back to the same URL a second time.
    - ``too_large``: a body over ``DOWNLOAD_MAXSIZE`` (or the request's ``download_maxsize``):
      Scrapy cancels the download and logs the size; the request then ends here, not as a
      download error with a traceback. Scrapy says why only when the size was announced
      (``Content-Length``); a body without one (chunked) is cancelled without a word, so the
      bytes each download received are counted here (``bytes_received``) to tell.

    Settings: ``DISTCRAWL_MAX_PAGES_PER_SITE``, ``DOWNLOAD_MAXSIZE``, ``REDIS_URL``.
    """

    def __init__(
        self,
        *,
        stats: StatsCollector,
        max_pages_per_site: int,
        redis_url: str,
        budget_chunk: int | None = None,
        maxsize: int = 0,
    ) -> None:
        self.stats = stats
        self.maxsize = maxsize
        #: bytes received per download under way (a request gone is forgotten with it)
        self._received: WeakKeyDictionary[Request, int] = WeakKeyDictionary()
        self.max_pages = max(0, max_pages_per_site)
        self.redis_url = redis_url
        # small budgets are reserved page by page, so that they are spent exactly
        self.chunk = budget_chunk or max(1, min(BUDGET_CHUNK, self.max_pages // 100))
        self._client: Any = None
        self._keys: ControlKeys | None = None  # the crawl's, once its spider is open
        self._allowance: dict[str, int] = {}  # site -> pages reserved and not used yet
        self._reserving: dict[str, asyncio.Lock] = {}
        self._spent: dict[str, float] = {}  # site -> monotonic time to ask Redis again
        # site -> until when the cluster's budget is known to be all reserved (this node's
        # allowance aside): the site's new links are dropped before they are queued
        self._exhausted: dict[str, float] = {}
        self._announced: set[str] = set()  # sites whose used-up budget was logged
        self._redis_failing = False

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        s = crawler.settings
        assert crawler.stats is not None
        mw = cls(
            stats=crawler.stats,
            max_pages_per_site=SETTINGS.value(s, "DISTCRAWL_MAX_PAGES_PER_SITE"),
            redis_url=connection.settings_url(s),
            maxsize=SETTINGS.value(s, "DOWNLOAD_MAXSIZE"),
        )
        crawler.signals.connect(mw.bytes_received, signal=signals.bytes_received)
        crawler.signals.connect(mw.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(mw.spider_closed, signal=signals.spider_closed)
        return mw

    def spider_opened(self, spider: Spider) -> None:
        self._keys = ControlKeys(spider.name)
        if self.max_pages and self._client is None:
            self._client = connection.async_client(
                self.redis_url, socket_timeout=10, socket_connect_timeout=10
            )

    async def spider_closed(self, spider: Spider) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    def budget_key(self, site: str) -> str:
        if self._keys is None:
            raise RuntimeError("a page budget is reserved only once the spider is open")
        return self._keys.pages(site)

    async def process_request(self, request: Request) -> None:
        redirected = request.meta.get("redirect_urls")
        if isinstance(redirected, list) and redirected.count(request.url) >= REDIRECT_LOOP_REPEATS:
            logger.info("Refused %s: redirect_loop (%d redirects)", request.url, len(redirected))
            raise _refuse(self.stats, reasons.REDIRECT_LOOP, request.url)
        if not self.max_pages or request.meta.get("retry_times") or _is_robots(request):
            return
        site = urlparse_cached(request).hostname or ""
        if not await self._spend(site):
            raise _refuse(self.stats, reasons.PAGE_BUDGET, site)

    def bytes_received(self, data: bytes, request: Request, spider: Spider) -> None:
        self._received[request] = self._received.get(request, 0) + len(data)

    def process_exception(self, request: Request, exception: Exception) -> None:
        received = self._received.pop(request, 0)
        if not isinstance(exception, DownloadCancelledError):
            return
        maxsize = request.meta.get("download_maxsize", self.maxsize)
        # announced (Content-Length): Scrapy's message says so; chunked: the bytes counted
        if "max size" in str(exception) or (maxsize and received > maxsize):
            raise _refuse(self.stats, reasons.TOO_LARGE, request.url) from None

    async def _spend(self, site: str) -> bool:
        """Count one page of ``site``; False when its budget is used up."""
        while True:
            if self._allowance.get(site, 0) > 0:
                self._allowance[site] -= 1
                return True
            if self._used_up(site):
                return False
            lock = self._reserving.setdefault(site, asyncio.Lock())
            async with lock:
                # another request of this site may have reserved, or found none, meanwhile
                if self._allowance.get(site, 0) > 0:
                    continue
                if self._used_up(site):
                    return False
                try:
                    granted = await self._reserve(site)
                except connection.REDIS_FAILURES as exc:
                    self.stats.inc_value(stat_keys.PAGE_BUDGET_UNAVAILABLE)
                    if not self._redis_failing:
                        logger.error("Page budget unavailable (%s); pages fetched uncounted", exc)
                    self._redis_failing = True
                    return True
                self._redis_failing = False
                if granted:
                    self._allowance[site] = granted
                    continue
                self._spent[site] = time.monotonic() + BUDGET_RECHECK
            if site not in self._announced:
                self._announced.add(site)
                logger.warning(
                    "Site %s used up its page budget (%d pages, DISTCRAWL_MAX_PAGES_PER_SITE): "
                    "its further pages are dropped",
                    site,
                    self.max_pages,
                )
            return False

    def _used_up(self, site: str) -> bool:
        until = self._spent.get(site)
        return until is not None and time.monotonic() < until

    def used_up(self, site: str) -> bool:
        """Whether no page of ``site``'s budget is left for this node, as far as it knows
        (the cluster reserved it all, and this node holds none of it): a new link to the site
        would be leased only to be dropped here. Learnt at each reservation, trusted for
        :data:`BUDGET_RECHECK` seconds."""
        if not self.max_pages or self._allowance.get(site, 0) > 0:
            return False
        if self._used_up(site):
            return True
        until = self._exhausted.get(site)
        return until is not None and time.monotonic() < until

    async def _reserve(self, site: str) -> int:
        """Reserve up to a chunk of ``site``'s pages in Redis; how many were granted."""
        after = int(await self._client.incrby(self.budget_key(site), self.chunk))
        if after >= self.max_pages:
            self._exhausted[site] = time.monotonic() + BUDGET_RECHECK
        before = after - self.chunk
        return max(0, min(self.chunk, self.max_pages - before))


def _is_robots(request: Request) -> bool:
    # only a node's own robots.txt fetch carries this flag: seeds and queue entries may not
    return bool(request.meta.get("dont_obey_robotstxt")) and (
        urlparse_cached(request).path == "/robots.txt"
    )
