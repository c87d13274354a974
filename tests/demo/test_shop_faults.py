"""The demo shop's faults: errors, robots.txt faults, hangs, Retry-After, failing products,
latency, healing; a real server on 127.0.0.1."""

from __future__ import annotations

import http.client
import time
from collections.abc import Callable
from urllib.parse import urlsplit

import pytest
from shop_client import Client, get, walk

from distcrawl.demo.shop import DemoShop

ShopFactory = Callable[..., DemoShop]


# -- faults -------------------------------------------------------------------------------


def test_error_rate_is_roughly_as_set_and_seeded(shop_factory: ShopFactory) -> None:
    first = shop_factory(products=30, error_rate=0.3, seed=11)
    second = shop_factory(products=30, error_rate=0.3, seed=11)
    leaf = first.catalog.leaves()[0]
    paths = ["/", leaf.path, f"/c/{leaf.top_slug}/", first.catalog.products()[0].path] * 75
    statuses = []
    for shop in (first, second):
        client = Client(shop)
        statuses.append([client.request(path).status for path in paths])
        client.close()
    assert statuses[0] == statuses[1]
    assert set(statuses[0]) == {200, 503}
    assert 0.2 <= statuses[0].count(503) / len(paths) <= 0.4
    # every page kind is hit
    failed_paths = {path for path, status in zip(paths, statuses[0], strict=True) if status == 503}
    assert failed_paths == set(paths)
    response = get(first, "/robots.txt")
    assert response.status == 200


def test_faults_never_touch_robots_or_the_control_api(shop_factory: ShopFactory) -> None:
    shop = shop_factory(products=10, error_rate=1.0)
    assert get(shop, "/").status == 503
    assert get(shop, "/").headers["retry-after"] == "1"
    for _ in range(5):
        assert get(shop, "/robots.txt").status == 200
        assert get(shop, "/_shop/truth").status == 200


def test_robots_txt_faults_and_crawl_delay(shop_factory: ShopFactory) -> None:
    shop = shop_factory(products=10, crawl_delay=2.5)
    assert "Crawl-delay: 2.5\n" in get(shop, "/robots.txt").text
    shop.set_faults(robots_fault="503")
    assert get(shop, "/robots.txt").status == 503
    assert get(shop, "/").status == 200  # only robots.txt fails
    shop.set_faults(robots_fault="404")
    assert get(shop, "/robots.txt").status == 404
    shop.set_faults(robots_fault="close")
    with pytest.raises(http.client.RemoteDisconnected):
        get(shop, "/robots.txt")
    with pytest.raises(ValueError, match="robots_fault"):
        shop.set_faults(robots_fault="teapot")


def test_a_hanging_shop_never_answers_until_it_stops(shop_factory: ShopFactory) -> None:
    shop = shop_factory(products=10, hang=True, robots_fault="hang")
    for path in ("/", "/robots.txt"):
        conn = http.client.HTTPConnection("127.0.0.1", shop.port, timeout=0.5)
        conn.request("GET", path)
        with pytest.raises(TimeoutError):
            conn.getresponse()
        conn.close()
    assert shop.peak_in_flight() >= 1
    shop.set_faults(hang=False)
    assert get(shop, "/").status == 200
    shop.stop()  # the hanging request ends with it, at once


def test_retry_after_may_be_an_http_date(shop_factory: ShopFactory) -> None:
    date = "Wed, 21 Oct 2037 07:28:00 GMT"
    shop = shop_factory(products=10, rate_limit_429=1.0, retry_after=date)
    assert get(shop, "/").headers["retry-after"] == date


def test_fail_products_always_answer_500(shop_factory: ShopFactory) -> None:
    shop = shop_factory(products=50, fail_products=5, seed=2)
    failing = shop.failing_product_urls()
    assert len(failing) == 5
    assert shop.recoverable_product_urls() == shop.expected_product_urls() - failing
    client = Client(shop)
    for url in failing:
        for _ in range(3):
            assert client.request(urlsplit(url).path).status == 500
    client.close()
    # still linked from the listings, so a crawl sees them and must give up on them
    products, _ = walk(shop)
    assert failing <= products


def test_failing_products_are_a_deterministic_choice(shop_factory: ShopFactory) -> None:
    one, two = (
        shop_factory(products=50, fail_products=5),
        shop_factory(products=50, fail_products=5),
    )

    def paths(shop: DemoShop) -> set[str]:
        return {urlsplit(url).path for url in shop.failing_product_urls()}

    assert paths(one) == paths(two)
    one.set_faults(fail_products=8)
    assert paths(two) < paths(one)  # raising the count only adds products


def test_rate_limit_429_carries_retry_after(shop_factory: ShopFactory) -> None:
    shop = shop_factory(products=10, rate_limit_429=1.0, retry_after=7)
    response = get(shop, "/")
    assert response.status == 429
    assert response.headers["retry-after"] == "7"
    quiet = shop_factory(products=10, rate_limit_429=1.0, retry_after=None)
    assert "retry-after" not in get(quiet, "/").headers
    mixed = shop_factory(products=10, rate_limit_429=0.5, error_rate=0.5)
    client = Client(mixed)
    statuses = {client.request("/").status for _ in range(60)}
    client.close()
    assert statuses == {429, 503}


def test_latency_delays_responses(shop_factory: ShopFactory) -> None:
    shop = shop_factory(products=10, latency_ms=80)
    client = Client(shop)
    client.request("/")  # connection set up
    started = time.perf_counter()
    client.request("/")
    assert time.perf_counter() - started >= 0.08
    client.close()


def test_set_faults_heals_the_shop(shop_factory: ShopFactory) -> None:
    shop = shop_factory(products=20, error_rate=1.0, fail_products=3)
    product = next(iter(shop.failing_product_urls()))
    assert get(shop, "/").status == 503
    faults = shop.set_faults(error_rate=0.0)
    assert faults["error_rate"] == 0.0 and faults["fail_products"] == 3
    assert get(shop, "/").status == 200
    assert get(shop, urlsplit(product).path).status == 500
    shop.set_faults(fail_products=0)
    assert shop.failing_product_urls() == set()
    assert shop.recoverable_product_urls() == shop.expected_product_urls()
    assert get(shop, urlsplit(product).path).status == 200
    with pytest.raises(ValueError):
        shop.set_faults(error_rate=1.5)
    with pytest.raises(ValueError):
        shop.set_faults(fail_products=21)
    assert shop.faults()["error_rate"] == 0.0  # a refused change changes nothing
