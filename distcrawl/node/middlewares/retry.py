"""Retries that back off, parked in the shared frontier, and dead letters for the last failure.

Extends Scrapy's RetryMiddleware (``RETRY_TIMES``, ``RETRY_HTTP_CODES``, ``RETRY_EXCEPTIONS``,
``RETRY_PRIORITY_ADJUST``, per-request ``max_retry_times`` / ``dont_retry`` all still apply).
A retry is not re-sent at once: it carries a delay in ``meta["distcrawl_delay"]`` and the
frontier parks it in Redis until it falls due, so any node may take it and a node that dies
while it waits loses nothing. When the last try fails, the request goes to the dead letters
with its reason (:mod:`distcrawl.base.names.reasons`): ``http_503`` for an answer, the
exception's class name (``DownloadConnectionRefusedError``) for a failure; its errback gets
the last download error, as on Scrapy. A download that timed out counts as a slow answer
of its site (:meth:`Politeness.timed_out`: an adaptive cut, and a node share it keeps to).
A request of the downloader's own (``NO_CALLBACK``: a
robots.txt fetch, a middleware's download) is never a dead letter: its failure goes back to
whoever made it.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from scrapy.downloadermiddlewares.retry import RetryMiddleware
from scrapy.exceptions import DownloadTimeoutError
from scrapy.http.request import NO_CALLBACK
from scrapy.utils.httpobj import urlparse_cached

from distcrawl.base.backoff import backoff_delay, parse_retry_after
from distcrawl.base.config import SETTINGS
from distcrawl.base.names import stats as stat_keys
from distcrawl.base.names.reasons import exception_reason, http_reason
from distcrawl.node.internals import check_retry_middleware
from distcrawl.node.politeness import Politeness
from distcrawl.node.signals import request_dead_lettered

if TYPE_CHECKING:
    from typing import Self

    from scrapy import Request, Spider
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from scrapy.settings import BaseSettings

__all__ = ["BackoffRetryMiddleware"]

#: statuses whose Retry-After header is honoured
RETRY_AFTER_STATUSES = frozenset({429, 503})


class BackoffRetryMiddleware(RetryMiddleware):
    """RetryMiddleware with exponential backoff, jitter, Retry-After and dead letters.

    Settings (besides Scrapy's RETRY_*): ``RETRY_BACKOFF_BASE``, ``RETRY_BACKOFF_MAX``,
    ``RETRY_BACKOFF_JITTER``, ``RETRY_AFTER_MAX``.
    """

    def __init__(self, settings: BaseSettings) -> None:
        check_retry_middleware(type(self))  # _backoff() calls Scrapy's private _retry()
        super().__init__(settings)
        self.base: float = SETTINGS.value(settings, "RETRY_BACKOFF_BASE")
        self.cap: float = SETTINGS.value(settings, "RETRY_BACKOFF_MAX")
        self.jitter: float = SETTINGS.value(settings, "RETRY_BACKOFF_JITTER")
        self.retry_after_max: float = SETTINGS.value(settings, "RETRY_AFTER_MAX")

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        mw = cls(crawler.settings)
        mw.crawler = crawler
        return mw

    def process_response(
        self, request: Request, response: Response, spider: Spider | None = None
    ) -> Request | Response:
        if request.meta.get("dont_retry", False) or response.status not in self.retry_http_codes:
            return response
        retry_after = None
        if response.status in RETRY_AFTER_STATUSES:
            retry_after = parse_retry_after(response.headers.get(b"Retry-After"))
        retry = self._backoff(request, http_reason(response.status), retry_after, response.status)
        return retry or response

    def process_exception(
        self, request: Request, exception: Exception, spider: Spider | None = None
    ) -> Request | Response | None:
        if isinstance(exception, DownloadTimeoutError):
            # a site that keeps timing out is slowed down like one that answers slowly
            site = urlparse_cached(request).hostname
            if site:
                seconds = float(request.meta.get("download_timeout") or 0.0)
                Politeness.of(self.crawler).timed_out(site, seconds)
        if isinstance(exception, self.exceptions_to_retry) and not request.meta.get(
            "dont_retry", False
        ):
            # None after the last try (dead-lettered): the download error goes on as on Scrapy,
            # to the errback and to Scrapy's "Error downloading" line
            return self._backoff(request, exception_reason(exception), None, None)
        return None

    def _backoff(
        self, request: Request, reason: str, retry_after: float | None, status: int | None
    ) -> Request | None:
        now = time.time()
        first = request.meta.get("retry_first_attempt", now)
        retry = self._retry(request, reason)
        stats = self.crawler.stats
        assert stats is not None
        if retry is None:
            if request.callback is NO_CALLBACK:
                return None  # the downloader's own request: its maker handles the failure
            attempts = int(request.meta.get("retry_times", 0)) + 1
            details: dict[str, Any] = {
                "attempts": attempts,
                "first_attempt": first,
                "last_attempt": now,
            }
            if status is not None:
                details["status"] = status
            self.crawler.signals.send_catch_log(
                request_dead_lettered, request=request, reason=reason, **details
            )
            return None
        attempt = int(retry.meta["retry_times"])
        delay = backoff_delay(attempt, base=self.base, cap=self.cap, jitter=self.jitter)
        if retry_after is not None:
            delay = max(delay, min(retry_after, self.retry_after_max))
            stats.inc_value(stat_keys.RETRY_AFTER_HONOURED)
        retry.meta["distcrawl_delay"] = round(delay, 3)
        retry.meta["retry_first_attempt"] = first
        stats.inc_value(stat_keys.RETRY_DELAYED_MS, int(delay * 1000))
        return retry
