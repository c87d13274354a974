"""The bundled demo shop: a real server on 127.0.0.1, walked and probed over HTTP."""

from __future__ import annotations

import http.client
import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from shop_client import HOSTILE_PATHS, Client, get, json_ld, links, walk

from distcrawl.demo.catalog import Catalog, ean13
from distcrawl.demo.config import ShopConfig
from distcrawl.demo.routes import BIG_PAGE_BYTES
from distcrawl.demo.shop import DemoShop

ShopFactory = Callable[..., DemoShop]
REPO_ROOT = Path(__file__).resolve().parents[2]


# -- the site graph -----------------------------------------------------------------------


def test_walk_from_home_reaches_exactly_the_expected_products(demo_shop: DemoShop) -> None:
    products, statuses = walk(demo_shop)
    assert products == demo_shop.expected_product_urls()
    assert len(products) == 300
    assert set(statuses.values()) == {200}


@pytest.mark.parametrize("variant", ["jsonld", "plain"])
def test_walk_is_complete_in_both_variants_with_long_paginations(
    shop_factory: ShopFactory, variant: str
) -> None:
    shop = shop_factory(products=90, variant=variant, page_size=4, seed=7)
    products, statuses = walk(shop)
    assert products == shop.expected_product_urls()
    assert set(statuses.values()) == {200}
    # 6 leaves of 15 products at 4 per page: 4 listing pages each, all reached
    assert sum("/c/" in url and url.count("/") == 6 for url in statuses) == 6 * 4


def test_every_product_page_answers_with_its_canonical_url(shop_factory: ShopFactory) -> None:
    shop = shop_factory(products=40)
    client = Client(shop)
    for url in sorted(shop.expected_product_urls()):
        response = client.request(urlsplit(url).path)
        assert response.status == 200
        assert links(response.text).head_links["canonical"] == url
    client.close()


def test_unknown_paths_are_404(demo_shop: DemoShop) -> None:
    product = demo_shop.catalog.product(1)
    assert product is not None
    top = demo_shop.catalog.tops[0]
    for path in [
        "/nope",
        "/c/nope/",
        f"/c/{top.slug}",  # no trailing slash
        f"/c/{top.slug}/nope/",
        f"/p/{product.id}-wrong-slug.html",
        "/p/100000-x.html",
        "/big",  # hostile pages exist only when asked for
        "/loop/a",
        "/private/secret",
    ]:
        assert get(demo_shop, path).status == 404, path


def test_methods_other_than_get_and_head_are_refused(demo_shop: DemoShop) -> None:
    head = get(demo_shop, "/", method="HEAD")
    assert head.status == 200
    assert head.body == b""
    assert int(head.headers["content-length"]) == len(get(demo_shop, "/").body)
    assert get(demo_shop, "/", method="POST", body=b"x").status == 405


def test_robots_txt_disallows_only_the_control_api_and_private(demo_shop: DemoShop) -> None:
    response = get(demo_shop, "/robots.txt")
    assert response.status == 200
    assert response.headers["content-type"].startswith("text/plain")
    disallowed = re.findall(r"^Disallow: (\S+)$", response.text, re.M)
    assert sorted(disallowed) == ["/_shop/", "/private/"]


# -- determinism --------------------------------------------------------------------------


def test_same_seed_same_catalog_other_seed_other_catalog() -> None:
    one, two, other = Catalog(200, seed=5), Catalog(200, seed=5), Catalog(200, seed=6)
    assert one.products() == two.products()
    assert one.tops == two.tops
    assert one.failing_ids(10) == two.failing_ids(10)
    assert one.products() != other.products()


def test_same_seed_serves_the_same_bytes(shop_factory: ShopFactory) -> None:
    first, second = shop_factory(products=50, seed=3), shop_factory(products=50, seed=3)
    leaf = first.catalog.leaves()[0]
    product = first.catalog.product(leaf.product_ids[0])
    assert product is not None
    for path in ["/", f"/c/{leaf.top_slug}/", leaf.path, product.path]:
        a, b = get(first, path).text, get(second, path).text
        assert a.replace(str(first.port), "PORT") == b.replace(str(second.port), "PORT")


