"""Revisits that need no parsing: a page answering ``304 Not Modified`` (it is as it was when
last fetched) and a product page answering ``404`` / ``410`` (the product is gone) become a
:class:`~distcrawl.node.items.Revisit` item, which the MongoDB pipeline turns into an update of
``last_seen`` or ``gone_at`` (:mod:`distcrawl.storage.documents`).

A spider middleware ordered before Scrapy's ``HttpErrorMiddleware`` (which would drop those
answers): the callback never sees them. A 304 of a page known not to be a product page
(``meta["page_kind"]`` of ``category``, ``listing``, ``seed``) is counted and nothing else; a
404/410 counts only on a product page (``meta["page_kind"] == "product"``); other 404s go on
to ``HttpErrorMiddleware`` as before. A request with an errback gets the answer there first,
as Scrapy does with every exception raised here.

A product page whose product no listing links any more (the frontier flags its request,
:mod:`distcrawl.node.revisit.unlisted`) becomes a gone revisit too, whatever it answered.

Settings: ``DISTCRAWL_GONE_STATUSES`` (default ``[404, 410]``).
Stats: ``freshness/not_modified`` (304 answers), ``freshness/gone`` (product pages gone),
``freshness/unlisted`` (products gone for want of a listing), ``revisit_scraped_count``
(revisit items stored: Scrapy's ``item_scraped_count`` counts products only).
"""

from __future__ import annotations

import datetime as dt
import logging
from typing import TYPE_CHECKING, Any

from scrapy import signals

from distcrawl.base.config import SETTINGS
from distcrawl.base.names import stats as stat_keys
from distcrawl.extract import canonicalize_url
from distcrawl.node.items import Revisit
from distcrawl.node.revisit.unlisted import UNLISTED_META

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence
    from typing import Self

    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from scrapy.statscollectors import StatsCollector

__all__ = ["FreshnessMiddleware"]

logger = logging.getLogger(__name__)

#: the answer to a conditional request whose validators still match
NOT_MODIFIED = 304


class _Revisited(Exception):
    """Raised in ``process_spider_input`` so that the callback is skipped; turned into the
    revisit's item in ``process_spider_exception``."""

    def __init__(self, status: int, *, unlisted: bool = False) -> None:
        super().__init__(f"revisit answered {status}")
        self.status = status
        self.unlisted = unlisted


class FreshnessMiddleware:
    """Turns 304 answers and gone product pages into :class:`~distcrawl.node.items.Revisit`
    items."""

    def __init__(self, *, stats: StatsCollector, gone_statuses: Sequence[int]) -> None:
        self.stats = stats
        self.gone_statuses = frozenset(int(status) for status in gone_statuses)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        assert crawler.stats is not None
        statuses = SETTINGS.value(crawler.settings, "DISTCRAWL_GONE_STATUSES")
        middleware = cls(stats=crawler.stats, gone_statuses=statuses)
        crawler.signals.connect(middleware._item_scraped, signal=signals.item_scraped)
        return middleware

    def _item_scraped(self, item: Any) -> None:
        # Scrapy's CoreStats counts every item in item_scraped_count: a revisit is no product
        if isinstance(item, Revisit):
            self.stats.inc_value(stat_keys.ITEM_SCRAPED, -1)
            self.stats.inc_value(stat_keys.REVISIT_SCRAPED)

    def process_spider_input(self, response: Response) -> None:
        status = response.status
        meta = response.meta
        if meta.get(UNLISTED_META) and meta.get("page_kind") == "product" and status < 400:
            raise _Revisited(status, unlisted=True)
        if status == NOT_MODIFIED or (
            status in self.gone_statuses and response.meta.get("page_kind") == "product"
        ):
            raise _Revisited(status)

    def process_spider_exception(
        self, response: Response, exception: Exception
    ) -> Iterable[Any] | None:
        if not isinstance(exception, _Revisited):
            return None
        status = exception.status
        if exception.unlisted:
            self.stats.inc_value(stat_keys.FRESHNESS_UNLISTED)
            logger.info("Product gone: %s is in no listing any more", response.url)
        elif status == NOT_MODIFIED:
            self.stats.inc_value(stat_keys.FRESHNESS_NOT_MODIFIED)
            if response.meta.get("page_kind", "product") != "product":
                return ()  # a listing or category page as it was: nothing to store
        else:
            self.stats.inc_value(stat_keys.FRESHNESS_GONE)
            logger.info("Product gone: %s answered %d", response.url, status)
        return [
            Revisit(
                url=canonicalize_url(response.url),
                status=status,
                seen_at=dt.datetime.now(dt.UTC),
                **({"unlisted": True} if exception.unlisted else {}),
            )
        ]
