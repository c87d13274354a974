"""The catalog spider: tells page kinds apart, follows them by priority, yields products.

Seeds come from the Redis list ``catalog:start_urls`` through the frontier (plain URLs or
JSON ``{"url", "priority", "meta"}``); the spider only turns a checked seed into a request.
Each seed's site (its host) bounds the crawl that starts from it.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import scrapy
from scrapy import signals
from scrapy.http import TextResponse

from distcrawl.base.config import SETTINGS
from distcrawl.base.names import stats as stat_keys
from distcrawl.base.recent import RecentKeys
from distcrawl.extract import SiteProfile, analyze, load_profiles
from distcrawl.extract.profile import ProfileError
from distcrawl.node import signals as dc_signals
from distcrawl.node.items import Product
from distcrawl.node.revisit.unlisted import LISTED_META

if TYPE_CHECKING:
    from typing import Self

    from scrapy.crawler import Crawler
    from scrapy.http import Response

    from distcrawl.node.seeds.parse import Seed

__all__ = ["CatalogSpider"]

#: the link kinds the spider follows, and the page kind each one leads to
LINK_KINDS = {"category": "category", "listing": "listing", "next": "listing", "product": "product"}

logger = logging.getLogger(__name__)


def profile_paths(value: Any) -> list[str]:
    """``DISTCRAWL_SITE_PROFILES`` as paths: a list, or one string whose entries are
    separated by ``,`` or ``:``."""
    paths: list[str] = SETTINGS["DISTCRAWL_SITE_PROFILES"].read(value)
    return paths


class CatalogSpider(scrapy.Spider):
    """Crawls product catalogs: category index pages, paginated listings, product pages.

    Settings: ``DISTCRAWL_SITE_PROFILES`` (TOML files or folders), ``PAGE_PRIORITIES``
    (queue priority per page kind: pages that unlock many children go first),
    ``CATALOG_KNOWN_LINKS``.
    """

    name = "catalog"
    #: the scrapy-redis name of the seed list (the frontier reads it)
    redis_key = "catalog:start_urls"
    #: a seed marks its URL seen: every page of a shop links back to its home page, which
    #: would otherwise be fetched again (a seed still bypasses the dupefilter: a re-seed is
    #: fetched again)
    custom_settings = {"DISTCRAWL_RECORD_DONT_FILTER": True}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.profiles: list[SiteProfile] = []
        self.priorities: dict[str, int] = SETTINGS.default("PAGE_PRIORITIES")
        self.known_links = RecentKeys(SETTINGS.default("CATALOG_KNOWN_LINKS"))

    @classmethod
    def from_crawler(cls, crawler: Crawler, *args: Any, **kwargs: Any) -> Self:
        spider = super().from_crawler(crawler, *args, **kwargs)
        settings = crawler.settings
        paths = SETTINGS.value(settings, "DISTCRAWL_SITE_PROFILES")
        try:
            spider.profiles = load_profiles(paths) if paths else []
        except ProfileError as exc:
            # one line with the fix, not a traceback; nothing is leased yet, nothing is lost
            logger.error(
                "Bad site profile, the node stops (fix it or DISTCRAWL_SITE_PROFILES): %s", exc
            )
            raise SystemExit(1) from None
        if spider.profiles:
            logger.info(
                "Site profiles loaded: %s",
                ", ".join(
                    f"{p.name} ({', '.join(p.domains) or 'any site'})" for p in spider.profiles
                ),
            )
        spider.priorities = SETTINGS.value(settings, "PAGE_PRIORITIES")
        spider.known_links = RecentKeys(SETTINGS.value(settings, "CATALOG_KNOWN_LINKS"))
        crawler.signals.connect(spider._scheduled, signal=signals.request_scheduled)
        # links pushed before Redis lost its last writes may be gone: push them again
        crawler.signals.connect(spider.known_links.clear, signal=dc_signals.frontier_rewound)
        # [revisit] ... and when the shared dupefilter forgets them, so a listing's links to
        # forgotten pages are pushed again
        crawler.signals.connect(spider.known_links.clear, signal=dc_signals.frontier_forgot)
        return spider

    def _scheduled(self, request: scrapy.Request, spider: scrapy.Spider) -> None:
        # The navigation of a shop links to the same pages from every page. A plain GET that
        # reached the scheduler is now the dupefilter's: an identical one would be filtered
        # there, so the spider need not build it again and walk it through every middleware.
        # (Links dropped on the way, by depth or offsite rules, are not remembered.)
        if not request.dont_filter and request.method == "GET" and not request.body:
            self.known_links.add(request.url)

    async def start(self) -> AsyncIterator[Any]:
        # Seeds arrive through the frontier from Redis, never from here.
        return
        yield

    def make_request_from_seed(self, seed: Seed) -> scrapy.Request:
        """The request for a checked seed; its meta travels with every page it leads to."""
        priority = seed.priority if seed.priority is not None else self.priorities["seed"]
        meta = dict(seed.meta)
        meta.setdefault("site", urlsplit(seed.url).hostname)
        meta.setdefault("page_kind", "seed")
        meta.setdefault("seed_meta", dict(seed.meta))
        return scrapy.Request(
            seed.url, callback=self.parse, priority=priority, meta=meta, dont_filter=True
        )

    def parse(self, response: Response, **kwargs: Any) -> Iterator[Any]:
        stats = self.crawler.stats
        assert stats is not None
        if not isinstance(response, TextResponse):
            stats.inc_value(stat_keys.PAGES_NOT_HTML)
            self.logger.info("Skipped %s: not an HTML page (%s)", response.url, _ctype(response))
            return
        profile = SiteProfile.match(self.profiles, response.url)
        page = analyze(
            url=response.url, body=response.body, encoding=response.encoding, profile=profile
        )
        stats.inc_value(stat_keys.PAGES(page.kind))
        for error in page.errors:
            self.logger.debug("Page %s: %s", response.url, error)
        site = response.meta.get("site") or urlsplit(response.url).hostname
        if page.kind == "product" and page.product:
            yield Product(
                **page.product,
                site=site,
                source_url=response.url,
                crawled_at=datetime.now(UTC),
            )
        if page.kind == "listing":
            # [revisit] the products this listing links (the frontier tells which it dropped)
            response.meta[LISTED_META] = list(page.links.get("product", ()))
        inherited = {
            k: v for k, v in response.meta.items() if k in ("site",) or k.startswith("seed_")
        }
        known = self.known_links
        repeated = 0
        for link_kind, page_kind in LINK_KINDS.items():
            for url in page.links.get(link_kind, ()):
                if url in known:
                    repeated += 1
                    continue
                if urlsplit(url).hostname != site:
                    stats.inc_value(stat_keys.LINKS_OFFSITE)
                    continue
                yield scrapy.Request(
                    url,
                    callback=self.parse,
                    priority=self.priorities.get(page_kind, 0),
                    meta={**inherited, "page_kind": page_kind},
                )
        if repeated:
            stats.inc_value(stat_keys.LINKS_KNOWN, repeated)


def _ctype(response: Response) -> str:
    value = response.headers.get(b"Content-Type") or b"unknown type"
    return value.decode("latin-1")[:80]
