"""Plain URLs (``plain_url_host``): a look at a URL that lets the hot paths skip work, found
equal to the work it skips on generated URLs: ``check_url``'s look at the parts where private
hosts are allowed, Scrapy's normalisation of a request's URL (w3lib's ``safe_url_string``), and
a decoded request's URL."""

from __future__ import annotations

import json
import string
from urllib.parse import ParseResult, urlparse

import scrapy
from hypothesis import example, given, settings
from hypothesis import strategies as st
from scrapy.utils.httpobj import urlparse_cached
from w3lib.url import safe_url_string

from distcrawl.base import urls
from distcrawl.base.urls import UrlRefused, check_url, plain_url_host, plain_url_parts
from distcrawl.node.requests import codec


class Spider(scrapy.Spider):
    name = "t"

    def parse(self, response):  # pragma: no cover - never called
        pass


#: characters that matter to a URL's parts and its escaping, and some that are merely odd
_ODD = "/?#:@[]%.-_~!$&'()*+,;=|\\ \t\n\x00\x7fAZaz09éİ\u3000"
_NEAR_PLAIN = st.builds(
    lambda scheme, host, port, path, query: f"{scheme}://{host}{port}{path}{query}",
    st.sampled_from(["http", "https", "HTTP", "ftp", "http:", ""]),
    st.text(string.ascii_letters + string.digits + ".-%[]:@" + "é", min_size=0, max_size=20),
    st.one_of(st.just(""), st.from_regex(r":[0-9]{0,6}", fullmatch=True)),
    st.text(string.ascii_letters + _ODD, max_size=30),
    st.one_of(st.just(""), st.text(_ODD, max_size=10).map(lambda q: "?" + q)),
)
_URLS = st.one_of(
    st.from_regex(urls._PLAIN_URL, fullmatch=True),
    _NEAR_PLAIN,
    st.text(_ODD + string.ascii_lowercase, max_size=60),
)


def _slow_check(url: str) -> str | None:
    try:
        return urls._checked_host(url, True)
    except UrlRefused:
        return None


@settings(max_examples=1500, deadline=None)
@given(_URLS)
@example("http://127.0.0.1:8000/p/1-black-unit-1.html")
@example("http://shop.test:65535/?a=1")
@example("http://shop.test:65536/")
@example("http://shop.test:080/")
@example("http://Shop.test/")
@example("http://shop.test/p?")
@example("http://shop.test/p#")
@example("http://0x7f.1/")
@example("http://./")
@example("http://shop.test/%zz'x")
@example("http://shop.test/?'")
@example("http://shop.test/a;b/c;d?e;f")
@example("http://shop.test/;")
@example("http://shop.test/?")
@example("http://shop.test/a?b?c")
def test_a_plain_url_is_what_the_skipped_work_would_find(url: str) -> None:
    host = plain_url_host(url)
    if host is None:
        return
    assert _slow_check(url) == host
    assert check_url(url, allow_private=True) == host
    assert safe_url_string(url) == url
    assert scrapy.Request(url).url == url
    spider = Spider()
    request = codec.decode(codec.encode(scrapy.Request(url, meta={"k": 1}), spider), spider)
    assert request.url == url
    assert request.meta == {"k": 1}  # Scrapy's verbatim_url, used to build it, is gone
    # the parts filled in Scrapy's cache, without a parse, are the parse's
    parts = plain_url_parts(url)
    assert parts is None or (type(parts) is ParseResult and parts == urlparse(url))
    assert parts is not None or ";" in url.partition("?")[0]
    assert urlparse_cached(request) == urlparse(url)


@settings(max_examples=500, deadline=None)
@given(_URLS)
def test_a_decoded_url_is_the_one_scrapy_makes(url: str) -> None:
    """Whatever the URL, a decoded request's is Scrapy's normalisation of it (or the payload
    is refused, as before plain URLs had a path of their own)."""
    try:
        expected = scrapy.Request(url).url
    except (TypeError, ValueError):
        return
    payload = '{"u":' + json.dumps(url, ensure_ascii=False) + "}"
    try:
        request = codec.decode(payload, Spider())
    except ValueError:
        return
    assert request.url == expected
    assert "verbatim_url" not in request.meta
    assert urlparse_cached(request) == urlparse(expected)


def test_the_shops_urls_are_plain() -> None:
    """What a crawl's URLs mostly look like takes the short path."""
    assert plain_url_host("http://127.0.0.1:8000/p/1-black-unit-1.html") == "127.0.0.1"
    assert plain_url_host("https://shop.example/c/gadgets?page=2&sort=price") == "shop.example"
    assert plain_url_host("https://shop.example") is None  # no path: Scrapy's own way
    assert plain_url_host("https://shop.example/a b") is None