@settings(max_examples=30, deadline=None)
@given(
    products=st.integers(min_value=0, max_value=600),
    page_size=st.integers(min_value=1, max_value=30),
    seed=st.integers(min_value=0, max_value=2**32),
)
def test_catalog_partitions_products_into_even_paginated_leaves(
    products: int, page_size: int, seed: int
) -> None:
    catalog = Catalog(products, seed=seed, page_size=page_size)
    leaves = catalog.leaves()
    assert len(catalog.tops) >= 3 and all(len(top.leaves) >= 2 for top in catalog.tops)
    sizes = [len(leaf.product_ids) for leaf in leaves]
    assert max(sizes) - min(sizes) <= 1
    listed = [
        product.id
        for leaf in leaves
        for page in range(1, catalog.page_count(leaf) + 1)
        for product in catalog.listing_page(leaf, page)
    ]
    assert sorted(listed) == list(range(1, products + 1))
    assert len({product.path for product in catalog.products()}) == products
    for product in catalog.products()[:50]:
        assert 1.0 <= float(product.price) <= 999.99
        assert re.fullmatch(r"\d+\.\d\d", product.price)
        assert product.gtin13 == ean13(product.gtin13[:12])
        assert re.fullmatch(r"DC-\d{6}", product.sku)


# -- product pages ------------------------------------------------------------------------


def test_jsonld_product_page_carries_a_schema_org_product(demo_shop: DemoShop) -> None:
    product = demo_shop.catalog.product(17)
    assert product is not None
    url = demo_shop.url.rstrip("/") + product.path
    html = get(demo_shop, product.path).text
    ld_product, ld_crumbs = json_ld(html)
    assert ld_product["@type"] == "Product"
    assert ld_product["name"] == product.name
    assert ld_product["sku"] == product.sku == "DC-000017"
    assert ld_product["gtin13"] == product.gtin13
    assert ld_product["brand"] == {"@type": "Brand", "name": product.brand}
    assert all(image.startswith(demo_shop.url) for image in ld_product["image"])
    assert ld_product["offers"] == {
        "@type": "Offer",
        "price": product.price,
        "priceCurrency": product.currency,
        "availability": f"https://schema.org/{product.availability}",
        "url": url,
    }
    assert ld_crumbs["@type"] == "BreadcrumbList"
    names = [item["name"] for item in ld_crumbs["itemListElement"]]
    leaf = demo_shop.catalog.leaf(product.top_slug, product.leaf_slug)
    assert leaf is not None
    assert names == ["Home", leaf.top_name, leaf.name]
    assert f"<h1>{product.name}</h1>" in html
    assert '<nav class="breadcrumb">' in html
    assert product.price in html


def test_catalog_mixes_currencies_and_availabilities(demo_shop: DemoShop) -> None:
    products = demo_shop.catalog.products()
    assert {p.currency for p in products} == {"USD", "EUR", "GBP"}
    assert {p.availability for p in products} == {"InStock", "OutOfStock", "PreOrder"}


def test_canonical_url_follows_the_host_header(demo_shop: DemoShop) -> None:
    product = demo_shop.catalog.product(3)
    assert product is not None
    html = get(demo_shop, product.path, headers={"Host": f"localhost:{demo_shop.port}"}).text
    expected = f"http://localhost:{demo_shop.port}{product.path}"
    assert links(html).head_links["canonical"] == expected
    hostile_host = get(demo_shop, product.path, headers={"Host": 'x"><script>'}).text
    assert links(hostile_host).head_links["canonical"] == demo_shop.url.rstrip("/") + product.path


