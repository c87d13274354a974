"""A queued request's callback is checked as a callback, not against its cb_kwargs: Scrapy
lets a middleware add cb_kwargs after scheduling, and a call that does not bind fails with the
spider's own TypeError, as on Scrapy."""

from __future__ import annotations

import json
from typing import Any

import pytest
import scrapy

from distcrawl.node.requests import codec
from distcrawl.node.requests.payload import BadEntry


class Spider(scrapy.Spider):
    name = "cb"

    def parse_takes_less(self, response: Any, key: str, callback: str) -> None:
        pass

    def parse_takes_more(self, response: Any, key: str, number: int, other: int) -> None:
        pass

    def parse_from_middleware(self, response: Any, from_process_request: bool) -> str:
        return f"added by a middleware: {from_process_request}"

    def helper(self) -> None:
        pass  # pragma: no cover - never called


SPIDER = Spider()


@pytest.mark.parametrize(
    ("callback", "cb_kwargs", "error"),
    [
        ("parse_takes_less", {"key": 1, "number": 2, "callback": 3}, "unexpected keyword"),
        ("parse_takes_more", {"key": 1, "number": 2}, "missing 1 required"),
    ],
)
def test_a_callback_whose_cb_kwargs_do_not_bind_fails_when_called(
    callback: str, cb_kwargs: dict[str, Any], error: str
) -> None:
    payload = json.dumps({"u": "http://shop.test/", "cb": callback, "kw": cb_kwargs})
    request = codec.decode(payload, SPIDER)
    assert request.callback == getattr(SPIDER, callback)
    with pytest.raises(TypeError, match=error):
        request.callback(None, **request.cb_kwargs)


def test_cb_kwargs_a_middleware_adds_after_the_lease_reach_the_callback() -> None:
    payload = json.dumps({"u": "http://shop.test/", "cb": "parse_from_middleware"})
    request = codec.decode(payload, SPIDER)
    request.cb_kwargs["from_process_request"] = True  # a downloader middleware's doing
    assert request.callback(None, **request.cb_kwargs) == "added by a middleware: True"


def test_a_method_that_takes_no_response_is_no_callback() -> None:
    with pytest.raises(BadEntry) as exc:
        codec.decode(json.dumps({"u": "http://shop.test/", "cb": "helper"}), SPIDER)
    assert exc.value.reason == "bad_callback"
