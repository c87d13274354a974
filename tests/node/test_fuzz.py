"""Property-based tests: thousands of generated seeds and queue entries through the code paths a
node runs (``parse_seed`` -> ``make_request_from_seed`` -> ``codec.encode``; ``codec.decode``
with ``allow_private=True`` as the scheduler calls it). Nothing but BadSeed / BadEntry may
escape; whatever is accepted must be a request the node can queue, fingerprint and queue again.
"""

from __future__ import annotations

import base64
import json
import pickle
import string
from typing import Any

from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st
from scrapy import Request
from scrapy.utils.request import RequestFingerprinter

from distcrawl.node.requests import codec
from distcrawl.node.requests.payload import ALLOWED_METHODS, SHORT_NAMES, UNSAFE_META_KEYS, BadEntry
from distcrawl.node.seeds.parse import BadSeed, parse_seed
from distcrawl.node.spiders.catalog import CatalogSpider

SPIDER = CatalogSpider()
FINGERPRINT = RequestFingerprinter()
ALLOW = frozenset({"127.0.0.1", "localhost"})
# fast and repeatable: no example database in the shared checkout, no per-example deadline
FUZZ = settings(
    max_examples=500,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)

json_scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
hosts = st.one_of(
    st.sampled_from(
        [
            "shop.example.com",
            "127.0.0.1",
            "localhost",
            "10.0.0.1",
            "[::1]",
            "[fd00:ec2::254]",
            "169.254.169.254",
            "2130706433",
            "xn--bcher-kva.example",
            "bücher.example",
            "a" * 300 + ".test",
            "",
            "[::ffff:127.0.0.1]",
            "user:pw@shop.test",
            "shop.test:99999",
            "shop.test:-1",
            "shop.test:abc",
            "[zz::1]",
        ]
    ),
    st.text(alphabet=string.ascii_letters + string.digits + ".-_[]:@%", max_size=40),
    st.text(max_size=20),
)
good_urls = st.builds(
    lambda scheme, host, path, query: f"{scheme}://{host}/{path}{query}",
    st.sampled_from(["http", "https"]),
    st.sampled_from(
        ["shop.example.com", "127.0.0.1:8000", "shop.test:8080", "bücher.example", "a-b.test"]
    ),
    st.text(max_size=20),
    st.just("") | st.text(max_size=12).map(lambda q: "?" + q),
)
urls = good_urls | st.builds(
    lambda scheme, host, path: f"{scheme}{host}{path}",
    st.sampled_from(
        ["http://", "https://", "HTTP://", "ftp://", "file://", "javascript:", "data:", "//", ""]
    ),
    hosts,
    st.text(max_size=40) | st.just("/") | st.text(alphabet=string.printable, max_size=60),
)
seed_objects = st.fixed_dictionaries(
    {},
    optional={
        "url": urls | json_values,
        "priority": st.integers(-200_000, 200_000) | json_values,
        "meta": st.dictionaries(
            st.sampled_from(["tag", "site", "depth", "proxy", "download_maxsize", "x"])
            | st.text(max_size=6),
            json_values,
            max_size=3,
        )
        | json_values,
        "evil": json_values,
    },
)
good_seed_objects = st.fixed_dictionaries(
    {"url": good_urls},
    optional={
        "priority": st.integers(-100_000, 100_000),
        "meta": st.dictionaries(st.text(max_size=8), json_values, max_size=3),
    },
)
raw_seeds = st.one_of(
    good_urls,
    good_seed_objects.map(json.dumps),
    st.binary(max_size=200),
    st.text(max_size=200),
    urls,
    urls.map(str.encode),
    seed_objects.map(json.dumps),
    seed_objects.map(lambda o: json.dumps(o)[: len(json.dumps(o)) // 2]),
)


def node_takes_seed(raw: bytes | str) -> Request | None:
    """What the scheduler does with one raw seed: a request to queue, or None if refused."""
    try:
        seed = parse_seed(raw, allow_private=ALLOW)
    except BadSeed as exc:
        assert exc.reason and exc.reason.replace("_", "").isalnum()
        event(f"refused: {exc.reason}")
        return None
    event("accepted")
    request = SPIDER.make_request_from_seed(seed)
    codec.decode(codec.encode(request, SPIDER), SPIDER, allow_private=True)
    FINGERPRINT.fingerprint(request)
    return request


@FUZZ
@given(raw_seeds)
@example(b"\x80\x04\x95\x00")
@example("http://[::1")
@example("http://shop.example.com\u00af")  # IDNA turns it into "xn--com -ewc": a space
@example('{"url": "http://shop.test/", "meta": {"proxy": "http://10.0.0.1:3128"}}')
@example('{"url": "http://shop.test/", "meta": {"depth": -1000000}}')
def test_every_seed_is_a_request_or_refused_with_a_reason(raw: bytes | str) -> None:
    request = node_takes_seed(raw)
    if request is not None:
        assert request.url.startswith(("http://", "https://"))
        assert not UNSAFE_META_KEYS.intersection(request.meta)


@FUZZ
@given(urls)
def test_every_url_seed_is_a_request_or_refused_with_a_reason(url: str) -> None:
    node_takes_seed(url)


fields = {
    "url": urls | json_values,
    "method": st.sampled_from(["GET", "POST", "TRACE", "get", ""]) | json_values,
    "headers": st.dictionaries(
        st.text(max_size=12), st.lists(st.text(max_size=12), max_size=2), max_size=3
    )
    | json_values,
    "body": st.binary(max_size=30).map(lambda b: base64.b64encode(b).decode()) | json_values,
    "cookies": st.dictionaries(st.text(max_size=5), json_scalars, max_size=2)
    | st.lists(st.dictionaries(st.sampled_from(["name", "value", "path"]), json_values))
    | json_values,
    "meta": st.dictionaries(
        st.sampled_from(["depth", "proxy", "redirect_urls", "retry_times", "page_kind"])
        | st.text(max_size=6),
        json_values,
        max_size=3,
    )
    | json_values,
    "priority": st.integers(-200_000, 200_000) | json_values,
    "dont_filter": st.booleans() | json_values,
    "callback": st.sampled_from(
        ["parse", "start", "close", "make_request_from_seed", "from_crawler", "__init__", "nope"]
    )
    | json_values,
    "errback": st.sampled_from(["parse", "close", "log"]) | json_values,
    "cb_kwargs": st.dictionaries(st.sampled_from(["response", "self", "k"]), json_values)
    | json_values,
    "flags": st.lists(st.text(max_size=5), max_size=2) | json_values,
    "encoding": st.sampled_from(["utf-8", "latin-1", "rot13", "utf-16", "nope"]) | json_values,
}
token = st.text(alphabet=string.ascii_letters + string.digits + "-_", min_size=1, max_size=10)
good_fields = {
    "method": st.sampled_from(sorted(ALLOWED_METHODS)),
    "headers": st.dictionaries(token, st.lists(st.text(max_size=12), max_size=2), max_size=3),
    "body": st.binary(max_size=30).map(lambda b: base64.b64encode(b).decode()),
    "cookies": st.dictionaries(token, json_scalars.filter(lambda v: v is not None), max_size=2),
    "meta": st.dictionaries(st.text(max_size=8), json_values, max_size=3)
    | st.fixed_dictionaries({"depth": st.integers(0, 100), "page_kind": st.text(max_size=8)}),
    "priority": st.integers(-100_000, 100_000),
    "dont_filter": st.booleans(),
    "callback": st.just("parse"),
    "errback": st.just("parse"),
    "cb_kwargs": st.dictionaries(st.text(max_size=8), json_values, max_size=2),
    "flags": st.lists(st.text(max_size=5), max_size=2),
    "encoding": st.sampled_from(["utf-8", "latin-1", "cp1252", "ascii"]),
}
good_entries = st.fixed_dictionaries({"url": good_urls}, optional=good_fields)
# a real entry with one field replaced by something hostile: reaches the deep checks
one_bad_field = st.sampled_from(sorted(fields)).flatmap(lambda k: st.tuples(st.just(k), fields[k]))
near_entries = st.builds(lambda entry, bad: {**entry, bad[0]: bad[1]}, good_entries, one_bad_field)
entry_objects = (
    good_entries
    | near_entries
    | st.fixed_dictionaries({"url": urls}, optional={k: v for k, v in fields.items() if k != "url"})
    | st.fixed_dictionaries({}, optional={**fields, "_class": json_values})
).map(lambda entry: {SHORT_NAMES.get(k, k): v for k, v in entry.items()})


class Marker:
    def __reduce__(self) -> Any:
        return (open, ("/tmp/distcrawl-fuzz-marker-never-created", "w"))


payloads = st.one_of(
    st.binary(max_size=300),
    st.text(max_size=300),
    entry_objects.map(json.dumps),
    entry_objects.map(json.dumps).map(str.encode),
    st.builds(lambda text, cut: text[:cut], entry_objects.map(json.dumps), st.integers(0, 200)),
    st.builds(
        lambda obj, proto: pickle.dumps(obj, protocol=proto),
        json_values,
        st.integers(0, pickle.HIGHEST_PROTOCOL),
    ),
    st.integers(0, pickle.HIGHEST_PROTOCOL).map(lambda p: pickle.dumps(Marker(), protocol=p)),
)


def node_takes_entry(payload: bytes | str) -> Request | None:
    """What the scheduler does with one leased payload: a request, or None if moved aside."""
    try:
        request = codec.decode(payload, SPIDER, allow_private=True)
    except BadEntry as exc:
        assert exc.reason and exc.reason.replace("_", "").isalnum()
        event(f"moved aside: {exc.reason}")
        return None
    event("accepted")
    FINGERPRINT.fingerprint(request)
    again = codec.decode(codec.encode(request, SPIDER), SPIDER, allow_private=True)
    assert (again.url, again.method, again.body, again.priority) == (
        request.url,
        request.method,
        request.body,
        request.priority,
    )
    return request


@FUZZ
@given(payloads)
@example(b'{"u": "http://s.test/", "cb": "make_request_from_seed"}')
@example(b'{"u": "http://a.test/", "cb": "close"}')
@example(b'{"u": "http://a.test/", "cb": "parse", "kw": {"response": 1}}')
@example(b'{"u": "http://a.test/", "h": {"X\\r\\nEvil": ["1"]}}')
@example(b'{"u": "http://a.test/", "c": [1, 2]}')
@example(b"cos\nsystem\n(S'touch /tmp/x'\ntR.")
@example(b'{"u": "http://s.test/", "cb": "parse", "kw": {"": Infinity}}')
@example(b'{"u": "http://s.test/", "mt": {"x": NaN}}')
def test_every_queue_entry_is_a_request_or_moved_aside_with_a_reason(
    payload: bytes | str,
) -> None:
    request = node_takes_entry(payload)
    if request is not None:
        assert request.callback in (None, SPIDER.parse)
        assert request.errback in (None, SPIDER.parse)
        assert not UNSAFE_META_KEYS.intersection(request.meta)


@FUZZ
@given(st.binary(min_size=1, max_size=40), st.integers(0, 10_000), st.data())
def test_damaged_real_entries_never_crash(noise: bytes, where: int, data: Any) -> None:
    request = Request(
        "http://shop.test/p/1.html",
        callback=SPIDER.parse,
        meta={"site": "shop.test", "depth": 3, "page_kind": "product"},
        priority=100,
    )
    payload = codec.encode(request, SPIDER).encode()
    at = where % (len(payload) + 1)
    mode = data.draw(st.sampled_from(["insert", "overwrite", "truncate"]))
    if mode == "insert":
        damaged = payload[:at] + noise + payload[at:]
    elif mode == "overwrite":
        damaged = payload[:at] + noise + payload[at + len(noise) :]
    else:
        damaged = payload[:at]
    node_takes_entry(damaged)
