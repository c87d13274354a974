"""The spider shapes of scrapy-redis' example project (example-project/example/spiders),
pointed at the demo shop: a CrawlSpider following every link, a RedisSpider reading its
redis_key, and a RedisCrawlSpider restricted with ``-a domain=``; and that RedisCrawlSpider's
rules in a plain CrawlSpider, as a distcrawl project seeds it (``catalog:start_urls``)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from scrapy.linkextractors import LinkExtractor
from scrapy.spiders import CrawlSpider, Rule
from scrapy_redis.spiders import RedisCrawlSpider, RedisSpider


def _page(response: Any) -> dict[str, Any]:
    return {"name": response.css("title::text").get(), "url": response.url}


class DmozLikeSpider(CrawlSpider):
    """dmoz.py: a plain CrawlSpider (start_urls, here from ``-a start_url=``)."""

    name = "example_crawl"
    rules = [Rule(LinkExtractor(), callback="parse_directory", follow=True)]

    def __init__(self, *args: Any, start_url: str = "", **kwargs: Any) -> None:
        self.start_urls = [start_url] if start_url else []
        super().__init__(*args, **kwargs)

    def parse_directory(self, response: Any) -> Any:
        yield _page(response)


class MySpider(RedisSpider):
    """myspider_redis.py"""

    name = "myspider_redis"
    redis_key = "myspider:start_urls"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        domain = kwargs.pop("domain", "")
        self.allowed_domains = list(filter(None, domain.split(",")))
        super().__init__(*args, **kwargs)

    def parse(self, response: Any, **kwargs: Any) -> Any:
        return _page(response)


class MyCrawler(RedisCrawlSpider):
    """mycrawler_redis.py"""

    name = "mycrawler_redis"
    redis_key = "mycrawler:start_urls"
    rules = (Rule(LinkExtractor(), callback="parse_page", follow=True),)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        domain = kwargs.pop("domain", "")
        self.allowed_domains = list(filter(None, domain.split(",")))
        super().__init__(*args, **kwargs)

    def parse_page(self, response: Any) -> Any:
        return _page(response)


class SeededCrawler(CrawlSpider):
    """mycrawler_redis.py as a plain CrawlSpider of a distcrawl project: its seeds come from
    the frontier's seed list (``DISTCRAWL_START_URLS_KEY``), not from a ``redis_key``."""

    name = "seeded_crawler"
    rules = MyCrawler.rules

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        domain = kwargs.pop("domain", "")
        self.allowed_domains = list(filter(None, domain.split(",")))
        super().__init__(*args, **kwargs)

    def parse_page(self, response: Any) -> Any:
        return _page(response)


class BadMetaCrawler(DmozLikeSpider):
    """The CrawlSpider, except that its rule puts a datetime into the meta of one link."""

    name = "example_badmeta"
    rules = [Rule(LinkExtractor(), callback="parse_directory", follow=True, process_request="mark")]

    def mark(self, request: Any, response: Any) -> Any:
        if request.url.endswith("/c/toys/"):
            request.meta["when"] = datetime.now(UTC)
        return request
