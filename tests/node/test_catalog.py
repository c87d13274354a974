"""The catalog spider's own bookkeeping: links it already handed to the scheduler."""

from __future__ import annotations

import urllib.request

import scrapy
from scrapy import signals
from scrapy.http import HtmlResponse
from scrapy.utils.test import get_crawler

from distcrawl.node import signals as dc_signals
from distcrawl.node.revisit.unlisted import LISTED_META
from distcrawl.node.spiders.catalog import CatalogSpider

PAGE = b"""<html><body>
<nav><a href="/c/shoes/">Shoes</a> <a href="/c/hats/">Hats</a></nav>
<main><h1>Welcome</h1></main>
</body></html>"""


def _links(spider: CatalogSpider) -> list[str]:
    response = HtmlResponse(
        "http://shop.test/",
        body=PAGE,
        encoding="utf-8",
        request=scrapy.Request("http://shop.test/", meta={"site": "shop.test"}),
    )
    return [r.url for r in spider.parse(response) if isinstance(r, scrapy.Request)]


def test_links_that_reached_the_scheduler_are_not_built_again() -> None:
    crawler = get_crawler(CatalogSpider, {"CATALOG_KNOWN_LINKS": 100})
    crawler.spider = spider = CatalogSpider.from_crawler(crawler)
    crawler.stats.open_spider()
    first = _links(spider)
    assert first == ["http://shop.test/c/shoes/", "http://shop.test/c/hats/"]
    # only one of them got through the middlewares to the scheduler (the other was dropped
    # on the way, e.g. by a depth limit): only that one is skipped next time
    crawler.signals.send_catch_log(
        signals.request_scheduled,
        request=scrapy.Request("http://shop.test/c/shoes/"),
        spider=spider,
    )
    # a dont_filter request bypasses the dupefilter: it proves nothing about later links
    crawler.signals.send_catch_log(
        signals.request_scheduled,
        request=scrapy.Request("http://shop.test/c/hats/", dont_filter=True),
        spider=spider,
    )
    assert _links(spider) == ["http://shop.test/c/hats/"]
    assert crawler.stats.get_value("catalog/links/known") == 1


def test_known_links_are_forgotten_with_the_dupefilter_and_on_a_rewind() -> None:
    crawler = get_crawler(CatalogSpider, {"CATALOG_KNOWN_LINKS": 100})
    crawler.spider = spider = CatalogSpider.from_crawler(crawler)
    crawler.stats.open_spider()
    for forget in (dc_signals.frontier_forgot, dc_signals.frontier_rewound):
        for url in ("http://shop.test/c/shoes/", "http://shop.test/c/hats/"):
            request = scrapy.Request(url)
            crawler.signals.send_catch_log(
                signals.request_scheduled, request=request, spider=spider
            )
        assert _links(spider) == []
        crawler.signals.send_catch_log(forget)  # the shared dupefilter forgot them: push again
        assert _links(spider) == ["http://shop.test/c/shoes/", "http://shop.test/c/hats/"]


def test_a_listing_page_tells_the_frontier_which_products_it_links(shop_factory) -> None:  # type: ignore[no-untyped-def]
    shop = shop_factory(products=30, tracking_params=False)
    leaf = shop.catalog.leaves()[0]
    base = shop.url.rstrip("/")
    url = base + leaf.path
    with urllib.request.urlopen(url, timeout=30) as answer:
        body = answer.read()
    crawler = get_crawler(CatalogSpider)
    crawler.spider = spider = CatalogSpider.from_crawler(crawler)
    crawler.stats.open_spider()
    request = scrapy.Request(url, meta={"page_kind": "listing"})
    response = HtmlResponse(url, body=body, encoding="utf-8", request=request)
    list(spider.parse(response))
    shown = shop.catalog.listing_page(leaf, 1)
    assert shown and response.meta[LISTED_META] == [base + p.path for p in shown]


def test_site_profiles_split_alike_on_commas_and_colons() -> None:
    from distcrawl.node.spiders.catalog import profile_paths

    assert profile_paths("a.toml:dir/") == ["a.toml", "dir/"]
    assert profile_paths("a.toml,dir/") == ["a.toml", "dir/"]
    assert profile_paths(["a.toml", "b.toml:c/"]) == ["a.toml", "b.toml", "c/"]
    assert profile_paths("") == [] and profile_paths(None) == []


