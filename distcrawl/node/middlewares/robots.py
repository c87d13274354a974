"""robots.txt once per site for the whole cluster, charged to the site's shared budget.

Scrapy's RobotsTxtMiddleware fetches ``/robots.txt`` once per site on every node, straight
through the downloader, never through the scheduler: a site limited to R requests/s would see
R plus one robots.txt fetch per node in the first second. Here the first node to need a site's
robots.txt fetches it (spending a token of the site's budget, without waiting: the node holds
that site's leased requests until robots.txt is in, and a wait would release them as one
burst) and shares the answer through Redis; every other node reads it from there.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from scrapy.downloadermiddlewares.robotstxt import (
    RobotsTxtMiddleware as _ScrapyRobotsTxtMiddleware,
)
from scrapy.http import Response
from scrapy.utils.httpobj import urlparse_cached
from twisted.internet.defer import Deferred

from distcrawl.base.config import SETTINGS
from distcrawl.base.names import stats as stat_keys
from distcrawl.frontier import connection
from distcrawl.frontier.store import FrontierKeys, FrontierStore, SiteBudget
from distcrawl.node.internals import check_robots_middleware

if TYPE_CHECKING:
    from typing import Self

    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.robotstxt import RobotParser

__all__ = ["RobotsTxtMiddleware", "SharedRobotsTxt"]

logger = logging.getLogger(__name__)

#: seconds a node waits for another node's robots.txt fetch before fetching it itself
DEFAULT_LOCK_WAIT = 10.0
#: a robots.txt larger than this is not shared (Scrapy would fetch it anyway)
MAX_SHARED_BYTES = 512 * 1024


class SharedRobotsTxt:
    """Downloader middleware for robots.txt requests: fetched once per cluster, shared.

    Settings: ``REDIS_URL``, the per-site budget settings (``DISTCRAWL_SITE_RATE``, ...),
    ``DISTCRAWL_ROBOTS_TTL``. Its order must be below the RobotsTxtMiddleware's (it is 50).
    Keys: ``{spider}:robots:<site>`` (HASH status, body) and ``{spider}:robots:<site>:lock``.
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
    def _is_robots(request: Request) -> bool:
        return bool(request.meta.get("dont_obey_robotstxt")) and (
            urlparse_cached(request).path == "/robots.txt"
        )

    def _key(self, request: Request) -> str:
        return self._frontier().keys.robots(urlparse_cached(request).netloc)

    async def process_request(self, request: Request) -> Response | None:
        if not self._is_robots(request):
            return None
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
            await store.take_token(site, self.budget)
        except connection.REDIS_FAILURES as exc:
            logger.warning("robots.txt of %s fetched without the cluster's copy: %s", site, exc)
        return None

    async def _shared(self, request: Request, key: str) -> Response | None:
        status, body = await self._client.hmget(key, "status", "body")
        if status is None:
            return None
        return Response(
            url=request.url, status=int(status), body=body or b"", request=request, flags=["shared"]
        )

    async def process_response(self, request: Request, response: Response) -> Response:
        if not self._is_robots(request) or "shared" in response.flags:
            return response
        if len(response.body) <= MAX_SHARED_BYTES:
            key = self._key(request)
            try:
                pipe = self._client.pipeline(transaction=True)
                pipe.hset(key, mapping={"status": response.status, "body": response.body})
                pipe.expire(key, self.ttl)
                await pipe.execute()
            except connection.REDIS_FAILURES as exc:
                logger.warning("robots.txt of %s not shared: %s", request.url, exc)
        return response


class RobotsTxtMiddleware(_ScrapyRobotsTxtMiddleware):
    """Scrapy's RobotsTxtMiddleware, obeyed also by requests that wait for the robots.txt fetch.

    Scrapy 2.19 lets every request that arrives while a site's robots.txt is being fetched await
    one shared Deferred; the first one takes its result and every other one gets None, which
    reads as "no robots.txt, everything allowed" (so a crawl's first burst of requests ignores
    robots.txt). Such a request looks the parser up again once the fetch is over.

    Settings: as Scrapy's (``ROBOTSTXT_OBEY``, ``ROBOTSTXT_PARSER``, ``ROBOTSTXT_USER_AGENT``).
    """

    def __init__(self, crawler: Crawler) -> None:
        super().__init__(crawler)
        check_robots_middleware(self)  # robot_parser() below reads Scrapy's private _parsers

    async def robot_parser(self, request: Request) -> RobotParser | None:
        parser = await super().robot_parser(request)
        if parser is None:
            again = self._parsers.get(urlparse_cached(request).netloc)
            if again is not None and not isinstance(again, Deferred):
                return again
        return parser
