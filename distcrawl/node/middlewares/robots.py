"""robots.txt once per site for the whole cluster, charged to the site's shared budget, read
as RFC 9309 says.

Scrapy's RobotsTxtMiddleware fetches ``/robots.txt`` once per site on every node, straight
through the downloader, never through the scheduler: a site limited to R requests/s would see
R plus one robots.txt fetch per node in the first second. Here the first node to need a site's
robots.txt fetches it (spending a token of the site's budget, without waiting: the node holds
that site's leased requests until robots.txt is in, and a wait would release them as one
burst) and shares the answer through Redis; every other node reads it from there
(``DISTCRAWL_ROBOTS_SHARED``). The middleware does this around its own fetch: the cluster's
copy is looked up before the robots.txt request is sent (a shared answer is handed back by
its ``process_request``) and written when the answer comes back, so the pages cost no
middleware call of their own.

What the answer means (:mod:`distcrawl.node.politeness.robots`): 2xx its rules, and its
Crawl-delay for the whole cluster; 4xx no rules; 5xx, 429, a timeout or a connection error:
robots.txt is unavailable, the site is held and robots.txt fetched again with backoff (never
retried at once, never a dead letter: it is no request of the spider).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.downloadermiddlewares.robotstxt import (
    RobotsTxtMiddleware as _ScrapyRobotsTxtMiddleware,
)
from scrapy.exceptions import IgnoreRequest
from scrapy.http import Request, Response
from scrapy.http.request import NO_CALLBACK
from scrapy.utils.defer import maybe_deferred_to_future
from scrapy.utils.httpobj import urlparse_cached
from scrapy.utils.misc import build_from_crawler
from twisted.internet.defer import Deferred

from distcrawl.base.config import SETTINGS
from distcrawl.base.names import reasons
from distcrawl.base.names import stats as stat_keys
from distcrawl.frontier import connection
from distcrawl.frontier.store import FrontierKeys, FrontierStore, SiteBudget
from distcrawl.node import signals as dc_signals
from distcrawl.node.internals import check_robots_middleware
from distcrawl.node.politeness import Politeness
from distcrawl.node.politeness.robots import (
    FAILURE_FIELDS,
    RobotsState,
    RobotsUnavailable,
    SharedFailure,
)

if TYPE_CHECKING:
    from typing import Self

    from scrapy import Spider
    from scrapy.crawler import Crawler
    from scrapy.robotstxt import RobotParser

__all__ = ["RobotsTxtMiddleware", "SharedRobotsTxt"]

logger = logging.getLogger(__name__)

#: seconds a node waits for another node's robots.txt fetch before fetching it itself
DEFAULT_LOCK_WAIT = 10.0
#: a robots.txt larger than this is not shared (Scrapy would fetch it anyway)
MAX_SHARED_BYTES = 512 * 1024
#: the longest a robots.txt fetch waits at once for a Retry-After hold of its site (it asks again)
_HOLD_STEP = 5.0


def _unavailable(status: int) -> bool:
    """An answer that says robots.txt cannot be read now (RFC 9309: 5xx; 429 as well)."""
    return status >= 500 or status == 429


class SharedRobotsTxt:
    """The cluster's copy of robots.txt: looked up before a robots.txt request is sent (a
    shared answer, or this node takes the site's lock and fetches it), written once the
    answer is in. Used by :class:`RobotsTxtMiddleware` for its robots.txt fetches.

    Settings: ``REDIS_URL``, the per-site budget settings (``DISTCRAWL_SITE_RATE``, ...),
    ``DISTCRAWL_ROBOTS_TTL``. Keys: ``{spider}:robots:<site>`` (HASH status, body; or the
    failure: failed, attempts, retry_at, gave_up) and ``{spider}:robots:<site>:lock``.
    """

    def __init__(self, *, crawler: Crawler, redis_url: str, budget: SiteBudget, ttl: int) -> None:
        self.crawler = crawler
        self.redis_url = redis_url
        self.budget = budget
        self.ttl = ttl
        self._client: Any = None
        self._store: FrontierStore | None = None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        s = crawler.settings
        return cls(
            crawler=crawler,
            redis_url=connection.settings_url(s),
            budget=SiteBudget.from_settings(s),
            ttl=SETTINGS.value(s, "DISTCRAWL_ROBOTS_TTL"),
        )

    def _frontier(self) -> FrontierStore:
        if self._store is None:
            spider = self.crawler.spider
            assert spider is not None
            self._client = connection.async_client(self.redis_url, socket_timeout=10)
            keys = FrontierKeys.for_spider(spider.name, self.crawler.settings)
            self._store = FrontierStore(self._client, keys)
        return self._store

    @staticmethod
    def is_robots(request: Request) -> bool:
        """Whether ``request`` is a robots.txt fetch (not checked against robots.txt itself)."""
        return bool(request.meta.get("dont_obey_robotstxt")) and (
            urlparse_cached(request).path == "/robots.txt"
        )

    def _key(self, request: Request) -> str:
        return self._frontier().keys.robots(urlparse_cached(request).netloc)

    async def lookup(self, request: Request) -> Response | None:
        """The shared answer to the robots.txt request ``request``, or None: fetch it (this
        node holds the site's lock then, or waited for another node's fetch in vain, and it
        charged the fetch to the site's budget)."""
        store = self._frontier()
        key = self._key(request)
        site = urlparse_cached(request).hostname or ""
        stats = self.crawler.stats
        assert stats is not None
        try:
            shared = await self._shared(request, key)
            if shared is not None:
                stats.inc_value(stat_keys.ROBOTSTXT_SHARED)
                return shared
            # one node fetches; the others wait for its answer rather than fetch it again
            lock = store.keys.robots_lock(urlparse_cached(request).netloc)
            if not await self._client.set(lock, "1", nx=True, px=int(DEFAULT_LOCK_WAIT * 1000)):
                loop = asyncio.get_running_loop()
                deadline = loop.time() + DEFAULT_LOCK_WAIT
                while loop.time() < deadline:
                    await asyncio.sleep(0.05)
                    shared = await self._shared(request, key)
                    if shared is not None:
                        stats.inc_value(stat_keys.ROBOTSTXT_SHARED)
                        return shared
            # charged to the site's budget at once (into debt), unless the site said
            # Retry-After: then robots.txt waits as every other request of the site does
            while (wait_ms := await store.take_token(site, self.budget, debt=True)) > 0:
                await asyncio.sleep(min(wait_ms / 1000, _HOLD_STEP))
        except connection.REDIS_FAILURES as exc:
            logger.warning("robots.txt of %s fetched without the cluster's copy: %s", site, exc)
        return None

    async def _shared(self, request: Request, key: str) -> Response | None:
        """The shared answer, or None to fetch it; raises :class:`RobotsUnavailable` while
        another node's failure says robots.txt cannot be read now."""
        fields = await self._client.hgetall(key)
        status = fields.get(b"status")
        if status is not None:
            return Response(
                url=request.url,
                status=int(status),
                body=fields.get(b"body") or b"",
                request=request,
                flags=["shared"],
            )
        failure = SharedFailure.of(fields)
        if failure is not None:
            now_ms = self._frontier().server_time() * 1000
            if failure.gave_up_ms or failure.retry_at_ms > now_ms:
                raise RobotsUnavailable(failure)
        return None

    async def share(self, request: Request, response: Response) -> None:
        """Write ``response``, the answer to the robots.txt request ``request``, for the other
        nodes (not one read from there, nor one that says robots.txt cannot be read now)."""
        if not self.is_robots(request) or "shared" in response.flags:
            return
        # only an answer is shared; one that says robots.txt cannot be read is not
        if len(response.body) <= MAX_SHARED_BYTES and not _unavailable(response.status):
            key = self._key(request)
            try:
                pipe = self._client.pipeline(transaction=True)
                pipe.hset(key, mapping={"status": response.status, "body": response.body})
                pipe.hdel(key, *FAILURE_FIELDS)
                pipe.expire(key, self.ttl)
                await pipe.execute()
            except connection.REDIS_FAILURES as exc:
                logger.warning("robots.txt of %s not shared: %s", request.url, exc)


class RobotsTxtMiddleware(_ScrapyRobotsTxtMiddleware):
    """Scrapy's RobotsTxtMiddleware, reading robots.txt as RFC 9309 says.

    - Every request that arrives while a site's robots.txt is being fetched waits for it and
      is checked against it (Scrapy 2.19 hands all but the first of them None, "no robots.txt,
      everything allowed").
    - 2xx: the rules, and the Crawl-delay for the whole cluster; 4xx: no rules; 5xx, 429, a
      timeout or a connection error: robots.txt is unavailable, the site is held and robots.txt
      fetched again with backoff, then given up (:class:`~distcrawl.node.politeness.Politeness`).
      A robots.txt fetch is never retried at once, nor ever a dead letter.
    - Leased requests wait for their site's robots.txt in the scheduler's gate, not in a
      download slot; this middleware decides for the requests that come by another way (the
      node's own in solo mode, those kept in memory, a middleware's own download): a request
      of an unavailable robots.txt goes back to the frontier (or is dropped, if it is the
      downloader's own), one of a site given up on or set aside becomes a dead letter.

    - robots.txt is fetched once per cluster and shared through Redis
      (``DISTCRAWL_ROBOTS_SHARED``, :class:`SharedRobotsTxt`).

    Settings: as Scrapy's (``ROBOTSTXT_OBEY``, ``ROBOTSTXT_PARSER``, ``ROBOTSTXT_USER_AGENT``),
    the politeness settings (``DISTCRAWL_MAX_CRAWL_DELAY``, ...) and ``DISTCRAWL_ROBOTS_SHARED``.
    """

    def __init__(self, crawler: Crawler) -> None:
        super().__init__(crawler)
        check_robots_middleware(self)  # robot_parser() below reads Scrapy's private _parsers
        self.politeness = Politeness.of(crawler)
        self.rules = self.politeness.robots
        self.politeness.robots_parser = self.robot_parser
        shared = SETTINGS.value(crawler.settings, "DISTCRAWL_ROBOTS_SHARED")
        self.shared = SharedRobotsTxt.from_crawler(crawler) if shared else None
        #: robots.txt requests of this middleware's fetches, looked up in the cluster's copy
        #: before they were sent: the shared answer, or None (fetch it)
        self._looked_up: dict[Request, Response | None] = {}

    async def process_request(self, request: Request, spider: Spider | None = None) -> Any:
        if request.meta.get("dont_obey_robotstxt"):
            shared = self.shared
            if shared is not None and shared.is_robots(request):
                if request in self._looked_up:
                    return self._looked_up.pop(request)
                # another robots.txt request (a redirect's, a spider's own)
                return await shared.lookup(request)
            return None
        if request.url.startswith("data:") or request.url.startswith("file:"):
            return None
        parser = await self.robot_parser(request)
        entry = self.rules.get(urlparse_cached(request).netloc)
        if entry is not None and entry.state is not RobotsState.READ:
            return self._unavailable(request, entry.state)
        if entry is not None and entry.set_aside:
            self._give_up(request, reasons.CRAWL_DELAY_OVER_MAX)
        self.process_request_2(parser, request)
        return None

    def _unavailable(self, request: Request, state: RobotsState) -> Request:
        if state is RobotsState.GIVEN_UP:
            self._give_up(request, reasons.ROBOTS_UNAVAILABLE)
        if request.callback is NO_CALLBACK:
            raise IgnoreRequest("robots.txt unavailable")
        # back through the scheduler to the frontier, where the site is held
        return request.replace(dont_filter=True)

    def _give_up(self, request: Request, reason: str) -> None:
        self._stats.inc_value(stat_keys.SET_ASIDE(reason))
        if request.callback is not NO_CALLBACK:
            self.crawler.signals.send_catch_log(
                dc_signals.request_dead_lettered, request=request, reason=reason, attempts=0
            )
        raise IgnoreRequest(f"set aside: {reason}")

    async def robot_parser(self, request: Request) -> RobotParser | None:
        netloc = urlparse_cached(request).netloc
        while True:
            current = self._parsers.get(netloc)
            if isinstance(current, Deferred):
                await maybe_deferred_to_future(current)
                continue  # the fetch is over: its parser is in _parsers now
            if netloc not in self._parsers or self.rules.fetch_due(netloc):
                await self._fetch(request, netloc)
                continue
            return current

    def _useragent(self, request: Request) -> str | bytes:
        agent: str | bytes | None = self._robotstxt_useragent
        if not agent:
            agent = request.headers.get(b"User-Agent", self._default_useragent)
        assert agent is not None
        return agent

    async def _fetch(self, request: Request, netloc: str) -> None:
        """Fetch and read robots.txt of ``netloc``; requests that come by meanwhile wait."""
        done: Deferred[RobotParser | None] = Deferred()
        self._parsers[netloc] = done
        url = urlparse_cached(request)
        site = url.hostname or ""
        rules = self.rules
        rules.fetching(netloc, site)
        await rules.forgotten(netloc)
        robots = Request(
            f"{url.scheme}://{netloc}/robots.txt",
            priority=self.DOWNLOAD_PRIORITY,
            # never retried at once: an unavailable robots.txt holds the site and is fetched
            # again with backoff
            meta={"dont_obey_robotstxt": True, "dont_retry": True},
            callback=NO_CALLBACK,
        )
        parser: RobotParser | None = None
        try:
            engine = self.crawler.engine
            assert engine is not None
            try:
                if self.shared is not None:
                    # before the request meets the other middlewares (the address guard's DNS
                    # lookup): another node's answer, or its failure, stands for the fetch
                    self._looked_up[robots] = await self.shared.lookup(robots)
                response = await engine.download_async(robots)
            except RobotsUnavailable as exc:
                await rules.failed(netloc, site, "shared", exc.failure)
            except IgnoreRequest:
                # refused before download (the address guard, a safety limit): no rules, as on
                # Scrapy; its pages meet the same refusal and are counted there
                rules.no_rules(netloc, site)
            except Exception as exc:
                self._stats.inc_value(stat_keys.ROBOTSTXT_EXCEPTIONS(str(type(exc))))
                await rules.failed(netloc, site, reasons.exception_reason(exc))
            else:
                if self.shared is not None:
                    await self.shared.share(response.request or robots, response)
                self._stats.inc_value(stat_keys.ROBOTSTXT_RESPONSES)
                self._stats.inc_value(stat_keys.ROBOTSTXT_STATUS(str(response.status)))
                if _unavailable(response.status):
                    await rules.failed(netloc, site, reasons.http_reason(response.status))
                else:
                    # 4xx: no rules (RFC 9309), whatever page came with it
                    body = response.body if response.status < 400 else b""
                    parser = build_from_crawler(self._parserimpl, self.crawler, body)
                    await self.crawler.signals.send_catch_log_async(
                        signal=signals.robots_parsed, robotparser=parser, request=request
                    )
                    delay = parser.crawl_delay(self._useragent(request))
                    fresh = "shared" not in response.flags
                    await rules.read(netloc, site, delay, status=response.status, fresh=fresh)
        except Exception:
            logger.exception("robots.txt of %s could not be handled: read as no rules", netloc)
            rules.no_rules(netloc, site)
        finally:
            self._looked_up.pop(robots, None)
            self._stats.inc_value(stat_keys.ROBOTSTXT_REQUESTS)
            self._parsers[netloc] = parser
            done.callback(None)
