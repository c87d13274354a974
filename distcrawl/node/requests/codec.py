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
"""

from __future__ import annotations

import base64
import binascii
import functools
import inspect
import json
import math
import re
from typing import TYPE_CHECKING, Any

from itemadapter import ItemAdapter
from scrapy import Request
from scrapy import Spider as _ScrapySpider

from distcrawl.base.names import reasons
from distcrawl.base.urls import UrlRefused, check_url, printable
from distcrawl.node.requests import callbacks, classes

if TYPE_CHECKING:
    from scrapy import Spider

__all__ = [
    "CREDENTIAL_HEADERS",
    "UNSAFE_META_KEYS",
    "BadEntry",
    "decode",
    "encode",
    "entry_refusal",
    "json_safe",
]

#: a payload larger than this is refused without parsing it
DEFAULT_MAX_PAYLOAD = 256 * 1024
#: priorities outside +/- this bound are refused (they would break the queue's order score)
MAX_PRIORITY = 100_000
#: HTTP methods a queued request may use
ALLOWED_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"})

#: meta keys that re-route the connection (a proxy, a local address), write local files, or
#: switch a safety limit off; a node sets them from its own settings, never from Redis
UNSAFE_META_KEYS = frozenset(
    {
        "proxy",
        "_auth_proxy",
        "_scheme_proxy",
        "bindaddress",
        "download_maxsize",
        "download_warnsize",
        "dont_obey_robotstxt",
        "ftp_user",
        "ftp_password",
        "ftp_local_filename",
    }
)
#: headers that carry a node's credentials (HttpAuthMiddleware, HttpProxyMiddleware set them
#: from the node's own settings on every node): never written to Redis or the dead letters
CREDENTIAL_HEADERS = frozenset({b"authorization", b"proxy-authorization"})
#: a crawl depth above this in a queue entry is not one a node wrote
MAX_DEPTH = 1_000_000

_MAX_DEPTH = 20
# RFC 9110 token characters: a header name with anything else (CR, LF, ':') could smuggle a
# second header or request into what the node sends
_HEADER_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]{1,256}")
_HEADER_VALUE_FORBIDDEN = re.compile(r"[\r\n\x00]")
_COOKIE_SCALARS = (str, int, float, bool)
# the first byte of a protocol 0/1 pickle (protocol 2+ starts with \x80); no JSON text starts
# with one of these and also ends with "." (the STOP opcode every pickle ends with)
_PICKLE_OPENERS = b"(cI]}SVLFNGJKMTU"


class BadEntry(ValueError):
    """A queue entry that cannot become a request; ``reason`` is short and stable for stats."""

    def __init__(self, reason: str, detail: str = "") -> None:
        # the detail quotes hostile input: escaped, it cannot forge a line of the node's log
        super().__init__(f"{reason}: {printable(detail, 120)}" if detail else reason)
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


#: spider methods distcrawl itself calls that are not callbacks (Scrapy's own hooks are
#: recognised by their class)
SPIDER_HOOKS = frozenset({"make_request_from_seed"})


@functools.lru_cache(maxsize=256)
def _queueable(spider_class: type, name: str) -> Any:
    """The function ``name`` of ``spider_class`` if a queued request may call it, else None.

    Only plain functions defined by the spider's own classes count: Scrapy's ``Spider`` hooks
    (``close``, ``start``, ``from_crawler``, ...), class and static methods and properties are
    not callbacks, whatever a queue entry says.
    """
    if not name.isidentifier() or name.startswith("_") or name in SPIDER_HOOKS:
        return None
    for cls in spider_class.__mro__:
        if cls in _ScrapySpider.__mro__:
            continue
        attr = cls.__dict__.get(name)
        if attr is not None:
            return attr if inspect.isfunction(attr) else None
    return None


@functools.lru_cache(maxsize=64)
def _ascii_compatible(encoding: str) -> bool:
    """Whether URLs keep their ASCII bytes in ``encoding``. Scrapy percent-encodes a URL's
    query in the request's encoding: in UTF-16 or UTF-32 even an empty query gains a byte
    order mark, and the URL changes again each time it is rebuilt (found by the fuzzer)."""
    try:
        return "/?a=b&c".encode(encoding) == b"/?a=b&c"
    except (LookupError, UnicodeError):
        return False


#: what :func:`_positional` answers for a function Scrapy cannot call with a response
_NOT_CALLABLE = frozenset({"\0"})


@functools.lru_cache(maxsize=256)
def _positional(func: Any) -> frozenset[str] | None:
    """The parameters Scrapy fills when it calls ``func(self, response)``; None if the
    signature cannot be read, :data:`_NOT_CALLABLE` if the call would fail."""
    try:
        signature = inspect.signature(func)
    except (TypeError, ValueError):
        return None
    try:
        return frozenset(signature.bind(None, None).arguments)
    except TypeError:
        return _NOT_CALLABLE


@functools.lru_cache(maxsize=256)
def _takes_response(func: Any) -> bool:
    """Whether ``func`` takes ``self`` and a response positionally. Which cb_kwargs it takes
    is not checked: a middleware may add some after the request was queued, and a call that
    does not bind fails as it does on Scrapy, with the spider's TypeError."""
    try:
        parameters = inspect.signature(func).parameters.values()
    except (TypeError, ValueError):
        return True
    kinds = [p.kind for p in parameters]
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return inspect.Parameter.VAR_POSITIONAL in kinds or sum(k in positional for k in kinds) >= 2


