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
from json.encoder import c_make_encoder, encode_basestring  # type: ignore[attr-defined]
from typing import TYPE_CHECKING, Any

from scrapy import Request
from scrapy.http import Headers
from scrapy.utils import httpobj

from distcrawl.base.names import reasons
from distcrawl.base.urls import UrlRefused, check_url, plain_url_host, plain_url_parts
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

_META_LONG = {v: k for k, v in META_SHORT_NAMES.items()}
#: reads a payload (``NaN`` and ``Infinity`` refused): one decoder, not one per payload
_JSON = json.JSONDecoder(parse_constant=not_json_constant)
#: its scanner (JSONDecoder.decode adds two regular expressions a payload never needs)
_SCAN = _JSON.scan_once  # type: ignore[attr-defined]
#: writes a payload, compact, ``NaN`` and ``Infinity`` refused (decode would refuse them)
_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)
#: its C writer, made once (JSONEncoder.encode makes one per call); no check for circular
#: values: meta and cb_kwargs passed json_safe, whose depth is bounded, the rest is flat
_WRITE = (
    None
    if c_make_encoder is None
    else c_make_encoder(
        None, _ENCODER.default, encode_basestring, None, ":", ",", False, False, False
    )
)

#: Scrapy's cache of parsed request URLs (``urlparse_cached``; private: where a Scrapy has
#: none, a decoded request is parsed where it is first read)
_PARSED = getattr(httpobj, "_urlparse_cache", None)


def _dumps(data: dict[str, Any]) -> str:
    if _WRITE is None:
        return _ENCODER.encode(data)
    return "".join(_WRITE(data, 0))


def encode(
    request: Request, spider: Spider | None = None, *, strict: bool = True, priority: bool = True
) -> str:
    """The compact JSON payload of ``request`` (see :data:`SHORT_NAMES`). A meta or cb_kwargs
    value that JSON cannot carry raises ValueError naming its key (``strict=False`` leaves it
    out instead), and so does a cookie value that is no finite number. Left out too is what
    decoding rebuilds: defaults, the callback ``parse`` (no callback is written ``"cb": null``),
    a same-site Referer's origin, and with ``priority=False`` the priority, for a queue entry
    whose priority list carries it."""
    meta_items: dict[str, str] = {}
    meta = json_values(
        "meta",
        request.meta,
        strict=strict,
        skip=UNSAFE_META_KEYS,
        items=meta_items,
        short=META_SHORT_NAMES,
    )
    url = request.url
    data: dict[str, Any] = {"u": url}
    if type(request) is not Request:
        data["cl"] = classes.class_name(request)
    if request.method != "GET":
        data["m"] = request.method
    written = request.headers
    # (a Headers holds its names normalised: its own items() looks each up again)
    pairs = dict.items(written) if type(written) is Headers else written.items()
    headers = {
        k.decode("latin-1"): [v.decode("latin-1") for v in vs]
        for k, vs in pairs
        if k.lower() not in CREDENTIAL_HEADERS
    }
    referer = headers.get("Referer")
    if referer is not None and len(referer) == 1:
        origin = _origin(url)
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
    if request.errback is not None:
        errback = callback_name(spider, request.errback, "errback", request.meta)
        if errback:
            data["eb"] = errback
    kw_items: dict[str, str] = {}
    if request.cb_kwargs:
        cb_kwargs = json_values("cb_kwargs", request.cb_kwargs, strict=strict, items=kw_items)
        if cb_kwargs:
            data["kw"] = cb_kwargs
    if meta_items or kw_items:
        data["it"] = {k: v for k, v in (("mt", meta_items), ("kw", kw_items)) if v}
    if request.flags:
        data["fl"] = [str(f) for f in request.flags]
    if request.encoding != "utf-8":
        data["e"] = request.encoding
    return _dumps(data)