def test_plain_product_page_has_no_structured_data(shop_factory: ShopFactory) -> None:
    shop = shop_factory(products=60, variant="plain")
    eur = next(p for p in shop.catalog.products() if p.currency == "EUR")
    html = get(shop, eur.path).text
    for marker in ("application/ld+json", "itemprop", "itemscope", "og:", "property="):
        assert marker not in html
    euros, cents = eur.price.split(".")
    assert (
        f'<div class="pdp-cost" data-amount="{eur.price}" data-cur="EUR">€{euros},{cents}</div>'
        in html
    )
    assert f'<h2 class="pdp-name">{eur.name}</h2>' in html
    assert f'<div class="pdp-code">SKU: {eur.sku}</div>' in html
    assert '<img src="/img/' in html
    assert html.count('<ol class="trail"><li><a href="/">Home</a></li>') == 1
    stock = {"InStock": "In stock", "OutOfStock": "Sold out", "PreOrder": "Available for pre-order"}
    for product in shop.catalog.products()[:20]:
        page = get(shop, product.path).text
        assert f'<div class="pdp-stock">{stock[product.availability]}</div>' in page
        if product.currency == "USD":
            assert f">${product.price}</div>" in page


def test_listing_and_category_pages_are_the_same_in_both_variants(
    shop_factory: ShopFactory,
) -> None:
    jsonld, plain = shop_factory(products=50), shop_factory(products=50, variant="plain")
    leaf = jsonld.catalog.leaves()[1]
    for path in ["/", f"/c/{leaf.top_slug}/", leaf.path]:
        assert get(jsonld, path).text == get(plain, path).text


def test_images_exist(demo_shop: DemoShop) -> None:
    product = demo_shop.catalog.product(1)
    assert product is not None
    response = get(demo_shop, product.image_paths()[0])
    assert response.status == 200
    assert response.headers["content-type"] == "image/jpeg"
    assert get(demo_shop, f"/img/1-{product.images + 1}.jpg").status == 404


# -- listings and pagination --------------------------------------------------------------


def test_pagination_links_and_page_one(shop_factory: ShopFactory) -> None:
    shop = shop_factory(products=60, page_size=3)
    leaf = shop.catalog.leaves()[0]
    pages = shop.catalog.page_count(leaf)
    assert pages >= 3
    first = get(shop, leaf.path)
    assert first.text == get(shop, leaf.path + "?page=1").text
    assert '<a class="prev"' not in first.text
    assert links(first.text).head_links["next"] == f"{leaf.path}?page=2"
    assert '<a class="next" rel="next" href="?page=2">Next</a>' in first.text

    second = get(shop, leaf.path + "?page=2").text
    assert '<a class="prev" rel="prev" href="?page=1">Previous</a>' in second
    assert '<a href="?page=1">1</a>' in second
    assert '<a class="next" rel="next" href="?page=3">Next</a>' in second
    assert second.count('<li class="product-card">') == 3
    assert re.search(r'<nav class="pagination">.*</nav>', second)

    last = get(shop, f"{leaf.path}?page={pages}").text
    assert 'rel="next"' not in last
    for bad in [str(pages + 1), "0", "-1", "two"]:
        assert get(shop, f"{leaf.path}?page={bad}").status == 404


def test_long_pagination_collapses_but_always_links_next() -> None:
    shop = DemoShop(ShopConfig(products=1200, page_size=5)).start()
    try:
        leaf = shop.catalog.leaves()[0]
        pages = shop.catalog.page_count(leaf)
        assert pages > 10
        html = get(shop, f"{leaf.path}?page=10").text
        numbers = [int(n) for n in re.findall(r'href="\?page=(\d+)">\d+</a>', html)]
        assert numbers == [1, 8, 9, 10, 11, 12, pages]
        assert '<a class="next" rel="next" href="?page=11">Next</a>' in html
    finally:
        shop.stop()