def _callback_name(spider: Spider | None, func: Any, role: str, meta: dict[str, Any]) -> str | None:
    if func is None:
        return None
    rule = callbacks.rule_reference(spider, func, role, meta)
    if rule is not None:
        return rule
    if isinstance(func, str):
        return func
    name = getattr(func, "__name__", None)
    if spider is not None and name and getattr(spider, name, None) == func:
        if _queueable(type(spider), name) is None:  # type: ignore[arg-type]  # classes hash
            raise ValueError(f"{name!r} is not a callback a queued request may name")
        return str(name)
    raise ValueError(f"callback {func!r} is not a method of the spider; it cannot be queued")


def _json_values(
    what: str,
    values: dict[str, Any],
    *,
    strict: bool,
    skip: frozenset[str] = frozenset(),
    items: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The entries of ``values`` JSON can carry, an item of an allowed class as its fields
    (its class name goes into ``items``, by key); with ``strict``, any other raises ValueError
    naming its key (``skip``: keys left out whatever they hold)."""
    out = {}
    for key, value in values.items():
        if key in skip:
            continue
        if json_safe(value):
            out[key] = value
            continue
        try:
            if items is not None and _is_item(value):
                out[key] = _item_fields(what, key, value)
                items[key] = classes.item_class_name(value)
                continue
            raise ValueError(
                f"{what} key {key!r} holds a {type(value).__name__}, which a queued request "
                "cannot carry (only JSON values: str, int, float, bool, None, lists, dicts, "
                "and items of the classes in DISTCRAWL_ITEM_CLASSES)"
            )
        except ValueError:
            out.pop(key, None)
            if strict:
                raise
    return out


def _is_item(value: Any) -> bool:
    return not isinstance(value, dict) and ItemAdapter.is_item(value)


def _item_fields(what: str, key: str, item: Any) -> dict[str, Any]:
    """An item's fields as they are (an item inside one is not made a dict behind the
    spider's back: JSON cannot carry it, and the request is refused naming the key)."""
    fields = dict(ItemAdapter(item).items())
    if not json_safe(fields):
        bad = next(k for k, v in fields.items() if not json_safe(v))
        raise ValueError(
            f"{what} key {key!r} holds a {type(item).__name__} whose field {bad!r} holds a "
            f"{type(fields[bad]).__name__}, which a queued request cannot carry"
        )
    return fields


def encode(
    request: Request, spider: Spider | None = None, *, strict: bool = True, priority: bool = True
) -> str:
    """The compact JSON payload of ``request`` (see :data:`SHORT_NAMES`). A meta or cb_kwargs
    value that JSON cannot carry raises ValueError naming its key (``strict=False`` leaves it
    out instead). Left out too is what decoding rebuilds: defaults, the callback ``parse``
    (no callback is written ``"cb": null``), a same-site Referer's origin, and with
    ``priority=False`` the priority, for a queue entry whose order score carries it."""
    meta_items: dict[str, str] = {}
    kw_items: dict[str, str] = {}
    meta = _json_values(
        "meta", request.meta, strict=strict, skip=UNSAFE_META_KEYS, items=meta_items
    )
    cb_kwargs = _json_values("cb_kwargs", request.cb_kwargs, strict=strict, items=kw_items)
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
        if _valid_cookies(cookies):
            data["c"] = cookies
    meta = {_META_SHORT.get(k) or ("~" + k if k.startswith("~") else k): v for k, v in meta.items()}
    if meta:
        data["mt"] = meta
    if request.priority and priority:
        data["p"] = request.priority
    if request.dont_filter:
        data["f"] = True
    callback = _callback_name(spider, request.callback, "callback", request.meta)
    if callback is None:
        data["cb"] = None
    elif callback != DEFAULT_CALLBACK:
        data["cb"] = callback
    errback = _callback_name(spider, request.errback, "errback", request.meta)
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
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False)


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
    if request.encoding != "utf-8" and not _ascii_compatible(request.encoding):
        return reasons.BAD_ENCODING
    if len(payload) > max_payload // 4 and len(payload.encode("utf-8")) > max_payload:
        return reasons.TOO_LARGE
    return None


