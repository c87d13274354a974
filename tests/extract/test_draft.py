"""distcrawl profile draft: a profile written from the generic reading reproduces it."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from distcrawl.cli import main
from distcrawl.demo.shop import DemoShop
from distcrawl.extract import load_profiles

#: the fields compared between the generic reading and the drafted profile
COMPARED = ("name", "price", "currency", "sku", "gtin", "brand", "availability", "category_path")


def _records(capsys: pytest.CaptureFixture[str]) -> list[dict[str, object]]:
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


@pytest.mark.parametrize("variant", ["plain", "dlist", "specs", "text"])
def test_a_drafted_profile_gives_the_same_fields_on_pages_it_never_saw(
    variant: str,
    shop_factory: Callable[..., DemoShop],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    shop = shop_factory(products=40, variant=variant)
    base = shop.url.rstrip("/")
    products = [base + p.path for p in shop.catalog.products()]
    leaf = shop.catalog.leaves()[0]
    draft = tmp_path / "draft.toml"
    # drafted from four products (one of them on sale), a listing and a category page ...
    status = main(["profile", "draft", *products[:4], base + leaf.path, shop.url, "-o", str(draft)])
    assert status == 0
    capsys.readouterr()
    text = draft.read_text()
    assert text.startswith("# Draft site profile")
    (profile,) = load_profiles([draft])
    assert {"name", "price", "sku", "availability"} <= set(profile.fields)
    # ... and tried on every product, most of which it never saw
    assert main(["extract", "--json", *products]) == 0
    generic = _records(capsys)
    assert main(["extract", "--json", "--profile", str(draft), *products]) == 0
    profiled = _records(capsys)
    for before, after in zip(generic, profiled, strict=True):
        assert after["kind"] == before["kind"] == "product"
        assert after["profile"] == profile.name
        assert {k: after[k] for k in COMPARED} == {k: before[k] for k in COMPARED}
        sources = after["sources"]
        assert isinstance(sources, dict)
        assert sources["price"] == sources["sku"] == sources["name"] == "profile"
    # the listing still reads as one, with the same product links
    assert main(["extract", "--json", base + leaf.path]) == 0
    (listing,) = _records(capsys)
    assert main(["extract", "--json", "--profile", str(draft), base + leaf.path]) == 0
    (listing_profiled,) = _records(capsys)
    assert listing_profiled["kind"] == listing["kind"] == "listing"
    assert listing_profiled["links"] == listing["links"]


def test_draft_without_a_product_page_says_so(
    shop_factory: Callable[..., DemoShop], capsys: pytest.CaptureFixture[str]
) -> None:
    shop = shop_factory(products=5)
    assert main(["profile", "draft", shop.url]) == 1
    assert "no product page" in capsys.readouterr().err
