"""The objects of a node's start-up kept out of the garbage collector's full passes.

A Scrapy process imports some 90,000 objects (modules, classes, functions, settings) that live
as long as it does. CPython's full collection walks every one of them each time the crawl's
own objects (requests, responses, items) have grown the oldest generation by a quarter: on the
demo shop, 25-35 full collections of 50-150 ms each over 10,000 pages, a fifth of a node's
time, for nothing collected. :class:`FreezeStartupObjects` calls ``gc.freeze()`` once the
spider is open: what exists then moves into a permanent generation the collector skips, and
what the crawl makes afterwards is collected as before. The price: a reference cycle among
those start-up objects that becomes garbage later is never freed (they are the process' own
code and configuration, which stay). A process freezes once: a second crawl opening in the
same process (``CrawlerProcess`` with several spiders) would freeze the first one's requests
and responses too, so nothing is frozen where something already is.
``DISTCRAWL_GC_FREEZE = False`` turns it off.
"""

from __future__ import annotations

import gc
import logging
from typing import TYPE_CHECKING

from scrapy import signals
from scrapy.exceptions import NotConfigured

from distcrawl.base.config import SETTINGS
from distcrawl.base.names import stats as stat_keys

if TYPE_CHECKING:
    from typing import Self

    from scrapy import Spider
    from scrapy.crawler import Crawler

__all__ = ["FreezeStartupObjects"]

logger = logging.getLogger(__name__)


class FreezeStartupObjects:
    """Scrapy extension: ``gc.freeze()`` once the spider is open (``DISTCRAWL_GC_FREEZE``)."""

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        if not SETTINGS.value(crawler.settings, "DISTCRAWL_GC_FREEZE"):
            raise NotConfigured("DISTCRAWL_GC_FREEZE is off")
        ext = cls(crawler)
        crawler.signals.connect(ext.spider_opened, signal=signals.spider_opened)
        return ext

    def spider_opened(self, spider: Spider) -> None:
        if gc.get_freeze_count():
            return  # this process froze already (another crawl, or the application itself)
        gc.collect()  # what start-up left as garbage goes first: frozen, it would stay
        gc.freeze()
        frozen = gc.get_freeze_count()
        assert self.crawler.stats is not None
        self.crawler.stats.set_value(stat_keys.GC_FROZEN, frozen)
        logger.debug("Froze %d start-up objects out of the garbage collector's passes", frozen)