def _origin(url: str) -> str:
    """``scheme://netloc`` of ``url`` ("" if it has none)."""
    cut = url.find("://")
    if cut <= 0:
        return ""
    end = len(url)
    for sep in "/?#":
        at = url.find(sep, cut + 3)
        if at != -1:
            end = min(end, at)
    return url[:end] if end > cut + 3 else ""


#: the refusals of a callback (errback) that is no public method name, or one the spider has not
_BAD = {"callback": reasons.BAD_CALLBACK, "errback": reasons.BAD_ERRBACK}
_UNKNOWN = {"callback": reasons.UNKNOWN_CALLBACK, "errback": reasons.UNKNOWN_ERRBACK}


def _spider_method(
    spider: Spider | None, name: Any, what: str, kwargs: dict[str, Any], meta: dict[str, Any]
) -> Any:
    if name is None:
        return None
    if name == callbacks.RULE_REFERENCE:
        try:
            return callbacks.resolve_rule(spider, what, meta)
        except callbacks.BadRule as exc:
            raise BadEntry(reasons.BAD_RULE, str(exc)) from None
    if not isinstance(name, str) or not name.isidentifier() or name.startswith("_"):
        raise BadEntry(_BAD[what], repr(name)[:80])
    if spider is None:
        return None
    func = _queueable(type(spider), name)  # type: ignore[arg-type]  # classes hash
    if func is None:
        raise BadEntry(_UNKNOWN[what], name)
    positional = _positional(func)
    if positional is not None:
        # Scrapy calls it as (self, response or failure, **cb_kwargs): a method that takes
        # no response is no callback, and cb_kwargs naming the response could never bind
        if positional is _NOT_CALLABLE:
            _expect(_takes_response(func), _BAD[what], name)
            return getattr(spider, name)
        clash = positional.intersection(kwargs)
        _expect(not clash, reasons.BAD_CB_KWARGS, ",".join(sorted(clash)))
    return getattr(spider, name)


