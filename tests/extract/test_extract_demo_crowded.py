"""The ``crowded`` demo shops: product pages crowded with other products' prices, codes and
buy buttons, instalment, unit and was prices, labelled model numbers and (``crowded-de``) a
comma before decimals; every product read right by the generic extraction."""

from __future__ import annotations

import re
from decimal import Decimal

import pytest

from distcrawl.demo import crowded, pages
from distcrawl.demo.catalog import Catalog
from distcrawl.demo.checks import CHECKED_FIELDS, expected_fields
from distcrawl.demo.config import VARIANTS
from distcrawl.extract import analyze

BASE = "http://127.0.0.1:8000"


def _pages(products: int, variant: str) -> tuple[Catalog, dict[int, str]]:
    catalog = Catalog(products)
    html = {}
    for product in catalog.products():
        leaf = catalog.leaf(product.top_slug, product.leaf_slug)
        assert leaf is not None
        others = [p for i in leaf.product_ids if (p := catalog.product(i)) is not None]
        html[product.id] = pages.render_product(
            product, leaf, base_url=BASE, variant=variant, others=others
        )
    return catalog, html


@pytest.mark.parametrize("variant", crowded.VARIANTS)
def test_the_pages_have_the_shape_of_the_shop(variant: str) -> None:
    catalog, html = _pages(120, variant)
    assert variant in VARIANTS
    on_sale = [p for p in catalog.products() if crowded.list_price(p)]
    assert 0.2 <= len(on_sale) / len(catalog) <= 0.3  # about a quarter
    for product in catalog.products():
        page = html[product.id]
        head, _, rest = page.partition(f"<h1>{product.name}</h1>")
        # other products' prices and buy buttons come before the product's own
        assert head.count('class="price"') == 2 and head.count("<button") == 2
        own, _, after = rest.partition("</form>")
        # an instalment classed as a price before the current one, then a unit price
        assert own.index('class="finance"') < own.index('class="price-box"') < own.index("unit")
        assert ("<s class=" in own) == (crowded.list_price(product) is not None)
        code = "Model" if variant == crowded.ENGLISH else "Artikelnummer"
        assert f"{code}: <span>{product.sku}</span>" in own
        sold_out = product.availability == "OutOfStock"
        assert ("add-to-cart" in own) == (not sold_out)
        assert ("notify" in own) == sold_out
        # after the product: a bundle price, other products, reviews saying "sold out"
        assert after.count('class="price"') >= 3 and after.count("<button") >= 3
    if variant == crowded.GERMAN:
        page = html[catalog.products()[0].id]
        assert '<html lang="de">' in page
        assert re.search(r"\d,\d\d\u00a0[€$£]", page)
        product = catalog.products()[0]
        assert crowded.internal_id(product) in page  # in its OpenGraph tag only
        assert page.count(crowded.internal_id(product)) == 1


@pytest.mark.parametrize("variant", crowded.VARIANTS)
def test_every_product_is_read_right(variant: str) -> None:
    catalog, html = _pages(200, variant)
    wrong = []
    for product in catalog.products():
        analysis = analyze(url=BASE + product.path, body=html[product.id].encode())
        assert analysis.kind == "product", product.id
        got = analysis.product or {}
        for name, want in expected_fields(product, variant).items():
            if got.get(name) != want:
                wrong.append((product.id, name, got.get(name), want))
    assert wrong == []


def test_the_checks_compare_the_list_price_of_every_variant() -> None:
    catalog = Catalog(8)
    assert "list_price" in CHECKED_FIELDS
    on_sale = next(p for p in catalog.products() if crowded.list_price(p))
    want = expected_fields(on_sale, crowded.ENGLISH)
    assert want["list_price"] == Decimal(str(crowded.list_price(on_sale))) > want["price"]
    assert want["sku"] == on_sale.sku
    for variant in VARIANTS:
        assert "list_price" in expected_fields(catalog.products()[0], variant)
