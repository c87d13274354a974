"""Extraction on real pages of the bundled demo shop, both variants, with and without profile."""

from __future__ import annotations

import urllib.request
from collections import deque
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from distcrawl.demo.shop import DemoShop
from distcrawl.extract import SiteProfile, analyze, load_profiles

DEMO_PLAIN = Path(__file__).parents[2] / "distcrawl" / "demo" / "profiles" / "demo-plain.toml"


def _crawl(shop: DemoShop, profiles: list[SiteProfile]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Breadth-first crawl from the home page following every link kind, as the spider does.

    Returns (products by URL, kinds by page URL)."""
    products: dict[str, Any] = {}
    kinds: dict[str, str] = {}
    seen = {shop.url}
    queue = deque([shop.url])
    while queue and len(kinds) < 500:
        url = queue.popleft()
        with urllib.request.urlopen(url, timeout=10) as response:
            body = response.read()
        analysis = analyze(url=url, body=body, profile=SiteProfile.match(profiles, url))
        assert analysis.errors == [], (url, analysis.errors)
        kinds[url] = analysis.kind
        if analysis.product is not None:
            assert analysis.product["url"] not in products
            products[analysis.product["url"]] = (analysis.product, analysis.sources)
        for links in analysis.links.values():
            for link in links:
                if link.startswith(shop.url) and link not in seen:
                    seen.add(link)
                    queue.append(link)
    return products, kinds


@pytest.mark.parametrize(
    ("variant", "with_profile"), [("jsonld", False), ("plain", False), ("plain", True)]
)
def test_demo_shop_crawls_completely_with_correct_products(
    shop_factory: Callable[..., DemoShop], variant: str, with_profile: bool
) -> None:
    shop = shop_factory(products=45, variant=variant, page_size=8)
    profiles = load_profiles([DEMO_PLAIN]) if with_profile else []
    products, kinds = _crawl(shop, profiles)
    assert set(products) == shop.expected_product_urls()
    assert kinds[shop.url] == "category"
    assert "listing" in kinds.values()
    for item in shop.catalog.products():
        url = shop.url.rstrip("/") + item.path
        product, sources = products[url]
        assert product["name"] == item.name
        assert product["price"] == Decimal(item.price)
        assert product["currency"] == item.currency
        assert product["sku"] == item.sku
        assert product["availability"] == item.availability
        assert product["description"] == item.description
        assert product["category_path"] == [
            top.name for top in shop.catalog.tops if top.slug == item.top_slug
        ] + [
            leaf.name for leaf in shop.catalog.leaves() if leaf.path.endswith(f"/{item.leaf_slug}/")
        ]
        assert product["image_urls"] == [shop.url.rstrip("/") + p for p in item.image_paths()]
        if variant == "jsonld":
            assert product["gtin"] == item.gtin13
            assert product["brand"] == item.brand
            assert sources["price"] == "json-ld"
        else:
            assert sources["price"] == ("profile" if with_profile else "heuristics")


def test_listing_links_are_canonical_and_paginated(shop_factory: Callable[..., DemoShop]) -> None:
    shop = shop_factory(products=45, variant="jsonld", page_size=2)
    leaf = max(shop.catalog.leaves(), key=lambda leaf: len(leaf.product_ids))
    base = shop.url.rstrip("/") + leaf.path
    with urllib.request.urlopen(base + "?page=2", timeout=10) as response:
        analysis = analyze(url=base + "?page=2", body=response.read())
    assert analysis.kind == "listing"
    assert analysis.canonical_url == base + "?page=2"
    assert analysis.links["next"][0] == base + "?page=3"
    assert base in analysis.links["next"]  # ?page=1 is the listing's own first page
    assert all("utm_" not in u and "ref=" not in u for u in analysis.links["product"])
    assert len(analysis.links["product"]) == 2


@pytest.mark.parametrize("variant", ["dlist", "specs", "text"])
@pytest.mark.parametrize("page_size", [3, 20])
def test_template_variants_are_read_with_no_profile(
    shop_factory: Callable[..., DemoShop], variant: str, page_size: int
) -> None:
    """Shops without structured data or known class names: every field from the page text."""
    shop = shop_factory(products=61, variant=variant, page_size=page_size)
    products, kinds = _crawl(shop, [])
    assert set(products) == shop.expected_product_urls()
    assert "listing" in kinds.values()
    assert kinds[shop.url] == "category"
    for item in shop.catalog.products():
        product, sources = products[shop.url.rstrip("/") + item.path]
        assert product["name"] == item.name
        assert product["price"] == Decimal(item.price)
        assert product["currency"] == item.currency
        assert product["sku"] == item.sku
        assert product["availability"] == item.availability, sources
        assert product["category_path"] == [
            top.name for top in shop.catalog.tops if top.slug == item.top_slug
        ] + [
            leaf.name for leaf in shop.catalog.leaves() if leaf.path.endswith(f"/{item.leaf_slug}/")
        ]
        assert sources["price"] == "heuristics"
        if variant == "dlist":
            assert product["gtin"] == item.gtin13
            assert product["brand"] == item.brand
