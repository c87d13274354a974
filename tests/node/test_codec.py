"""The JSON request codec: round trips, and refusals of hostile payloads."""

from __future__ import annotations

import json
import pickle

import pytest
import scrapy

from distcrawl.node.requests import codec
from distcrawl.node.requests.payload import BadEntry


class Spider(scrapy.Spider):
    name = "t"

    def parse(self, response):  # pragma: no cover - never called
        pass

    def parse_item(self, response):  # pragma: no cover
        pass


def test_round_trip_keeps_everything_a_request_carries() -> None:
    spider = Spider()
    req = scrapy.Request(
        "http://shop.test/p/1.html?a=1",
        callback=spider.parse_item,
        errback=spider.parse,
        method="POST",
        headers={"X-Token": "abc"},
        body=b"\x00\xffbinary",
        cookies={"s": "1"},
        meta={"page_kind": "product", "depth": 2},
        priority=300,
        dont_filter=True,
        cb_kwargs={"k": [1, 2]},
        flags=["f"],
    )
    back = codec.decode(codec.encode(req, spider), spider)
    assert back.url == req.url
    assert back.callback == spider.parse_item
    assert back.errback == spider.parse
    assert back.method == "POST"
    assert back.headers[b"X-Token"] == b"abc"
    assert back.body == b"\x00\xffbinary"
    assert back.cookies == {"s": "1"}
    assert back.meta == {"page_kind": "product", "depth": 2}
    assert (back.priority, back.dont_filter, back.cb_kwargs, back.flags) == (
        300,
        True,
        {"k": [1, 2]},
        ["f"],
    )


class _Marker:
    def __reduce__(self):  # what a hostile pickle would run
        return (open, ("/tmp/distcrawl-never-created", "w"))


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        (pickle.dumps(_Marker()), "pickle_refused"),
        (b'{"u": "http://a.test/"', "not_json"),
        (b"[1, 2]", "not_an_object"),
        (b'{"u": "file:///etc/passwd"}', "bad_scheme"),
        (b'{"u": "http:///nohost"}', "missing_host"),
        (b'{"u": "http://a.test/", "cb": "nope"}', "unknown_callback"),
        (b'{"u": "http://a.test/", "cb": "__class__"}', "bad_callback"),
        (b'{"u": "http://a.test/", "_class": "os.system"}', "unknown_fields"),
        (b'{"u": "http://a.test/", "p": 1e300}', "bad_priority"),
        (b'{"u": "http://a.test/", "b": "***"}', "bad_body"),
        (b"\xff\xfe\x00garbage", "not_utf8"),
        (b'{"u": "http://a.test/' + b"a" * 300_000 + b'"}', "too_large"),
        # in UTF-16 the URL gains a byte order mark each time it is rebuilt (the fuzzer)
        (b'{"u": "http://s", "e": "utf16"}', "bad_encoding"),
        (b'{"u": "http://s", "e": "no-such-codec"}', "bad_encoding"),
    ],
)
def test_hostile_payloads_are_refused_with_a_reason(payload: bytes, reason: str) -> None:
    with pytest.raises(BadEntry) as info:
        codec.decode(payload, Spider())
    assert info.value.reason == reason


def test_private_addresses_can_be_refused() -> None:
    payload = json.dumps({"u": "http://169.254.169.254/latest/meta-data"})
    with pytest.raises(BadEntry) as info:
        codec.decode(payload, Spider(), allow_private=False)
    assert info.value.reason == "private_address"
    assert codec.decode(payload, Spider(), allow_private=True).url.startswith("http://169.254")


def test_cookies_decode_would_refuse_are_not_written() -> None:
    spider = Spider()
    req = scrapy.Request("http://shop.test/", callback=spider.parse, cookies={"a": {"nested": 1}})
    payload = codec.encode(req, spider)
    assert "cookies" not in json.loads(payload)
    assert codec.decode(payload, spider).url == "http://shop.test/"


def test_payload_is_compact_and_decodes_back_exactly() -> None:
    spider = Spider()
    req = scrapy.Request(
        "http://shop.test/p/1.html",
        callback=spider.parse,
        headers={"Referer": "http://shop.test/c/tools?page=2"},
        meta={"page_kind": "product", "depth": 3, "~odd": 1},
        priority=100,
    )
    payload = codec.encode(req, spider, priority=False)
    assert json.loads(payload) == {
        "u": "http://shop.test/p/1.html",
        "r": "/c/tools?page=2",
        "mt": {"~k": "product", "~d": 3, "~~odd": 1},
    }
    back = codec.decode(payload, spider, priority=100)
    assert back.headers[b"Referer"] == b"http://shop.test/c/tools?page=2"
    assert back.meta == {"page_kind": "product", "depth": 3, "~odd": 1}
    assert (back.priority, back.callback) == (100, spider.parse)
    # a Referer of another site keeps its header; a field of no payload is refused
    other = scrapy.Request("http://shop.test/", headers={"Referer": "http://else.test/"})
    assert json.loads(codec.encode(other))["h"] == {"Referer": ["http://else.test/"]}
    with pytest.raises(BadEntry) as info:
        codec.decode(b'{"u": "http://a.test/", "url": "http://b.test/"}')
    assert info.value.reason == "unknown_fields"
    with pytest.raises(BadEntry):
        codec.decode(b'{"u": "http://a.test/", "r": "http://evil.test/"}')
