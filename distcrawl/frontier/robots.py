"""robots.txt fetches spend the site's shared budget too.

Scrapy's RobotsTxtMiddleware fetches ``/robots.txt`` once per site on every node, straight
through the downloader, never through the scheduler. Without this middleware a site limited
to R requests/s would see R plus one robots.txt fetch per node in the first second. The fetch
spends a token without waiting (the budget goes into debt, which the queue pays back): the
node holds the site's leased requests until robots.txt is in, and a wait here would release
them as one burst.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import redis.asyncio as aioredis
from redis.exceptions import RedisError
from scrapy.utils.httpobj import urlparse_cached

from distcrawl.frontier.store import FrontierKeys, FrontierStore, SiteBudget

if TYPE_CHECKING:
    from typing import Self

    from scrapy import Request, Spider
    from scrapy.crawler import Crawler

__all__ = ["RobotsTxtBudget"]

logger = logging.getLogger(__name__)


class RobotsTxtBudget:
    """Downloader middleware: a robots.txt request spends a token of its site's budget.

    Settings: ``REDIS_URL`` and the per-site budget settings (``DISTCRAWL_SITE_RATE``, ...).
    Place it before Scrapy's downloader middlewares (its order in the settings is 50).
    """

    def __init__(self, *, crawler: Crawler, redis_url: str, budget: SiteBudget) -> None:
        self.crawler = crawler
        self.redis_url = redis_url
        self.budget = budget
        self._client: Any = None
        self._stores: dict[str, FrontierStore] = {}

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        s = crawler.settings
        return cls(
            crawler=crawler,
            redis_url=s.get("REDIS_URL") or "redis://127.0.0.1:6379/0",
            budget=SiteBudget.from_settings(s),
        )

    def _store(self, spider: Spider) -> FrontierStore:
        if self._client is None:
            self._client = aioredis.from_url(self.redis_url, socket_timeout=10)
        store = self._stores.get(spider.name)
        if store is None:
            keys = FrontierKeys(spider=spider.name, start_urls=f"{spider.name}:start_urls")
            store = self._stores[spider.name] = FrontierStore(self._client, keys)
        return store

    async def process_request(self, request: Request) -> None:
        spider = self.crawler.spider
        assert spider is not None
        parsed = urlparse_cached(request)
        if parsed.path != "/robots.txt" or not request.meta.get("dont_obey_robotstxt"):
            return None
        site = parsed.hostname or ""
        try:
            await self._store(spider).take_token(site, self.budget)
        except RedisError as exc:
            logger.warning("robots.txt of %s fetched without spending a token: %s", site, exc)
        return None
