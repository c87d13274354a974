"""Requests to JSON and back. Nothing from Redis is ever unpickled or imported by name.

Decoding treats every payload as hostile: anything that is not exactly what :func:`encode`
writes raises :class:`BadEntry` with a short reason, which the frontier counts and moves aside.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
from typing import TYPE_CHECKING, Any

from scrapy import Request

from distcrawl.urls import UrlRefused, check_url

if TYPE_CHECKING:
    from scrapy import Spider

__all__ = ["BadEntry", "decode", "encode", "json_safe"]

#: a payload larger than this is refused without parsing it
DEFAULT_MAX_PAYLOAD = 256 * 1024
#: priorities outside +/- this bound are refused (they would break the queue's order score)
MAX_PRIORITY = 100_000
#: HTTP methods a queued request may use
ALLOWED_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"})

_MAX_DEPTH = 20


class BadEntry(ValueError):
    """A queue entry that cannot become a request; ``reason`` is short and stable for stats."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


def json_safe(value: Any, _depth: int = 0) -> bool:
    """Whether ``value`` survives a JSON round trip unchanged (so meta keys can be kept)."""
    if _depth > _MAX_DEPTH:
        return False
    if value is None or isinstance(value, (bool, str, int)):
        return True
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, list):
        return all(json_safe(v, _depth + 1) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and json_safe(v, _depth + 1) for k, v in value.items())
    return False


def _callback_name(spider: Spider | None, func: Any) -> str | None:
    if func is None:
        return None
    if isinstance(func, str):
        return func
    name = getattr(func, "__name__", None)
    if spider is not None and name and getattr(spider, name, None) == func:
        return str(name)
    raise ValueError(f"callback {func!r} is not a method of the spider; it cannot be queued")


def encode(request: Request, spider: Spider | None = None) -> str:
    """The JSON payload of ``request``. Meta values that JSON cannot carry are left out."""
    data: dict[str, Any] = {"url": request.url}
    if request.method != "GET":
        data["method"] = request.method
    if request.headers:
        data["headers"] = {
            k.decode("latin-1"): [v.decode("latin-1") for v in vs]
            for k, vs in request.headers.items()
        }
    if request.body:
        data["body"] = base64.b64encode(request.body).decode("ascii")
    if request.cookies:
        cookies = request.cookies
        if json_safe(cookies):
            data["cookies"] = cookies
    meta = {k: v for k, v in request.meta.items() if json_safe(v)}
    if meta:
        data["meta"] = meta
    if request.priority:
        data["priority"] = request.priority
    if request.dont_filter:
        data["dont_filter"] = True
    callback = _callback_name(spider, request.callback)
    if callback:
        data["callback"] = callback
    errback = _callback_name(spider, request.errback)
    if errback:
        data["errback"] = errback
    if request.cb_kwargs and json_safe(request.cb_kwargs):
        data["cb_kwargs"] = request.cb_kwargs
    if request.flags:
        data["flags"] = [str(f) for f in request.flags]
    if request.encoding != "utf-8":
        data["encoding"] = request.encoding
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False)


def _spider_method(spider: Spider | None, name: Any, what: str) -> Any:
    if name is None:
        return None
    if not isinstance(name, str) or not name.isidentifier() or name.startswith("_"):
        raise BadEntry(f"bad_{what}", repr(name)[:80])
    method = getattr(spider, name, None) if spider is not None else None
    if spider is not None and not callable(method):
        raise BadEntry(f"unknown_{what}", name)
    return method if spider is not None else None


def _expect(cond: bool, reason: str, detail: str = "") -> None:
    if not cond:
        raise BadEntry(reason, detail)


def decode(
    payload: bytes | str,
    spider: Spider | None = None,
    *,
    max_payload: int = DEFAULT_MAX_PAYLOAD,
    allow_private: bool | frozenset[str] = True,
) -> Request:
    """Rebuild a request from a payload written by :func:`encode`, or raise :class:`BadEntry`."""
    _expect(len(payload) <= max_payload, "too_large", f"{len(payload)} bytes")
    if isinstance(payload, bytes):
        if payload[:1] in (b"\x80",) or b"\x80\x04\x95" in payload[:16]:
            raise BadEntry(
                "pickle_refused", "payload looks like a pickle; pickles are never loaded"
            )
        try:
            payload = payload.decode("utf-8")
        except UnicodeDecodeError:
            raise BadEntry("not_utf8") from None
    try:
        data = json.loads(payload)
    except (ValueError, RecursionError):
        raise BadEntry("not_json", payload[:60]) from None
    _expect(isinstance(data, dict), "not_an_object", type(data).__name__)
    unknown = set(data) - _FIELDS
    _expect(not unknown, "unknown_fields", ",".join(sorted(unknown))[:80])
    url = data.get("url")
    _expect(isinstance(url, str), "missing_url")
    try:
        check_url(url, allow_private=allow_private)
    except UrlRefused as exc:
        raise BadEntry(exc.reason, url[:120]) from None
    method = data.get("method", "GET")
    _expect(isinstance(method, str) and method in ALLOWED_METHODS, "bad_method", str(method)[:20])
    headers = data.get("headers", {})
    _expect(
        isinstance(headers, dict)
        and all(
            isinstance(k, str) and isinstance(v, list) and all(isinstance(x, str) for x in v)
            for k, v in headers.items()
        ),
        "bad_headers",
    )
    body = b""
    if "body" in data:
        _expect(isinstance(data["body"], str), "bad_body")
        try:
            body = base64.b64decode(data["body"], validate=True)
        except (binascii.Error, ValueError):
            raise BadEntry("bad_body") from None
    meta = data.get("meta", {})
    _expect(isinstance(meta, dict), "bad_meta")
    priority = data.get("priority", 0)
    _expect(
        isinstance(priority, int) and not isinstance(priority, bool),
        "bad_priority",
        repr(priority)[:20],
    )
    _expect(abs(priority) <= MAX_PRIORITY, "bad_priority", str(priority))
    cookies = data.get("cookies", {})
    _expect(isinstance(cookies, (dict, list)), "bad_cookies")
    cb_kwargs = data.get("cb_kwargs", {})
    _expect(isinstance(cb_kwargs, dict), "bad_cb_kwargs")
    flags = data.get("flags", [])
    _expect(isinstance(flags, list) and all(isinstance(f, str) for f in flags), "bad_flags")
    encoding = data.get("encoding", "utf-8")
    _expect(isinstance(encoding, str) and len(encoding) < 40, "bad_encoding")
    dont_filter = data.get("dont_filter", False)
    _expect(isinstance(dont_filter, bool), "bad_dont_filter")
    callback = _spider_method(spider, data.get("callback"), "callback")
    errback = _spider_method(spider, data.get("errback"), "errback")
    try:
        return Request(
            url,
            callback=callback,
            errback=errback,
            method=method,
            headers={
                k.encode("latin-1"): [x.encode("latin-1") for x in v] for k, v in headers.items()
            },
            body=body,
            cookies=cookies,
            meta=meta,
            priority=priority,
            dont_filter=dont_filter,
            cb_kwargs=cb_kwargs,
            flags=flags,
            encoding=encoding,
        )
    except (TypeError, ValueError, LookupError, UnicodeError) as exc:
        raise BadEntry("bad_request", str(exc)[:120]) from None


_FIELDS = frozenset(
    {
        "url",
        "method",
        "headers",
        "body",
        "cookies",
        "meta",
        "priority",
        "dont_filter",
        "callback",
        "errback",
        "cb_kwargs",
        "flags",
        "encoding",
    }
)
