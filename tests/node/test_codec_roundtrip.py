"""decode(encode(request)) is the request: generated requests (headers, meta, body, cookies,
flags, priorities, callbacks, classes, encodings) come back equal in every field the codec
carries, from today's entries and from entries in the older, longer form (meta keys by their
long names, a same-site Referer as a whole header, the priority in the entry)."""

from __future__ import annotations

import inspect
import json
import string
from typing import Any

import scrapy
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st
from scrapy import FormRequest, Request
from scrapy.http import Headers, JsonRequest

from distcrawl.node.requests import codec
from distcrawl.node.requests.payload import (
    ALLOWED_METHODS,
    CREDENTIAL_HEADERS,
    META_SHORT_NAMES,
    UNSAFE_META_KEYS,
)


class Spider(scrapy.Spider):
    name = "roundtrip"

    def parse(self, response, **kwargs):  # pragma: no cover - never called
        pass

    def parse_item(self, response, **kwargs):  # pragma: no cover
        pass

    def on_error(self, failure):  # pragma: no cover
        pass


SPIDER = Spider()
SEARCH = settings(
    max_examples=400,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)

_token = st.text(string.ascii_letters + string.digits + "-_", min_size=1, max_size=10)
# a header value as bytes: any byte but the three a header may not hold
_header_value = st.binary(max_size=16).filter(lambda b: not set(b) & {0, 10, 13})
_referers = st.sampled_from(
    ["http://shop.test/c/tools?page=2", "http://shop.test/", "https://else.test/x", "/rel"]
)
headers = st.dictionaries(
    st.one_of(_token, st.sampled_from(["Referer", "referer", "Authorization", "X-A", "x-a"])),
    st.one_of(_header_value, st.lists(_header_value, max_size=3), _referers),
    max_size=4,
)
json_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=10)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner),
    max_leaves=8,
)
meta = st.dictionaries(
    st.one_of(
        st.sampled_from(sorted(META_SHORT_NAMES)),
        st.sampled_from(["~k", "~~x", "~", "rule", "redirect_urls", *sorted(UNSAFE_META_KEYS)]),
        st.text(max_size=6),
    ),
    json_values,
    max_size=6,
).map(lambda m: {**m, "depth": abs(m["depth"]) % 1000} if type(m.get("depth")) is int else m)
cookie_scalars = st.one_of(
    st.text(max_size=6), st.integers(), st.booleans(), st.floats(allow_nan=False)
)
cookies = st.one_of(
    st.dictionaries(st.text(max_size=6), cookie_scalars, max_size=3),
    st.lists(
        st.fixed_dictionaries(
            {"name": st.text(max_size=5), "value": cookie_scalars},
            optional={"path": st.just("/"), "domain": st.just("shop.test")},
        ),
        max_size=2,
    ),
)
_path = st.text(string.ascii_letters + string.digits + "-._~/%é ?=&#", max_size=24)
urls = st.builds(
    lambda scheme, host, port, path: f"{scheme}://{host}{port}/{path}",
    st.sampled_from(["http", "https"]),
    st.sampled_from(["shop.test", "127.0.0.1", "Shop.Test", "bücher.example", "[::1]"]),
    st.sampled_from(["", ":8080", ":80"]),
    _path,
)
callbacks = st.sampled_from([None, "parse", "parse_item"])
requests = st.fixed_dictionaries(
    {"url": urls},
    optional={
        "cls": st.sampled_from([Request, FormRequest, JsonRequest]),
        "callback": callbacks,
        "errback": st.sampled_from([None, "on_error", "parse"]),
        "method": st.sampled_from(sorted(ALLOWED_METHODS)),
        "headers": headers,
        "body": st.binary(max_size=20),
        "cookies": cookies,
        "meta": meta,
        "priority": st.integers(-100_000, 100_000),
        "dont_filter": st.booleans(),
        "cb_kwargs": st.dictionaries(
            st.text(string.ascii_letters, min_size=1, max_size=6).filter(
                lambda k: k not in ("self", "response", "failure")
            ),
            json_values,
            max_size=3,
        ),
        "flags": st.lists(st.text(max_size=5), max_size=3),
        "encoding": st.sampled_from(["utf-8", "latin-1", "cp1252", "ascii"]),
    },
)


def _build(fields: dict[str, Any]) -> Request:
    fields = dict(fields)
    cls = fields.pop("cls", Request)
    for role in ("callback", "errback"):
        name = fields.get(role)
        if name is not None:
            fields[role] = getattr(SPIDER, name)
    try:
        return cls(**fields)
    except (UnicodeError, ValueError):  # what Scrapy itself refuses to build
        assume(False)
        raise