def test_about_a_third_of_product_links_carry_tracking_params(shop_factory: ShopFactory) -> None:
    shop = shop_factory(products=150)
    hrefs = [
        href
        for leaf in shop.catalog.leaves()
        for page in range(1, shop.catalog.page_count(leaf) + 1)
        for href in links(get(shop, f"{leaf.path}?page={page}").text).hrefs
        if href.startswith("/p/")
    ]
    tracked = [href for href in hrefs if "?" in href]
    assert len(hrefs) == 150
    assert 0.25 <= len(tracked) / len(hrefs) <= 0.42
    assert all(re.search(r"\?utm_source=listing&ref=card\d+$", href) for href in tracked)
    # the tracked URL serves the product, and says which URL is the real one
    html = get(shop, tracked[0]).text
    assert links(html).head_links["canonical"] == shop.url.rstrip("/") + tracked[0].split("?")[0]

    untracked = shop_factory(products=150, tracking_params=False)
    leaf = untracked.catalog.leaves()[0]
    assert "utm_source" not in get(untracked, leaf.path).text


# -- request log and the control API ------------------------------------------------------


def test_request_log_records_every_site_request(shop_factory: ShopFactory) -> None:
    shop = shop_factory(products=10, fail_products=1)
    failing = urlsplit(next(iter(shop.failing_product_urls()))).path
    client = Client(shop)
    client.request("/")
    client.request("/robots.txt")
    client.request("/nope")
    client.request(failing)
    client.request("/", method="HEAD")
    client.request("/_shop/truth")
    client.request("/_shop/log")
    client.close()
    log = shop.request_log()
    assert [(e["method"], e["path"], e["status"]) for e in log] == [
        ("GET", "/", 200),
        ("GET", "/robots.txt", 200),
        ("GET", "/nope", 404),
        ("GET", failing, 500),
        ("HEAD", "/", 200),
    ]
    times = [entry["t"] for entry in log]
    assert times == sorted(times)
    assert shop.request_log(since=times[2]) == log[3:]
    shop.clear_request_log()
    assert shop.request_log() == []


def test_control_api_over_http(shop_factory: ShopFactory) -> None:
    shop = shop_factory(products=25, fail_products=2, error_rate=1.0)
    client = Client(shop)
    truth = json.loads(client.request("/_shop/truth").body)
    assert set(truth["expected"]) == shop.expected_product_urls()
    assert set(truth["recoverable"]) == shop.recoverable_product_urls()
    assert set(truth["failing"]) == shop.failing_product_urls()
    assert len(truth["failing"]) == 2

    assert client.request("/").status == 503
    log = json.loads(client.request("/_shop/log").body)
    assert [(e["path"], e["status"]) for e in log] == [("/", 503)]
    assert json.loads(client.request(f"/_shop/log?since={log[-1]['t']}").body) == []
    assert client.request("/_shop/log?since=soon").status == 400

    healed = client.request(
        "/_shop/faults",
        method="POST",
        body=json.dumps({"error_rate": 0, "fail_products": 0}).encode(),
        headers={"Content-Type": "application/json"},
    )
    assert healed.status == 200
    assert json.loads(healed.body)["error_rate"] == 0
    assert client.request("/").status == 200
    assert json.loads(client.request("/_shop/truth").body)["failing"] == []
    assert json.loads(client.request("/_shop/faults").body) == shop.faults()

    for bad in [b"not json", b"[1]", b'{"nonsense": 1}', b'{"error_rate": 2}']:
        assert client.request("/_shop/faults", method="POST", body=bad).status == 400
    assert client.request("/_shop/truth", method="POST", body=b"{}").status == 405
    assert client.request("/_shop/other").status == 404
    client.close()
    assert [e["path"] for e in shop.request_log()] == ["/", "/"]


def test_stop_closes_open_keep_alive_connections(shop_factory: ShopFactory) -> None:
    shop = shop_factory(products=5)
    client = Client(shop)
    assert client.request("/").status == 200
    shop.stop()
    with pytest.raises((OSError, http.client.HTTPException)):
        client.request("/")
    client.close()
    shop.stop()  # twice is fine


