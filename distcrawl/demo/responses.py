"""Answers as the demo shop sends them: status, body and headers, and the validators of a
conditional answer (``ETag``, ``Last-Modified``, ``304 Not Modified``)."""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, replace
from email.utils import formatdate, parsedate_to_datetime
from http import HTTPStatus

from distcrawl.demo import pages

__all__ = ["Response", "error_response", "html_response", "json_response", "phrase", "validated"]

_CONTENT_HTML = "text/html; charset=utf-8"
_CONTENT_JSON = "application/json"


@dataclass(slots=True)
class Response:
    status: int
    body: bytes = b""
    content_type: str = _CONTENT_HTML
    headers: tuple[tuple[str, str], ...] = ()
    repeat: int = 1  # the body is sent this many times back to back (the oversized page)
    chunked: bool = False  # sent with Transfer-Encoding: chunked, its size not announced
    modified: float | None = None  # when the page last changed: it may answer 304
    #: no answer at all: "hang" (the connection stays open until the shop stops) or "close"
    #: (the connection is closed unanswered); status 0
    action: str = ""


def html_response(text: str, status: int = 200, modified: float | None = None) -> Response:
    return Response(status, text.encode(), modified=modified)


def json_response(data: object, status: int = 200) -> Response:
    return Response(status, json.dumps(data).encode(), _CONTENT_JSON)


def phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Status"


def error_response(status: int, headers: tuple[tuple[str, str], ...] = ()) -> Response:
    page = pages.render_error(status, phrase(status))
    return Response(status, page.encode(), headers=headers)


def validated(
    response: Response, if_none_match: str | None, if_modified_since: str | None
) -> Response:
    """*response* with its ``ETag`` (a hash of the body: exact) and ``Last-Modified`` (when
    the page last changed, to the second), or a ``304`` when the request's validators say
    the client has this very page (RFC 9110: ``If-None-Match`` wins over
    ``If-Modified-Since``)."""
    assert response.modified is not None
    etag = '"' + hashlib.blake2b(response.body, digest_size=12).hexdigest() + '"'
    modified = math.floor(response.modified)
    headers = (
        *response.headers,
        ("ETag", etag),
        ("Last-Modified", formatdate(modified, usegmt=True)),
    )
    if _not_modified(etag, modified, if_none_match, if_modified_since):
        return Response(304, b"", headers=headers)
    return replace(response, headers=headers)


def _not_modified(
    etag: str, modified: int, if_none_match: str | None, if_modified_since: str | None
) -> bool:
    if if_none_match is not None:
        tags = {tag.strip().removeprefix("W/") for tag in if_none_match.split(",")}
        return "*" in tags or etag in tags  # the weak comparison GET uses
    if if_modified_since:
        try:
            since = parsedate_to_datetime(if_modified_since).timestamp()
        except (TypeError, ValueError, IndexError, OverflowError):
            return False  # an unreadable date is ignored, as the RFC says
        return modified <= since
    return False