def _with_items(
    named: Any, meta: dict[str, Any], cb_kwargs: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """``meta`` and ``cb_kwargs`` with the items ``named`` (``{"mt"|"kw": {key: class}}``)
    rebuilt as their allowed classes from the fields the entry holds at those keys."""
    _expect(
        isinstance(named, dict) and bool(named) and set(named) <= {"mt", "kw"}, reasons.BAD_ITEMS
    )
    out = {"mt": dict(meta), "kw": dict(cb_kwargs)}
    for where, keys in named.items():
        _expect(isinstance(keys, dict) and bool(keys), reasons.BAD_ITEMS)
        for key, name in keys.items():
            _expect(isinstance(name, str) and key in out[where], reasons.BAD_ITEMS, str(key)[:40])
            cls = classes.item_class(name)
            _expect(cls is not None, reasons.UNKNOWN_ITEM_CLASS, name[:80])
            assert cls is not None
            fields = out[where][key]
            _expect(isinstance(fields, dict), reasons.BAD_ITEMS, str(key)[:40])
            try:
                out[where][key] = cls(**fields)
            except Exception as exc:  # hostile fields: whatever the class' __init__ raises
                raise BadEntry(reasons.BAD_ITEM, f"{name}: {exc}"[:120]) from None
    return out["mt"], out["kw"]


def _valid_cookies(cookies: Any) -> bool:
    if isinstance(cookies, dict):
        return all(
            isinstance(k, str) and isinstance(v, _COOKIE_SCALARS) for k, v in cookies.items()
        )
    if isinstance(cookies, list):
        return all(
            isinstance(c, dict)
            and isinstance(c.get("name"), _COOKIE_SCALARS)
            and isinstance(c.get("value"), _COOKIE_SCALARS)
            and all(isinstance(k, str) and isinstance(v, _COOKIE_SCALARS) for k, v in c.items())
            for c in cookies
        )
    return False


def _valid_headers(headers: Any) -> bool:
    return isinstance(headers, dict) and all(
        isinstance(k, str)
        and _HEADER_NAME.fullmatch(k) is not None
        and isinstance(v, list)
        and all(isinstance(x, str) and not _HEADER_VALUE_FORBIDDEN.search(x) for x in v)
        for k, v in headers.items()
    )


def _looks_like_pickle(payload: bytes) -> bool:
    if payload[:1] == b"\x80":
        return True
    stripped = payload.strip()
    return stripped[:1] != b"" and stripped[:1] in _PICKLE_OPENERS and stripped.endswith(b".")


def _expect(cond: bool, reason: str, detail: str = "") -> None:
    if not cond:
        raise BadEntry(reason, detail)


def _not_json_constant(name: str) -> Any:
    """``NaN`` and ``Infinity`` are Python's, not JSON's: no node writes them, and a request
    holding one could not be queued again."""
    raise ValueError(f"{name} is not JSON")


def decode(
    payload: bytes | str,
    spider: Spider | None = None,
    *,
    max_payload: int = DEFAULT_MAX_PAYLOAD,
    allow_private: bool | frozenset[str] = True,
    priority: int | None = None,
) -> Request:
    """Rebuild a request from a payload written by :func:`encode`, or raise :class:`BadEntry`.
    ``priority`` (from the entry's order score) is the request's priority when given."""
    _expect(len(payload) <= max_payload, reasons.TOO_LARGE, f"{len(payload)} bytes")
    if isinstance(payload, bytes):
        if _looks_like_pickle(payload):
            raise BadEntry(
                reasons.PICKLE_REFUSED, "payload looks like a pickle; pickles are never loaded"
            )
        try:
            payload = payload.decode("utf-8")
        except UnicodeDecodeError:
            raise BadEntry(reasons.NOT_UTF8) from None
    try:
        data = json.loads(payload, parse_constant=_not_json_constant)
    except (ValueError, RecursionError):
        if _looks_like_pickle(payload.encode("latin-1", "replace")):
            raise BadEntry(reasons.PICKLE_REFUSED, "payload looks like a pickle") from None
        raise BadEntry(reasons.NOT_JSON, payload[:60]) from None
    _expect(isinstance(data, dict), reasons.NOT_AN_OBJECT, type(data).__name__)
    unknown = set(data) - _FIELDS
    _expect(not unknown, reasons.UNKNOWN_FIELDS, ",".join(sorted(unknown))[:80])
    if "cb" not in data:
        # a payload leaves out the callback parse (no callback is written as null)
        data["cb"] = DEFAULT_CALLBACK
    url = data.get("u")
    _expect(isinstance(url, str), reasons.MISSING_URL)
    try:
        check_url(url, allow_private=allow_private)
    except UrlRefused as exc:
        raise BadEntry(exc.reason, url[:120]) from None
    method = data.get("m", "GET")
    _expect(
        isinstance(method, str) and method in ALLOWED_METHODS,
        reasons.BAD_METHOD,
        str(method)[:20],
    )
    headers = data.get("h", {})
    _expect(_valid_headers(headers), reasons.BAD_HEADERS)
    if "r" in data:
        referer = data["r"]
        _expect(
            isinstance(referer, str)
            and referer.startswith("/")
            and not _HEADER_VALUE_FORBIDDEN.search(referer),
            reasons.BAD_REFERER,
        )
        headers = {**headers, "Referer": [_origin(url) + referer]}
    body = b""
    if "b" in data:
        _expect(isinstance(data["b"], str), reasons.BAD_BODY)
        try:
            body = base64.b64decode(data["b"], validate=True)
        except (binascii.Error, ValueError):
            raise BadEntry(reasons.BAD_BODY) from None
    meta = data.get("mt", {})
    _expect(isinstance(meta, dict), reasons.BAD_META)
    if any(k.startswith("~") for k in meta):
        meta = {_meta_key(k): v for k, v in meta.items()}
    unsafe = UNSAFE_META_KEYS.intersection(meta)
    _expect(not unsafe, reasons.UNSAFE_META, ",".join(sorted(unsafe)))
    depth = meta.get("depth", 0)
    _expect(
        isinstance(depth, int) and not isinstance(depth, bool) and 0 <= depth <= MAX_DEPTH,
        reasons.BAD_DEPTH,
        repr(depth)[:20],
    )
    priority = data.get("p", 0) if priority is None else priority
    _expect(
        isinstance(priority, int) and not isinstance(priority, bool),
        reasons.BAD_PRIORITY,
        repr(priority)[:20],
    )
    _expect(abs(priority) <= MAX_PRIORITY, reasons.BAD_PRIORITY, str(priority))
    cookies = data.get("c", {})
    _expect(_valid_cookies(cookies), reasons.BAD_COOKIES)
    cb_kwargs = data.get("kw", {})
    _expect(isinstance(cb_kwargs, dict), reasons.BAD_CB_KWARGS)
    flags = data.get("fl", [])
    _expect(
        isinstance(flags, list) and all(isinstance(f, str) for f in flags),
        reasons.BAD_FLAGS,
    )
    encoding = data.get("e", "utf-8")
    _expect(isinstance(encoding, str) and len(encoding) < 40, reasons.BAD_ENCODING)
    _expect(_ascii_compatible(encoding), reasons.BAD_ENCODING, encoding)
    dont_filter = data.get("f", False)
    _expect(isinstance(dont_filter, bool), reasons.BAD_DONT_FILTER)
    if "it" in data:
        meta, cb_kwargs = _with_items(data["it"], meta, cb_kwargs)
    callback = _spider_method(spider, data.get("cb"), "callback", cb_kwargs, meta)
    errback = _spider_method(spider, data.get("eb"), "errback", {}, meta)
    request_cls: type[Request] = Request
    if "cl" in data:
        kind = data["cl"]
        _expect(isinstance(kind, str), reasons.BAD_CLASS)
        found = classes.request_class(kind)
        _expect(found is not None, reasons.UNKNOWN_REQUEST_CLASS, str(kind)[:80])
        assert found is not None
        request_cls = found
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
    if request.url != url:
        # Scrapy normalises the URL (IDNA, percent-encoding): what is fetched is checked too
        try:
            check_url(request.url, allow_private=allow_private)
        except UrlRefused as exc:
            raise BadEntry(exc.reason, request.url[:120]) from None
    return request


#: the payload's field names (short: a queued request's bytes are the frontier's memory)
SHORT_NAMES = {
    "url": "u",
    "class": "cl",
    "method": "m",
    "headers": "h",
    "body": "b",
    "cookies": "c",
    "meta": "mt",
    "priority": "p",
    "dont_filter": "f",
    "callback": "cb",
    "errback": "eb",
    "cb_kwargs": "kw",
    "flags": "fl",
    "encoding": "e",
    "items": "it",
}
#: meta keys every catalog request carries, written short ("~" marks them; a key of the
#: spider's own that starts with "~" is written with one more)
META_SHORT_NAMES = {
    "page_kind": "~k",
    "depth": "~d",
    "site": "~s",
    "seed_meta": "~m",
    "retry_times": "~r",
    "download_slot": "~l",
    "distcrawl_revisit": "~v",  # revisit mode: validators, content hash, backoff of a page
}
_META_SHORT = META_SHORT_NAMES
_META_LONG = {v: k for k, v in META_SHORT_NAMES.items()}


def _meta_key(key: str) -> str:
    if key.startswith("~~"):
        return key[1:]
    if key.startswith("~"):
        long = _META_LONG.get(key)
        _expect(long is not None, reasons.BAD_META, key[:40])
        return str(long)
    return key


#: the callback a request without one gets (Scrapy's default, ``Spider.parse``)
DEFAULT_CALLBACK = "parse"
_FIELDS = frozenset({*SHORT_NAMES.values(), "r"})  # r: a same-site Referer without its origin
