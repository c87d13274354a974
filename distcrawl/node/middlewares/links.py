"""Links of a site whose page budget is used up are dropped before they are queued, not after
each one cost a lease and an ack.

A spider middleware: it sees every request a callback yields (links), not retries, redirects or
seeds. Drops are counted as ``safety/links_dropped/page_budget``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from scrapy import Request
from scrapy.spidermiddlewares.base import BaseSpiderMiddleware
from scrapy.utils.httpobj import urlparse_cached

from distcrawl.base.names import reasons
from distcrawl.base.names import stats as stat_keys
from distcrawl.node.middlewares.safety import PageLimitsMiddleware

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterable

    from scrapy import Spider
    from scrapy.crawler import Crawler
    from scrapy.http import Response

__all__ = ["LinkBudgetMiddleware"]


class LinkBudgetMiddleware(BaseSpiderMiddleware):
    """Drops the links of a site whose page budget (``DISTCRAWL_MAX_PAGES_PER_SITE``, kept by
    :class:`~distcrawl.node.middlewares.safety.PageLimitsMiddleware`) is used up, as that
    middleware knows it: a hostile page of such a site costs nothing more than its parse.
    ``budget``: that middleware (default: the crawler's own, looked up at the first page)."""

    def __init__(self, crawler: Crawler, budget: PageLimitsMiddleware | None = None) -> None:
        super().__init__(crawler)
        self._budget = budget

    def _page_limits(self) -> PageLimitsMiddleware | None:
        if self._budget is None:
            self._budget = self.crawler.get_downloader_middleware(PageLimitsMiddleware)
        return self._budget

    def process_spider_output(
        self, response: Response | None, result: Iterable[Any], spider: Spider | None = None
    ) -> Iterable[Any]:
        budget = self._page_limits()
        dropped = 0
        for o in result:
            if budget is not None and self._used_up(budget, o):
                dropped += 1
                continue
            yield o
        self._count(dropped)

    async def process_spider_output_async(
        self,
        response: Response | None,
        result: AsyncIterator[Any],
        spider: Spider | None = None,
    ) -> AsyncIterator[Any]:
        budget = self._page_limits()
        dropped = 0
        async for o in result:
            if budget is not None and self._used_up(budget, o):
                dropped += 1
                continue
            yield o
        self._count(dropped)

    @staticmethod
    def _used_up(budget: PageLimitsMiddleware, o: Any) -> bool:
        return isinstance(o, Request) and budget.used_up(urlparse_cached(o).hostname or "")

    def _count(self, dropped: int) -> None:
        if dropped:
            assert self.crawler.stats is not None
            self.crawler.stats.inc_value(stat_keys.LINKS_DROPPED(reasons.PAGE_BUDGET), dropped)