def entry_refusal(
    request: Request, payload: str, *, max_payload: int = DEFAULT_MAX_PAYLOAD
) -> str | None:
    """Why :func:`decode` would refuse ``payload``, the entry :func:`encode` wrote for
    ``request`` (None: it would not): a URL no queue entry may hold (a scheme other than
    http(s), such as ``data:`` or ``file:``, a URL too long or without a host, ...), a method or
    an encoding it does not take, a priority or a depth out of bounds, a payload over
    ``max_payload``.
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
    depth = request.meta.get("depth", 0)
    # (an int, not a bool: the common case first)
    if type(depth) is not int and (isinstance(depth, bool) or not isinstance(depth, int)):
        return reasons.BAD_DEPTH
    if not 0 <= depth <= MAX_DEPTH:
        return reasons.BAD_DEPTH
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
    # (decoding is per leased request: the details of a refusal are only built for one, and a
    # field left out holds its default, which needs no check)
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
    data = _load(payload)
    if not FIELDS.issuperset(data):
        raise BadEntry(reasons.UNKNOWN_FIELDS, ",".join(sorted(set(data) - FIELDS))[:80])
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
    method = "GET"
    if "m" in data:
        method = data["m"]
        if not (isinstance(method, str) and method in ALLOWED_METHODS):
            raise BadEntry(reasons.BAD_METHOD, str(method)[:20])
    headers: Any = None  # (from JSON; a str: a same-site Referer only)
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
        # (the origin of a plain URL ends at the first "/" after its "://")
        referer = (url[: url.find("/", 8)] if plain else _origin(url)) + referer
        headers = {**headers, "Referer": [referer]} if headers else referer
    body = b""
    if "b" in data:
        expect(isinstance(data["b"], str), reasons.BAD_BODY)
        try:
            body = base64.b64decode(data["b"], validate=True)
        except (binascii.Error, ValueError):
            raise BadEntry(reasons.BAD_BODY) from None
    meta: dict[str, Any] = {}
    if "mt" in data:
        written = data["mt"]
        expect(isinstance(written, dict), reasons.BAD_META)
        # short names back to long in one pass (a first character compared: str.startswith
        # is a slow call for one character)
        long = _META_LONG
        meta = {(long.get(k) or _meta_key(k)) if k[:1] == "~" else k: v for k, v in written.items()}
        if not UNSAFE_META_KEYS.isdisjoint(meta):
            unsafe = UNSAFE_META_KEYS.intersection(meta)
            raise BadEntry(reasons.UNSAFE_META, ",".join(sorted(unsafe)))
        # (JSON's numbers are plain ints or floats: a bool is no depth)
        depth = meta.get("depth", 0)
        if not (type(depth) is int and 0 <= depth <= MAX_DEPTH):
            raise BadEntry(reasons.BAD_DEPTH, repr(depth)[:20])
    if priority is None:
        priority = data.get("p", 0)
    if type(priority) is not int and (isinstance(priority, bool) or not isinstance(priority, int)):
        raise BadEntry(reasons.BAD_PRIORITY, repr(priority)[:20])
    if not -MAX_PRIORITY <= priority <= MAX_PRIORITY:
        raise BadEntry(reasons.BAD_PRIORITY, str(priority))
    cookies = None
    if "c" in data:
        cookies = data["c"]
        expect(valid_cookies(cookies), reasons.BAD_COOKIES)
    cb_kwargs = None
    if "kw" in data:
        cb_kwargs = data["kw"]
        expect(isinstance(cb_kwargs, dict), reasons.BAD_CB_KWARGS)
    flags = None
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
    dont_filter = False
    if "f" in data:
        dont_filter = data["f"]
        expect(dont_filter is True or dont_filter is False, reasons.BAD_DONT_FILTER)
    if "it" in data:
        meta, cb_kwargs = with_items(data["it"], meta, cb_kwargs or {})
    # a payload leaves out the callback parse (no callback is written as null)
    callback = spider_method(
        spider, data.get("cb", DEFAULT_CALLBACK), "callback", cb_kwargs or _NO_KWARGS, meta
    )
    errback = None
    if "eb" in data:
        errback = spider_method(spider, data["eb"], "errback", _NO_KWARGS, meta)
    request_cls: type[Request] = Request
    if "cl" in data:
        kind = data["cl"]
        expect(isinstance(kind, str), reasons.BAD_CLASS)
        found = classes.request_class(kind)
        if found is None:
            raise BadEntry(reasons.UNKNOWN_REQUEST_CLASS, str(kind)[:80])
        request_cls = found
    try:
        if request_cls is Request:
            request = _request(
                url, plain, callback, errback, method, headers, body, cookies, meta, priority,
                dont_filter, cb_kwargs, flags, encoding,
            )  # fmt: skip
        else:
            request = request_cls(
                url,
                callback=callback,
                errback=errback,
                method=method,
                headers=_headers(headers, encoding) if headers else None,
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
    if request.url != url:
        # Scrapy normalised the URL (IDNA, percent-encoding): what is fetched is checked too
        try:
            check_url(request.url, allow_private=allow_private)
        except UrlRefused as exc:
            raise BadEntry(exc.reason, request.url[:120]) from None
    return request


#: the order of Request's parameters, in which :func:`_request` passes them
REQUEST_PARAMETERS = (
    "url",
    "callback",
    "method",
    "headers",
    "body",
    "cookies",
    "meta",
    "encoding",
    "priority",
    "dont_filter",
    "errback",
    "flags",
    "cb_kwargs",
)
_NO_KWARGS: dict[str, Any] = {}  # (read, never written)


def _request(  # (one argument per field of a request)
    url: str,
    plain: bool,
    callback: Any,
    errback: Any,
    method: str,
    headers: dict[str, list[str]] | str | None,
    body: bytes,
    cookies: Any,
    meta: dict[str, Any],
    priority: int,
    dont_filter: bool,
    cb_kwargs: dict[str, Any] | None,
    flags: list[str] | None,
    encoding: str,
) -> Request:
    """A plain Request of the decoded fields, the cheap way Scrapy's public API allows: its
    arguments by position (trackref's ``__new__`` takes ``*args, **kwargs``: keyword arguments
    would go through a dict twice), a plain URL taken as it is (Scrapy's ``verbatim_url``, for
    this construction only: Scrapy's normalisation would not change it, and it is most of the
    making of a request), the headers set as a Headers already (not normalised again)."""
    # (meta is decode's own dict: it may take the key for the construction)
    verbatim = plain and encoding == "utf-8" and "verbatim_url" not in meta
    if verbatim:
        meta["verbatim_url"] = True
    request = Request(
        url, callback, method, None, body, cookies, meta, encoding, priority, dont_filter,
        errback, flags, cb_kwargs,
    )  # fmt: skip
    if verbatim:
        del request.meta["verbatim_url"]
        # the engine, the gate and the middlewares read the URL's parts from Scrapy's cache,
        # which a new request misses: filled from the plain URL's partitions (a fourth of a
        # parse, and a leased request is parsed at once)
        parts = plain_url_parts(url)
        if parts is not None and _PARSED is not None:
            _PARSED[request] = parts
    if headers:
        request.headers = _headers(headers, encoding)
    return request


def _headers(written: dict[str, list[str]] | str, encoding: str) -> Headers:
    """``written`` (checked names and values; a str: the Referer only) as Scrapy's Headers
    holds them: names title-cased and values as bytes, those of names equal but for case
    joined, in order."""
    headers = Headers(encoding=encoding)
    if isinstance(written, str):  # a same-site Referer only, as most are
        dict.__setitem__(headers, b"Referer", [written.encode("latin-1")])
        return headers
    for name, values in written.items():
        # (Headers' own normalisation, without its per-value calls: a name is ASCII)
        dict.setdefault(headers, name.title().encode("latin-1"), []).extend(
            [value.encode("latin-1") for value in values]
        )
    return headers


def _load(payload: str) -> dict[str, Any]:
    """The JSON object ``payload`` holds, or :class:`BadEntry`."""
    try:
        try:
            data, end = _SCAN(payload, 0)
        except StopIteration:
            end = -1
        if end != len(payload):
            # not one value from the first character to the last (white space, more after it,
            # none at all): JSON's own decode, which also names the error
            data = _JSON.decode(payload)
    except (ValueError, RecursionError):
        if looks_like_pickle(payload.encode("latin-1", "replace")):
            raise BadEntry(reasons.PICKLE_REFUSED, "payload looks like a pickle") from None
        raise BadEntry(reasons.NOT_JSON, payload[:60]) from None
    if type(data) is not dict:
        raise BadEntry(reasons.NOT_AN_OBJECT, type(data).__name__)
    return data


def _meta_key(key: str) -> str:
    if key.startswith("~~"):
        return key[1:]
    if key.startswith("~"):
        long = _META_LONG.get(key)
        expect(long is not None, reasons.BAD_META, key[:40])
        return str(long)
    return key
