"""Requests to JSON and back. Nothing from Redis is ever unpickled or imported by name.

Decoding treats every payload as hostile: anything that is not exactly what :func:`encode`
writes raises :class:`BadEntry` with a short reason, which the frontier counts and moves aside.
A queued request may name as callback only a public method its spider class defines itself
(not one of Scrapy's ``Spider`` hooks) that takes a response; as on Scrapy, cb_kwargs that do
not fit its signature fail when it is called (a middleware may add some after queueing).
Meta keys that re-route a connection or switch a safety limit off (:data:`UNSAFE_META_KEYS`)
never travel through the frontier: :func:`encode` leaves them out, :func:`decode` refuses them;
nor do a node's credential headers (:data:`CREDENTIAL_HEADERS`), which it sets again itself.
A ``CrawlSpider`` rule's requests name their rule instead (:mod:`.callbacks`); Request
subclasses travel as their class only if allowed (:mod:`.classes`), and so do items in meta or
cb_kwargs (one at a key's top level: written as their fields, ``it`` naming their class).
The parts: ``payload`` (field names, limits, :class:`BadEntry`), ``checks`` (hostile parts),
``values`` (meta and cb_kwargs values, items), ``methods`` (callbacks by name).
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import TYPE_CHECKING, Any

from scrapy import Request

from distcrawl.base.names import reasons
from distcrawl.base.urls import UrlRefused, check_url, plain_url_host
from distcrawl.node.requests import classes
from distcrawl.node.requests.checks import (
    HEADER_VALUE_FORBIDDEN,
    ascii_compatible,
    looks_like_pickle,
    not_json_constant,
    valid_cookies,
    valid_headers,
)
from distcrawl.node.requests.methods import callback_name, spider_method
from distcrawl.node.requests.payload import (
    ALLOWED_METHODS,
    CREDENTIAL_HEADERS,
    DEFAULT_CALLBACK,
    DEFAULT_MAX_PAYLOAD,
    FIELDS,
    MAX_DEPTH,
    MAX_PRIORITY,
    META_SHORT_NAMES,
    UNSAFE_META_KEYS,
    BadEntry,
    expect,
)
from distcrawl.node.requests.values import json_values, with_items

if TYPE_CHECKING:
    from scrapy import Spider

__all__ = ["decode", "encode", "entry_refusal"]

_META_SHORT = META_SHORT_NAMES
_META_LONG = {v: k for k, v in META_SHORT_NAMES.items()}
#: reads a payload (``NaN`` and ``Infinity`` refused): one decoder, not one per payload
_JSON = json.JSONDecoder(parse_constant=not_json_constant)
#: writes a payload, compact: one encoder, not one per payload
_DUMPS = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


def encode(
    request: Request, spider: Spider | None = None, *, strict: bool = True, priority: bool = True
) -> str:
    """The compact JSON payload of ``request`` (see :data:`SHORT_NAMES`). A meta or cb_kwargs
    value that JSON cannot carry raises ValueError naming its key (``strict=False`` leaves it
    out instead). Left out too is what decoding rebuilds: defaults, the callback ``parse``
    (no callback is written ``"cb": null``), a same-site Referer's origin, and with
    ``priority=False`` the priority, for a queue entry whose priority list carries it."""
    meta_items: dict[str, str] = {}
    kw_items: dict[str, str] = {}
    meta = json_values("meta", request.meta, strict=strict, skip=UNSAFE_META_KEYS, items=meta_items)
    cb_kwargs = json_values("cb_kwargs", request.cb_kwargs, strict=strict, items=kw_items)
    data: dict[str, Any] = {"u": request.url}
    kind = classes.class_name(request)
    if kind is not None:
        data["cl"] = kind
    if request.method != "GET":
        data["m"] = request.method
    headers = {
        k.decode("latin-1"): [v.decode("latin-1") for v in vs]
        for k, vs in request.headers.items()
        if k.lower() not in CREDENTIAL_HEADERS
    }
    referer = headers.get("Referer")
    if referer is not None and len(referer) == 1:
        origin = _origin(request.url)
        if origin and referer[0].startswith(origin + "/"):
            data["r"] = referer[0][len(origin) :]
            del headers["Referer"]
    if headers:
        data["h"] = headers
    if request.body:
        data["b"] = base64.b64encode(request.body).decode("ascii")
    if request.cookies:
        cookies = request.cookies
        # written only in the shape decode accepts: anything else would be refused later
        if valid_cookies(cookies):
            data["c"] = cookies
    meta = {_META_SHORT.get(k) or ("~" + k if k.startswith("~") else k): v for k, v in meta.items()}
    if meta:
        data["mt"] = meta
    if request.priority and priority:
        data["p"] = request.priority
    if request.dont_filter:
        data["f"] = True
    callback = callback_name(spider, request.callback, "callback", request.meta)
    if callback is None:
        data["cb"] = None
    elif callback != DEFAULT_CALLBACK:
        data["cb"] = callback
    errback = callback_name(spider, request.errback, "errback", request.meta)
    if errback:
        data["eb"] = errback
    if cb_kwargs:
        data["kw"] = cb_kwargs
    if meta_items or kw_items:
        data["it"] = {k: v for k, v in (("mt", meta_items), ("kw", kw_items)) if v}
    if request.flags:
        data["fl"] = [str(f) for f in request.flags]
    if request.encoding != "utf-8":
        data["e"] = request.encoding
    return _DUMPS(data)


def entry_refusal(
    request: Request, payload: str, *, max_payload: int = DEFAULT_MAX_PAYLOAD
) -> str | None:
    """Why :func:`decode` would refuse ``payload``, the entry :func:`encode` wrote for
    ``request`` (None: it would not): a URL no queue entry may hold (a scheme other than
    http(s), such as ``data:`` or ``file:``, a URL too long or without a host, ...), a method or
    an encoding it does not take, a priority out of bounds, a payload over ``max_payload``.
    Scrapy may still download such a request: the node keeps it in memory instead."""
    try:
        check_url(request.url, allow_private=True)
    except UrlRefused as exc:
        return exc.reason
    if request.method not in ALLOWED_METHODS:
        return reasons.BAD_METHOD
    if abs(request.priority) > MAX_PRIORITY:
        return reasons.BAD_PRIORITY
    if request.encoding != "utf-8" and not ascii_compatible(request.encoding):
        return reasons.BAD_ENCODING
    if len(payload) > max_payload // 4 and len(payload.encode("utf-8")) > max_payload:
        return reasons.TOO_LARGE
    return None


def _origin(url: str) -> str:
    """``scheme://netloc`` of ``url`` ("" if it has none)."""
    scheme, sep, rest = url.partition("://")
    if not scheme or not sep:
        return ""
    # the netloc ends at the first "/", "?" or "#"
    netloc = rest.partition("/")[0]
    if "?" in netloc or "#" in netloc:
        netloc = netloc.partition("?")[0].partition("#")[0]
    return f"{scheme}://{netloc}" if netloc else ""


