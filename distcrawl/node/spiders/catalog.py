"""The catalog spider: tells page kinds apart, follows them by priority, yields products.

Seeds come from the Redis list ``catalog:start_urls`` through the frontier (plain URLs or
JSON ``{"url", "priority", "meta"}``); the spider only turns a checked seed into a request.
Each seed's site (its host) bounds the crawl that starts from it.

A hostile page costs a bounded amount of work: its first ``DISTCRAWL_MAX_PARSE_BYTES`` are
read, its first ``DISTCRAWL_MAX_LINKS_PER_PAGE`` links, for at most
``DISTCRAWL_MAX_PARSE_SECONDS``; and a large page is analysed on a worker thread, so the node's
event loop (its heartbeats, its Redis I/O, its downloads) goes on meanwhile.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from functools import partial
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import scrapy
from scrapy import signals
from scrapy.http import TextResponse

from distcrawl.base.config import SETTINGS
from distcrawl.base.names import reasons
from distcrawl.base.names import stats as stat_keys
from distcrawl.base.recent import RecentKeys
from distcrawl.extract import SiteProfile, analyze, load_profiles
from distcrawl.extract.page import PageAnalysis
from distcrawl.extract.profile import ProfileError
from distcrawl.node import signals as dc_signals
from distcrawl.node.items import Product
from distcrawl.node.observe.buffer import Observations
from distcrawl.node.observe.capture import extraction_missed
from distcrawl.node.revisit.unlisted import LISTED_META

if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine
    from typing import Self

    from scrapy.crawler import Crawler
    from scrapy.http import Response

    from distcrawl.node.seeds.parse import Seed

__all__ = ["CatalogSpider"]

#: the link kinds the spider follows, and the page kind each one leads to, most valuable first
#: (a page whose links are cut keeps its pagination and products before its categories)
LINK_KINDS = {"next": "listing", "product": "product", "listing": "listing", "category": "category"}
#: a body of this many bytes or more is analysed on the worker thread, off the event loop
PARSE_THREAD_BYTES = 256 * 1024

logger = logging.getLogger(__name__)

#: the worker thread of large pages (one: their analyses queue, and so does their memory)
_worker: ThreadPoolExecutor | None = None


def _parse_worker() -> ThreadPoolExecutor:
    global _worker
    if _worker is None:
        _worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="distcrawl-parse")
    return _worker


def profile_paths(value: Any) -> list[str]:
    """``DISTCRAWL_SITE_PROFILES`` as paths: a list, or one string whose entries are
    separated by ``,`` or ``:``."""
    paths: list[str] = SETTINGS["DISTCRAWL_SITE_PROFILES"].read(value)
    return paths


class CatalogSpider(scrapy.Spider):
    """Crawls product catalogs: category index pages, paginated listings, product pages.

    Settings: ``DISTCRAWL_SITE_PROFILES`` (TOML files or folders), ``PAGE_PRIORITIES``
    (queue priority per page kind: pages that unlock many children go first),
    ``CATALOG_KNOWN_LINKS``, ``DISTCRAWL_MAX_PARSE_BYTES``, ``DISTCRAWL_MAX_LINKS_PER_PAGE``,
    ``DISTCRAWL_MAX_PARSE_SECONDS``, ``DISTCRAWL_MAX_FOLLOW_PER_PAGE`` (new links one page hands
    to the frontier, its most valuable first: pagination, products, listings, categories;
    navigation repeated on every page gets in page by page). Stats:
    ``safety/page_cut/<limit>`` (pages whose analysis a limit cut short: ``too_many_bytes``,
    ``too_many_links``, ``parse_time``), ``safety/links_unread``,
    ``safety/links_dropped/too_many_links`` (new links beyond the page's share),
    ``catalog/pages/off_loop`` (pages analysed on the worker thread).
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
        self.max_parse_bytes: int = SETTINGS.default("DISTCRAWL_MAX_PARSE_BYTES")
        self.max_links: int = SETTINGS.default("DISTCRAWL_MAX_LINKS_PER_PAGE")
        self.max_parse_seconds: float = SETTINGS.default("DISTCRAWL_MAX_PARSE_SECONDS")
        self.max_follow: int = SETTINGS.default("DISTCRAWL_MAX_FOLLOW_PER_PAGE")
        #: where a product page without a product, or without an expected field, is told
        self.observations: Observations | None = None

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
        spider.max_parse_bytes = SETTINGS.value(settings, "DISTCRAWL_MAX_PARSE_BYTES")
        spider.max_links = SETTINGS.value(settings, "DISTCRAWL_MAX_LINKS_PER_PAGE")
        spider.max_parse_seconds = SETTINGS.value(settings, "DISTCRAWL_MAX_PARSE_SECONDS")
        spider.max_follow = SETTINGS.value(settings, "DISTCRAWL_MAX_FOLLOW_PER_PAGE")
        spider.observations = Observations.of(crawler)
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

    def parse(
        self, response: Response, **kwargs: Any
    ) -> Iterator[Any] | Coroutine[Any, Any, Iterator[Any]]:
        """The page's product and links: at once for a small page, through the worker thread
        for a large one (a coroutine, which Scrapy awaits: the event loop runs meanwhile)."""
        stats = self.crawler.stats
        assert stats is not None
        if not isinstance(response, TextResponse):
            stats.inc_value(stat_keys.PAGES_NOT_HTML)
            self.logger.info("Skipped %s: not an HTML page (%s)", response.url, _ctype(response))
            return iter(())
        analyse = partial(
            analyze,
            url=response.url,
            body=response.body,
            encoding=response.encoding,
            profile=SiteProfile.match(self.profiles, response.url),
            max_bytes=self.max_parse_bytes,
            max_links=self.max_links,
            max_seconds=self.max_parse_seconds,
        )
        if len(response.body) >= PARSE_THREAD_BYTES:
            return self._parse_off_loop(response, analyse)
        return self._follow(response, analyse())

    async def _parse_off_loop(
        self, response: Response, analyse: Callable[[], PageAnalysis]
    ) -> Iterator[Any]:
        assert self.crawler.stats is not None
        self.crawler.stats.inc_value(stat_keys.PAGES_OFF_LOOP)
        page = await asyncio.get_running_loop().run_in_executor(_parse_worker(), analyse)
        return self._follow(response, page)

    def _follow(self, response: Response, page: PageAnalysis) -> Iterator[Any]:
        stats = self.crawler.stats
        assert stats is not None
        stats.inc_value(stat_keys.PAGES(page.kind))
        for error in page.errors:
            self.logger.debug("Page %s: %s", response.url, error)
        if page.cut:
            for limit in page.cut:
                stats.inc_value(stat_keys.PAGE_CUT(limit))
            if page.links_unread:
                stats.inc_value(stat_keys.LINKS_UNREAD, page.links_unread)
            self.logger.warning(
                "Page %s cut short (%s): %d links left unread (DISTCRAWL_MAX_PARSE_BYTES, "
                "DISTCRAWL_MAX_LINKS_PER_PAGE, DISTCRAWL_MAX_PARSE_SECONDS)",
                response.url,
                ", ".join(page.cut),
                page.links_unread,
            )
        site = response.meta.get("site") or urlsplit(response.url).hostname
        if page.kind == "product":
            observations = self.observations
            if observations is not None:
                missing = observations.missing_fields(page.product) if page.product else []
                if missing or not page.product:
                    extraction_missed(observations, response, str(site or ""), missing)
            if page.product:
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
        repeated = followed = dropped = 0
        for link_kind, page_kind in LINK_KINDS.items():
            for url in page.links.get(link_kind, ()):
                if url in known:
                    repeated += 1
                    continue
                if urlsplit(url).hostname != site:
                    stats.inc_value(stat_keys.LINKS_OFFSITE)
                    continue
                if self.max_follow and followed >= self.max_follow:
                    dropped += 1  # no request built: a dense page costs its parse, no more
                    continue
                followed += 1
                yield scrapy.Request(
                    url,
                    callback=self.parse,
                    priority=self.priorities.get(page_kind, 0),
                    meta={**inherited, "page_kind": page_kind},
                )
        if repeated:
            stats.inc_value(stat_keys.LINKS_KNOWN, repeated)
        if dropped:
            stats.inc_value(stat_keys.LINKS_DROPPED(reasons.TOO_MANY_LINKS), dropped)
            self.logger.warning(
                "Page %s: followed %d of its %d new links, dropped the rest "
                "(DISTCRAWL_MAX_FOLLOW_PER_PAGE)",
                response.url,
                followed,
                followed + dropped,
            )


def _ctype(response: Response) -> str:
    value = response.headers.get(b"Content-Type") or b"unknown type"
    return value.decode("latin-1")[:80]