# -- hostile pages ------------------------------------------------------------------------


def test_hostile_pages_are_linked_and_misbehave(shop_factory: ShopFactory) -> None:
    shop = shop_factory(products=30, hostile=True)
    leaf = shop.catalog.leaves()[0]
    for page in ["/", leaf.path]:
        assert set(links(get(shop, page).text).hrefs) >= HOSTILE_PATHS
    client = Client(shop)

    big_head = client.request("/big", method="HEAD")
    assert big_head.status == 200
    assert int(big_head.headers["content-length"]) >= BIG_PAGE_BYTES * 0.99
    big = client.request("/big")
    assert len(big.body) == int(big_head.headers["content-length"])

    binary = client.request("/file.bin")
    assert binary.headers["content-type"] == "application/octet-stream"

    broken = client.request("/p/broken-json.html")
    assert broken.status == 200
    with pytest.raises(json.JSONDecodeError):
        json_ld(broken.text)
    assert not any("broken" in url for url in shop.expected_product_urls())

    assert client.request("/loop/a").headers["location"] == "/loop/b"
    assert client.request("/loop/b").headers["location"] == "/loop/a"
    assert client.request("/loop/a").status == 302

    trap = client.request("/trap/?page=41").text
    assert '<a class="next" rel="next" href="?page=42">Next</a>' in trap
    assert 'href="?page=2"' in client.request("/trap/").text

    december = links(client.request("/calendar/2026/12/").text).hrefs
    assert "/calendar/2027/01/" in december and "/calendar/2026/11/" in december
    assert client.request("/calendar/2026/13/").status == 404

    assert client.request("/private/secret").status == 200
    client.close()
    # and none of it changes the truth
    products, _ = walk(shop)
    assert products == shop.expected_product_urls()


def test_a_client_hanging_up_on_the_big_page_does_not_hurt_the_shop(
    shop_factory: ShopFactory,
) -> None:
    shop = shop_factory(products=5, hostile=True)
    client = Client(shop)
    client.conn.request("GET", "/big")
    raw = client.conn.getresponse()
    assert raw.read(1000)
    client.close()
    assert get(shop, "/").status == 200


# -- configuration and the command line ---------------------------------------------------


def test_config_refuses_bad_values() -> None:
    for bad in [
        {"host": "0.0.0.0"},
        {"host": "10.1.2.3"},
        {"host": "example.com"},
        {"variant": "microdata"},
        {"error_rate": -0.1},
        {"error_rate": 0.7, "rate_limit_429": 0.7},
        {"fail_products": 400},
        {"error_status": 200},
    ]:
        with pytest.raises(ValueError):
            ShopConfig(**bad)
    assert ShopConfig(host="127.0.0.2").host == "127.0.0.2"


@pytest.mark.parametrize(
    "entry_point", [["-m", "distcrawl.demo.server"], ["-m", "distcrawl.cli", "shop"]]
)
def test_shop_command_serves_until_sigterm(entry_point: list[str]) -> None:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    # stderr is inherited: pytest shows it if the test fails
    with subprocess.Popen(
        [sys.executable, *entry_point, "--products", "12", "--variant", "plain", "--hostile"],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    ) as process:
        try:
            assert process.stdout is not None
            announced = json.loads(process.stdout.readline())
            assert announced["pid"] == process.pid
            assert re.fullmatch(r"http://127\.0\.0\.1:\d+/", announced["url"])
            host, port = urlsplit(announced["url"]).netloc.split(":")
            conn = http.client.HTTPConnection(host, int(port), timeout=10)
            conn.request("GET", "/_shop/truth")
            truth = json.loads(conn.getresponse().read())
            assert len(truth["expected"]) == 12 and truth["variant"] == "plain"
            conn.request("GET", "/big", headers={"Connection": "close"})
            assert conn.getresponse().status == 200
            conn.close()
            process.send_signal(signal.SIGTERM)
            assert process.wait(timeout=10) == 0
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
