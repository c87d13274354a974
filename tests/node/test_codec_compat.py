"""The codec for any Scrapy spider: CrawlSpider rules, Request subclasses, refused meta."""

from __future__ import annotations

import asyncio
import json

import pytest
import scrapy
from scrapy.http import HtmlResponse, JsonRequest
from scrapy.linkextractors import LinkExtractor
from scrapy.spiders import CrawlSpider, Rule

from distcrawl.node.requests import classes, codec
from distcrawl.node.requests.payload import BadEntry


class RulesSpider(CrawlSpider):
    name = "rules"
    rules = (
        Rule(LinkExtractor(allow=r"/c/"), follow=True),
        Rule(
            LinkExtractor(allow=r"/p/"),
            callback="parse_item",
            errback="on_error",
            cb_kwargs={"kind": "product"},
            process_request="tag",
        ),
    )

    def parse_item(self, response, kind):
        yield {"url": response.url, "kind": kind}

    def on_error(self, failure):  # pragma: no cover
        pass

    def tag(self, request, response):
        request.meta["tagged"] = True
        return request

    def _private(self, response):  # pragma: no cover
        pass


def _links(spider: RulesSpider) -> list[scrapy.Request]:
    body = b'<html><body><a href="/c/toys/">t</a><a href="/p/1.html">p</a></body></html>'
    response = HtmlResponse("http://shop.test/", body=body)
    return [r for r in spider._requests_to_follow(response) if r is not None]


def test_rule_requests_round_trip_to_their_rule() -> None:
    spider = RulesSpider()
    category, product = _links(spider)
    for request in (category, product):
        payload = codec.encode(request, spider)
        assert json.loads(payload)["cb"] == "@rule"
        back = codec.decode(payload, spider)
        assert back.callback == spider._callback
        assert back.errback == spider._errback
        assert back.meta["rule"] == request.meta["rule"]
    assert codec.decode(codec.encode(product, spider), spider).meta["tagged"] is True


def test_decoded_rule_request_runs_the_rule_callback_with_its_cb_kwargs() -> None:
    spider = RulesSpider()
    product = _links(spider)[1]
    back = codec.decode(codec.encode(product, spider), spider)
    response = HtmlResponse(back.url, body=b"<html></html>", request=back)

    async def collect() -> list[object]:
        return [x async for x in back.callback(response)]

    out = asyncio.run(collect())
    assert out == [{"url": "http://shop.test/p/1.html", "kind": "product"}]


@pytest.mark.parametrize("rule", [7, -1, "0", None, True])
def test_a_rule_reference_to_no_rule_is_refused(rule: object) -> None:
    spider = RulesSpider()
    payload = json.dumps({"u": "http://shop.test/", "cb": "@rule", "mt": {"rule": rule}})
    with pytest.raises(BadEntry) as exc:
        codec.decode(payload, spider)
    assert exc.value.reason == "bad_rule"


def test_a_rule_reference_on_a_spider_without_rules_is_refused() -> None:
    payload = json.dumps({"u": "http://shop.test/", "cb": "@rule", "mt": {"rule": 0}})
    with pytest.raises(BadEntry) as exc:
        codec.decode(payload, scrapy.Spider(name="plain"))
    assert exc.value.reason == "bad_rule"


def test_private_methods_stay_unqueueable() -> None:
    spider = RulesSpider()
    with pytest.raises(ValueError, match="_private"):
        codec.encode(scrapy.Request("http://shop.test/", callback=spider._private), spider)
    for name in ("_private", "_callback", "_parse"):
        payload = json.dumps({"u": "http://shop.test/", "cb": name})
        with pytest.raises(BadEntry):
            codec.decode(payload, spider)


def test_form_and_json_requests_keep_their_class_and_body() -> None:
    spider = RulesSpider()
    form = scrapy.FormRequest(
        "http://shop.test/search",
        formdata={"q": "toy"},
        callback=spider.parse_item,
        cb_kwargs={"kind": "x"},
        cookies={"s": "1"},
        priority=5,
        dont_filter=True,
    )
    back = codec.decode(codec.encode(form, spider), spider)
    assert type(back) is scrapy.FormRequest
    assert (back.method, back.body) == ("POST", b"q=toy")
    assert back.headers[b"Content-Type"] == b"application/x-www-form-urlencoded"
    assert (back.cookies, back.priority, back.dont_filter, back.cb_kwargs) == (
        {"s": "1"},
        5,
        True,
        {"kind": "x"},
    )
    js = JsonRequest("http://shop.test/api", data={"a": [1, 2]})
    back = codec.decode(codec.encode(js, spider), spider)
    assert type(back) is JsonRequest
    assert json.loads(back.body) == {"a": [1, 2]}
    assert back.method == "POST"


class _Custom(scrapy.Request):
    pass


def test_other_request_classes_need_the_allow_list() -> None:
    with pytest.raises(ValueError, match="DISTCRAWL_REQUEST_CLASSES"):
        codec.encode(_Custom("http://shop.test/"))
    payload = json.dumps({"u": "http://shop.test/", "cl": "os.system"})
    with pytest.raises(BadEntry) as exc:
        codec.decode(payload)
    assert exc.value.reason == "unknown_request_class"
    classes.allow_request_classes([f"{__name__}._Custom"])
    assert type(codec.decode(codec.encode(_Custom("http://shop.test/")))) is _Custom


def test_meta_that_json_cannot_carry_is_refused_naming_the_key() -> None:
    request = scrapy.Request("http://shop.test/", meta={"ok": 1, "when": object()})
    with pytest.raises(ValueError, match="meta key 'when' holds a object"):
        codec.encode(request)
    request = scrapy.Request("http://shop.test/", cb_kwargs={"s": {1, 2}})
    with pytest.raises(ValueError, match="cb_kwargs key 's'"):
        codec.encode(request)
    # a dead letter is still written, without the value
    lenient = json.loads(codec.encode(request.replace(meta={"when": object()}), strict=False))
    assert "meta" not in lenient
