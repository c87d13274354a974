"""Where a node sees its failures: a downloader middleware next to the retry middleware (every
answer of 400 or more and every failed or refused download, each try), and Scrapy's signals
for callbacks and pipelines that raised or dropped an item. Each failure goes to the node's
:class:`~distcrawl.node.observe.buffer.Observations` with the makings of its first occurrence.

Settings: ``DISTCRAWL_SNAPSHOT_BYTES`` (see the buffer for the rest).
"""

from __future__ import annotations

import traceback
from http import HTTPStatus
from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.exceptions import IgnoreRequest
from scrapy.utils.httpobj import urlparse_cached

from distcrawl.base.grouping import Failure, exception_template, template
from distcrawl.base.names import observe as kinds
from distcrawl.node.observe.buffer import Observations, Sample

if TYPE_CHECKING:
    from typing import Self

    from scrapy import Request, Spider
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from twisted.python.failure import Failure as TwistedFailure

__all__ = ["FailureCapture", "response_sample"]

#: characters of a traceback a first occurrence keeps
TRACEBACK_CHARS = 6000


def _site(request: Request | None, response: Response | None = None) -> str:
    if request is not None:
        return urlparse_cached(request).hostname or ""
    if response is not None:
        return urlparse_cached(response).hostname or ""
    return ""


def _headers(response: Response) -> list[tuple[str, str]]:
    out = []
    for name, values in response.headers.items():
        for value in values:
            out.append((name.decode("latin-1"), value.decode("latin-1")))
    return out


def response_sample(response: Response | None, url: str, limit: int, error: str = "") -> Sample:
    """The first occurrence of a failure: the answer's status, headers and the first *limit*
    bytes of its body (none without an answer), and the error's text."""
    if response is None:
        return Sample(url=url, status=None, headers=[], body=b"", body_bytes=0, error=error)
    body = response.body
    return Sample(
        url=response.url or url,
        status=int(response.status),
        headers=_headers(response),
        body=bytes(body[:limit]),
        body_bytes=len(body),
        error=error,
    )


def _phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Status"


def _traceback(failure: TwistedFailure | BaseException) -> str:
    if isinstance(failure, BaseException):
        text = "".join(traceback.format_exception(failure))
    else:
        text = failure.getTraceback()
    return text[-TRACEBACK_CHARS:]


def _located(failure: TwistedFailure) -> str:
    """A callback's or pipeline's exception as a template, with the innermost frame it was
    raised in (Twisted keeps the frames when the traceback is gone)."""
    exc = failure.value
    if exc is None:
        return "(no exception)"
    if exc.__traceback__ is not None:
        return exception_template(exc)
    frames = getattr(failure, "frames", None) or []
    text = exception_template(exc, where=False)
    if frames:
        name, path, line = frames[-1][0], str(frames[-1][1]), frames[-1][2]
        text += f" at {path.replace(chr(92), '/').rpartition('/')[2]}:{line} in {name}"
    return text


class FailureCapture:
    """A downloader middleware (after the retry middleware, so it sees every try) and the
    handler of Scrapy's ``spider_error``, ``item_error`` and ``item_dropped`` signals."""

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.observations = Observations.of(crawler)
        self.limit = self.observations.snapshot_bytes

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        capture = cls(crawler)
        crawler.signals.connect(capture.spider_error, signal=signals.spider_error)
        crawler.signals.connect(capture.item_error, signal=signals.item_error)
        crawler.signals.connect(capture.item_dropped, signal=signals.item_dropped)
        return capture

    # -- the downloader ---------------------------------------------------------------------

    def process_response(
        self, request: Request, response: Response, spider: Spider | None = None
    ) -> Response:
        status = response.status
        if status >= 400 and not _robots(request):
            failure = Failure(_site(request), kinds.HTTP, f"HTTP {status} {_phrase(status)}")
            self.observations.failed(
                failure, request.url, lambda: response_sample(response, request.url, self.limit)
            )
        return response

    def process_exception(
        self, request: Request, exception: Exception, spider: Spider | None = None
    ) -> None:
        if isinstance(exception, IgnoreRequest):
            text = template(str(exception)) if str(exception) else type(exception).__name__
            failure = Failure(_site(request), kinds.REFUSED, text)
        elif _robots(request):
            return None
        else:
            text = exception_template(exception, where=False)
            failure = Failure(_site(request), kinds.DOWNLOAD, text)
        error = f"{type(exception).__name__}: {exception}"
        self.observations.failed(
            failure, request.url, lambda: response_sample(None, request.url, 0, error)
        )
        return None

    # -- callbacks and pipelines ------------------------------------------------------------

    def spider_error(self, failure: TwistedFailure, response: Response, spider: Spider) -> None:
        self._raised(kinds.CALLBACK, failure, response)

    def item_error(
        self, item: Any, response: Response | None, spider: Spider, failure: TwistedFailure
    ) -> None:
        self._raised(kinds.PIPELINE, failure, response)

    def item_dropped(
        self, item: Any, response: Response | None, exception: BaseException, spider: Spider
    ) -> None:
        text = f"{type(exception).__name__}: {template(str(exception))}"
        url = response.url if response is not None else str(_get(item, "url") or "")
        site = _site(None, response) if response is not None else str(_get(item, "site") or "")
        self.observations.failed(
            Failure(site, kinds.PIPELINE, text),
            url,
            lambda: response_sample(response, url, self.limit, str(exception)),
        )

    def _raised(self, kind: str, failure: TwistedFailure, response: Response | None) -> None:
        url = response.url if response is not None else ""
        site = _site(None, response) if response is not None else ""
        self.observations.failed(
            Failure(site, kind, _located(failure)),
            url,
            lambda: response_sample(response, url, self.limit, _traceback(failure)),
        )


def extraction_missed(
    observations: Observations, response: Response, site: str, missing: list[str]
) -> None:
    """A product page gave no product (*missing* empty) or one without the *missing* expected
    fields (``DISTCRAWL_EXPECTED_FIELDS``)."""
    what = f"without {', '.join(missing)}" if missing else "without a product"
    observations.failed(
        Failure(site, kinds.EXTRACTION, f"product page {what}"),
        response.url,
        lambda: response_sample(response, response.url, observations.snapshot_bytes),
    )


def _robots(request: Request) -> bool:
    """robots.txt fetches: a site without one answers 404, which is no failure."""
    return urlparse_cached(request).path == "/robots.txt"


def _get(item: Any, name: str) -> Any:
    try:
        return item.get(name)
    except Exception:
        return None
