"""Spiders used only by tests, loaded with
``SPIDER_MODULES=distcrawl.node.spiders,probe_spiders``."""

from __future__ import annotations

from typing import Any

from distcrawl.node.spiders.catalog import CatalogSpider


class RaisingCatalogSpider(CatalogSpider):
    """The catalog spider, except that its callback raises on some product pages."""

    name = "catalog_raising"
    redis_key = "catalog_raising:start_urls"

    def parse(self, response: Any, **kwargs: Any) -> Any:
        if "/p/1" in response.url:
            raise RuntimeError(f"probe: callback raised on {response.url}")
        yield from super().parse(response, **kwargs)


class NoRetryHookSpider(CatalogSpider):
    """The catalog spider in a process whose Scrapy lost ``RetryMiddleware._retry``, as an
    upgrade that renamed it would (the hook is removed before the middlewares are built)."""

    name = "catalog_no_retry_hook"
    redis_key = "catalog_no_retry_hook:start_urls"

    @classmethod
    def from_crawler(cls, crawler: Any, *args: Any, **kwargs: Any) -> Any:
        from scrapy.downloadermiddlewares.retry import RetryMiddleware

        del RetryMiddleware._retry
        return super().from_crawler(crawler, *args, **kwargs)