def _carried(request: Request) -> dict[str, Any]:
    """Every field the codec carries, as a comparable value."""
    return {
        "class": type(request),
        "url": request.url,
        "method": request.method,
        "headers": {k: v for k, v in dict(request.headers).items()},
        "headers_type": type(request.headers),
        "body": request.body,
        "cookies": request.cookies,
        "meta": request.meta,
        "priority": request.priority,
        "dont_filter": request.dont_filter,
        "callback": request.callback,
        "errback": request.errback,
        "cb_kwargs": request.cb_kwargs,
        "flags": request.flags,
        "encoding": request.encoding,
    }


def _expected(request: Request) -> dict[str, Any]:
    """What the queue carries of ``request``: all but a node's credential headers and the meta
    keys that never travel."""
    want = _carried(request)
    want["headers"] = {
        k: v for k, v in want["headers"].items() if k.lower() not in CREDENTIAL_HEADERS
    }
    want["meta"] = {k: v for k, v in request.meta.items() if k not in UNSAFE_META_KEYS}
    return want


def _older(payload: str, priority: int) -> str | None:
    """The same entry as older nodes wrote it: meta keys by their long names, a same-site
    Referer as a whole header, the priority in the entry (None: a meta key of the spider's
    own starting with "~", which that form could not tell from a short name)."""
    data = json.loads(payload)
    long = {v: k for k, v in META_SHORT_NAMES.items()}
    if "mt" in data:
        if any(k.startswith("~~") for k in data["mt"]):
            return None
        data["mt"] = {long.get(k, k): v for k, v in data["mt"].items()}
    if "r" in data:
        origin = codec._origin(data["u"])
        data["h"] = {**data.get("h", {}), "Referer": [origin + data.pop("r")]}
    data["p"] = priority
    return json.dumps(data)


@SEARCH
@given(requests)
@example({"url": "http://shop.test/p/1.html", "headers": {"Referer": "http://shop.test/c?p=2"}})
@example({"url": "http://shop.test/p/1.html", "headers": {"referer": "http://shop.test/c"}})
@example({"url": "http://shop.test/", "headers": {"Referer": "/rel", "referer": "x"}})
@example({"url": "http://shop.test/", "meta": {"~d": 1, "depth": 2, "~~x": 3, "~": 4}})
@example({"url": "http://bücher.example/ä b", "encoding": "latin-1"})
@example({"url": "http://shop.test/", "meta": {"depth": None}})
@example({"url": "http://shop.test/", "cookies": {"a": float("inf")}})
@example({"url": "http://shop.test/", "priority": 1})
def test_a_decoded_request_equals_the_one_encoded(fields: dict[str, Any]) -> None:
    request = _build(fields)
    want = _expected(request)
    for with_priority in (True, False):
        try:
            payload = codec.encode(request, SPIDER, priority=with_priority)
        except ValueError:  # the node keeps it in memory, unqueued
            assume(False)
            raise
        # the node keeps one an entry could not hold in memory too
        assume(codec.entry_refusal(request, payload) is None)
        lease_priority = None if with_priority else request.priority
        back = codec.decode(payload, SPIDER, priority=lease_priority)
        assert _carried(back) == want
        # the entry as older nodes wrote it reads back the same
        older = _older(payload, request.priority)
        if older is not None:
            assert _carried(codec.decode(older, SPIDER)) == want
        # and the decoded request is one Scrapy would build from the same fields
        kwargs = {k: v for k, v in want.items() if k not in ("class", "url", "headers_type")}
        rebuilt = want["class"](want["url"], **kwargs)
        assert _carried(rebuilt) == _carried(back)


def test_request_parameters_are_scrapys_in_its_order() -> None:
    """The codec builds a plain Request with its arguments by position."""
    parameters = list(inspect.signature(Request.__init__).parameters)[1:]
    assert tuple(parameters) == codec.REQUEST_PARAMETERS


def test_decoded_headers_are_scrapys_headers() -> None:
    payload = json.dumps(
        {"u": "http://shop.test/", "h": {"x-a": ["1"], "X-A": ["2", "3"], "accept": ["*/*"]}}
    )
    back = codec.decode(payload, SPIDER)
    assert type(back.headers) is Headers
    assert dict(back.headers) == dict(
        Headers({b"x-a": [b"1"], b"X-A": [b"2", b"3"], b"accept": [b"*/*"]})
    )
    assert back.headers.getlist("X-a") == [b"1", b"2", b"3"]