def test_a_bad_site_profile_stops_the_node_with_one_error_line(tmp_path) -> None:
    import os
    import subprocess
    import sys

    bad = tmp_path / "bad.toml"
    bad.write_text("this is [not toml")
    env = {
        **os.environ,
        "SCRAPY_SETTINGS_MODULE": "distcrawl.settings",
        # never contacted: the node stops before it opens the frontier
        "REDIS_URL": "redis://127.0.0.1:1/0",
        "MONGO_URI": "mongodb://127.0.0.1:1/x",
        "DISTCRAWL_SITE_PROFILES": str(bad),
    }
    done = subprocess.run(
        [sys.executable, "-m", "scrapy", "crawl", "catalog"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    errors = [line for line in done.stderr.splitlines() if " ERROR: " in line]
    assert len(errors) == 1 and "Bad site profile" in errors[0] and str(bad) in errors[0]


def _dense_page(links: int) -> bytes:
    products = "".join(f'<li><a href="/p/{i}-x.html">P{i}</a> $1.00</li>' for i in range(3))
    nav = "".join(f'<a href="/c/d{i}/">{i}</a>' for i in range(links))
    return (
        f"<html><body><nav>{nav}</nav><ul>{products}</ul>"
        '<a rel="next" href="/c/all/?page=2">Next</a></body></html>'
    ).encode()


def _spider(**settings: object) -> CatalogSpider:
    crawler = get_crawler(CatalogSpider, dict(settings))
    crawler.spider = spider = CatalogSpider.from_crawler(crawler)
    crawler.stats.open_spider()
    return spider


def test_a_page_hands_the_frontier_a_bounded_share_of_its_links_the_best_first() -> None:
    spider = _spider(DISTCRAWL_MAX_FOLLOW_PER_PAGE=5)
    url = "http://shop.test/c/all/"
    body = _dense_page(50)
    response = HtmlResponse(url, body=body, encoding="utf-8", request=scrapy.Request(url))
    requests = [r for r in spider.parse(response) if isinstance(r, scrapy.Request)]
    # the next page and the products before the category links
    assert [r.url for r in requests][:4] == [
        "http://shop.test/c/all/?page=2",
        "http://shop.test/p/0-x.html",
        "http://shop.test/p/1-x.html",
        "http://shop.test/p/2-x.html",
    ]
    assert len(requests) == 5
    stats = spider.crawler.stats
    assert stats.get_value("safety/links_dropped/too_many_links") == 49
    # navigation repeated on the next page gets in there: what reached the scheduler is known
    for request in requests:
        spider.crawler.signals.send_catch_log(
            signals.request_scheduled, request=request, spider=spider
        )
    again = [r for r in spider.parse(response) if isinstance(r, scrapy.Request)]
    assert [r.url for r in again] == [f"http://shop.test/c/d{i}/" for i in range(1, 6)]


def test_a_dense_page_is_read_off_the_event_loop_up_to_its_limits() -> None:
    import asyncio

    spider = _spider(DISTCRAWL_MAX_LINKS_PER_PAGE=1_000, DISTCRAWL_MAX_FOLLOW_PER_PAGE=0)
    url = "http://shop.test/c/all/"
    body = _dense_page(30_000)  # over the size analysed on the worker thread
    response = HtmlResponse(url, body=body, encoding="utf-8", request=scrapy.Request(url))
    output = spider.parse(response)
    assert asyncio.iscoroutine(output)  # Scrapy awaits it: the loop runs meanwhile

    async def run() -> list[object]:
        return list(await output)

    requests = [r for r in asyncio.run(run()) if isinstance(r, scrapy.Request)]
    stats = spider.crawler.stats
    assert stats.get_value("catalog/pages/off_loop") == 1
    assert stats.get_value("safety/page_cut/too_many_links") == 1
    assert stats.get_value("safety/links_unread") == 30_000 + 4 - 1_000
    # the first 1,000 <a>: all in the navigation (the products and the next page come after)
    assert [r.url for r in requests] == [f"http://shop.test/c/d{i}/" for i in range(1_000)]


def test_a_page_whose_links_outlast_the_parse_time_is_cut_there() -> None:
    # a deadline already past when the links are read: the first clock check cuts the page
    spider = _spider(DISTCRAWL_MAX_PARSE_SECONDS=1e-9, DISTCRAWL_MAX_FOLLOW_PER_PAGE=0)
    url = "http://shop.test/c/all/"
    body = _dense_page(2_000)  # small enough to be analysed on the event loop
    response = HtmlResponse(url, body=body, encoding="utf-8", request=scrapy.Request(url))
    requests = [r for r in spider.parse(response) if isinstance(r, scrapy.Request)]
    stats = spider.crawler.stats
    assert stats.get_value("safety/page_cut/parse_time") == 1
    assert stats.get_value("safety/page_cut/too_many_links") is None
    unread = stats.get_value("safety/links_unread")
    assert 0 < unread < 2_000 + 4
    assert len(requests) == 2_000 + 4 - unread