def decode(
    payload: bytes | str,
    spider: Spider | None = None,
    *,
    max_payload: int = DEFAULT_MAX_PAYLOAD,
    allow_private: bool | frozenset[str] = True,
    priority: int | None = None,
) -> Request:
    """Rebuild a request from a payload written by :func:`encode`, or raise :class:`BadEntry`.
    ``priority`` (the lease line's, from the queue's list the entry waited in) is the
    request's priority when given."""
    # (the details of a refusal are only built for one: decoding is per leased request)
    if len(payload) > max_payload:
        raise BadEntry(reasons.TOO_LARGE, f"{len(payload)} bytes")
    if isinstance(payload, bytes):
        if looks_like_pickle(payload):
            raise BadEntry(
                reasons.PICKLE_REFUSED, "payload looks like a pickle; pickles are never loaded"
            )
        try:
            payload = payload.decode("utf-8")
        except UnicodeDecodeError:
            raise BadEntry(reasons.NOT_UTF8) from None
    try:
        data = _JSON.decode(payload)
    except (ValueError, RecursionError):
        if looks_like_pickle(payload.encode("latin-1", "replace")):
            raise BadEntry(reasons.PICKLE_REFUSED, "payload looks like a pickle") from None
        raise BadEntry(reasons.NOT_JSON, payload[:60]) from None
    if not isinstance(data, dict):
        raise BadEntry(reasons.NOT_AN_OBJECT, type(data).__name__)
    if not FIELDS.issuperset(data):
        raise BadEntry(reasons.UNKNOWN_FIELDS, ",".join(sorted(set(data) - FIELDS))[:80])
    if "cb" not in data:
        # a payload leaves out the callback parse (no callback is written as null)
        data["cb"] = DEFAULT_CALLBACK
    url = data.get("u")
    if not isinstance(url, str):
        raise BadEntry(reasons.MISSING_URL)
    # a plain URL passes check_url where private hosts are allowed (see plain_url_host)
    plain = plain_url_host(url) is not None
    if not (plain and allow_private is True):
        try:
            check_url(url, allow_private=allow_private)
        except UrlRefused as exc:
            raise BadEntry(exc.reason, url[:120]) from None
    # a field left out holds its default, which needs no check
    method = data.get("m", "GET")
    if method != "GET" and not (isinstance(method, str) and method in ALLOWED_METHODS):
        raise BadEntry(reasons.BAD_METHOD, str(method)[:20])
    headers = {}
    if "h" in data:
        headers = data["h"]
        expect(valid_headers(headers), reasons.BAD_HEADERS)
    if "r" in data:
        referer = data["r"]
        expect(
            isinstance(referer, str)
            and referer[:1] == "/"
            and not HEADER_VALUE_FORBIDDEN.search(referer),
            reasons.BAD_REFERER,
        )
        headers = {**headers, "Referer": [_origin(url) + referer]}
    body = b""
    if "b" in data:
        expect(isinstance(data["b"], str), reasons.BAD_BODY)
        try:
            body = base64.b64decode(data["b"], validate=True)
        except (binascii.Error, ValueError):
            raise BadEntry(reasons.BAD_BODY) from None
    meta = {}
    if "mt" in data:
        meta = data["mt"]
        expect(isinstance(meta, dict), reasons.BAD_META)
        # (a first character compared: str.startswith is a slow call for one character)
        if any(k[:1] == "~" for k in meta):
            long = _META_LONG
            meta = {
                (long.get(k) or _meta_key(k)) if k[:1] == "~" else k: v for k, v in meta.items()
            }
        if not UNSAFE_META_KEYS.isdisjoint(meta):
            unsafe = UNSAFE_META_KEYS.intersection(meta)
            raise BadEntry(reasons.UNSAFE_META, ",".join(sorted(unsafe)))
    depth = meta.get("depth", 0)
    if not (isinstance(depth, int) and not isinstance(depth, bool) and 0 <= depth <= MAX_DEPTH):
        raise BadEntry(reasons.BAD_DEPTH, repr(depth)[:20])
    priority = data.get("p", 0) if priority is None else priority
    if not isinstance(priority, int) or isinstance(priority, bool):
        raise BadEntry(reasons.BAD_PRIORITY, repr(priority)[:20])
    if abs(priority) > MAX_PRIORITY:
        raise BadEntry(reasons.BAD_PRIORITY, str(priority))
    cookies = {}
    if "c" in data:
        cookies = data["c"]
        expect(valid_cookies(cookies), reasons.BAD_COOKIES)
    cb_kwargs = {}
    if "kw" in data:
        cb_kwargs = data["kw"]
        expect(isinstance(cb_kwargs, dict), reasons.BAD_CB_KWARGS)
    flags = []
    if "fl" in data:
        flags = data["fl"]
        expect(
            isinstance(flags, list) and all(isinstance(f, str) for f in flags),
            reasons.BAD_FLAGS,
        )
    encoding = "utf-8"
    if "e" in data:
        encoding = data["e"]
        expect(isinstance(encoding, str) and len(encoding) < 40, reasons.BAD_ENCODING)
        if not ascii_compatible(encoding):
            raise BadEntry(reasons.BAD_ENCODING, encoding)
    dont_filter = data.get("f", False)
    expect(isinstance(dont_filter, bool), reasons.BAD_DONT_FILTER)
    if "it" in data:
        meta, cb_kwargs = with_items(data["it"], meta, cb_kwargs)
    callback = spider_method(spider, data.get("cb"), "callback", cb_kwargs, meta)
    errback = spider_method(spider, data.get("eb"), "errback", {}, meta)
    request_cls: type[Request] = Request
    if "cl" in data:
        kind = data["cl"]
        expect(isinstance(kind, str), reasons.BAD_CLASS)
        found = classes.request_class(kind)
        if found is None:
            raise BadEntry(reasons.UNKNOWN_REQUEST_CLASS, str(kind)[:80])
        request_cls = found
    # a plain URL, which Scrapy's normalisation would not change, is taken as it is
    # (Scrapy's verbatim_url, for this construction only): that normalisation is most of
    # the making of a request
    verbatim = (
        request_cls is Request and encoding == "utf-8" and plain and "verbatim_url" not in meta
    )
    if verbatim:
        meta = {**meta, "verbatim_url": True}
    try:
        request = request_cls(
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
        raise BadEntry(reasons.BAD_REQUEST, str(exc)[:120]) from None
    if verbatim:
        del request.meta["verbatim_url"]
    elif request.url != url:
        # Scrapy normalises the URL (IDNA, percent-encoding): what is fetched is checked too
        try:
            check_url(request.url, allow_private=allow_private)
        except UrlRefused as exc:
            raise BadEntry(exc.reason, request.url[:120]) from None
    return request


def _meta_key(key: str) -> str:
    if key.startswith("~~"):
        return key[1:]
    if key.startswith("~"):
        long = _META_LONG.get(key)
        expect(long is not None, reasons.BAD_META, key[:40])
        return str(long)
    return key
