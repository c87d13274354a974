"""The ``bootstrap`` demo shop: plain stock lines, a hex "UPC", a titled description; every
product read right by the generic extraction, in process and by a real crawl node."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pymongo
import pytest
from crawl_nodes import Node

from distcrawl.demo import bootstrap, pages
from distcrawl.demo.catalog import Catalog
from distcrawl.demo.checks import check_fields, check_store, expected_fields
from distcrawl.extract import analyze

BASE = "http://127.0.0.1:8000"


def _pages(products: int) -> tuple[Catalog, dict[int, str]]:
    catalog = Catalog(products)
    html = {}
    for product in catalog.products():
        leaf = catalog.leaf(product.top_slug, product.leaf_slug)
        assert leaf is not None
        html[product.id] = pages.render_product(product, leaf, base_url=BASE, variant="bootstrap")
    return catalog, html


def test_the_pages_have_the_shape_of_the_shop() -> None:
    catalog, html = _pages(200)
    out = [p for p in catalog.products() if bootstrap.availability(p) == "OutOfStock"]
    assert 0.2 <= len(out) / len(catalog) <= 0.3  # about a quarter
    for product in catalog.products():
        page = html[product.id]
        code = bootstrap.shop_code(product)
        assert re.fullmatch(r"[0-9a-f]{16}", code)
        assert f'<dt class="col-sm-3">UPC</dt><dd class="col-sm-9">{code}</dd>' in page
        sold_out = product in out
        assert ('<p class="mb-0">Out of stock</p>' in page) == sold_out
        assert ('<p class="mb-0">In stock</p>' in page) == (not sold_out)
        assert (">Availability</dt>" in page) == (not sold_out)
        assert '<h2 class="h5 mt-4">Product Description</h2>' in page
        assert "ld+json" not in page and "itemprop" not in page and "og:" not in page


def test_every_product_and_listing_is_read_right() -> None:
    catalog, html = _pages(120)
    wrong = []
    for product in catalog.products():
        analysis = analyze(url=BASE + product.path, body=html[product.id].encode())
        assert analysis.kind == "product", product.id
        got = analysis.product or {}
        for name, want in expected_fields(product, "bootstrap").items():
            if got.get(name) != want:
                wrong.append((product.id, name, got.get(name), want))
        assert got["gtin"] is None  # the hex "UPC" is no GTIN, nor are its digits
    assert wrong == []
    for leaf in catalog.leaves():
        for page in range(1, catalog.page_count(leaf) + 1):
            body = pages.render_listing(catalog, leaf, page, variant="bootstrap")
            analysis = analyze(url=f"{BASE}{leaf.path}?page={page}", body=body.encode())
            assert analysis.kind == "listing"
            want = {BASE + p.path for p in catalog.listing_page(leaf, page)}
            assert set(analysis.links["product"]) == want


def test_the_demo_checks_compare_every_field_of_the_variant() -> None:
    product = Catalog(4).products()[0]
    want = expected_fields(product, "bootstrap")
    assert set(want) == {
        "name", "price", "currency", "list_price", "sku", "availability", "description"
    }  # fmt: skip
    assert want["list_price"] is None  # no was price on its pages
    assert want["sku"] == bootstrap.shop_code(product) != product.sku
    assert "description" not in expected_fields(product, "text")


@pytest.mark.slow
def test_a_crawl_of_the_shop_stores_every_product_with_right_fields(
    redis_url: str, mongo_uri: str, redis_cli: Path, shop_factory: Any, tmp_path: Path
) -> None:
    shop = shop_factory(products=300, variant="bootstrap")
    subprocess.run(
        [str(redis_cli), "-u", redis_url, "lpush", "catalog:start_urls", shop.url],
        check=True,
        capture_output=True,
    )
    node = Node(redis_url=redis_url, mongo_uri=mongo_uri, log_dir=tmp_path, node_id="bootstrap")
    try:
        assert node.wait() == 0
    finally:
        node.kill()
    client: pymongo.MongoClient[Any] = pymongo.MongoClient(mongo_uri)
    try:
        collection = client.get_default_database()["products"]
        store = check_store(collection, shop.expected_product_urls())
        fields = check_fields(collection, shop.catalog, shop.url, "bootstrap")
        sold_out = collection.count_documents({"availability": "OutOfStock"})
    finally:
        client.close()
    assert (store["stored"], store["missing"], store["duplicates"]) == (300, 0, 0), store
    assert fields["fields_wrong"] == 0, fields
    assert sold_out == sum(
        bootstrap.availability(p) == "OutOfStock" for p in shop.catalog.products()
    )
