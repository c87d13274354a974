"""A product code is never a price, a date, a phone number, an address, a placeholder or a
sentence, whichever source or label gave it; the next source's code is taken instead."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from distcrawl.extract import analyze
from distcrawl.extract.codes import code_flaw, valid_code

URL = "https://shop.example/p/blue-lamp"


def _product(body: str, head: str = "") -> dict[str, Any]:
    page = f"<html><head>{head}</head><body>{body}</body></html>"
    analysis = analyze(url=URL, body=page.encode())
    assert analysis.kind == "product", analysis
    return dict(analysis.product or {})


@pytest.mark.parametrize(
    ("value", "flaw"),
    [
        ("US$11.99", "a price"),
        ("$11.99", "a price"),
        ("11,99 €", "a price"),
        ("EUR 12", "a price"),
        ("2021-03-04", "a date"),
        ("04/03/2021", "a date"),
        ("4.3.21", "a date"),
        ("Nov 17, 2020", "a date"),
        ("+44 20 7946 0958", "a phone number"),
        ("(555) 123-4567", "a phone number"),
        ("https://shop.example/p/1", "an address"),
        ("info@shop.example", "an address"),
        ("N/A", "a placeholder"),
        ("null", "a placeholder"),
        ("-", "a placeholder"),
        ("This lamp is perfect for reading at night", "running text"),
        ("Blue lamp", "running text"),
    ],
)
def test_a_value_that_is_no_code_says_what_it_is(value: str, flaw: str) -> None:
    assert code_flaw(value) == flaw
    assert valid_code(value) is None


@pytest.mark.parametrize(
    "value",
    ["B07FW264WL", "466/7999", "002.937.72", "TE502955-1293415", "DC-000001", "12.34.56",
     "bfd5e1701c862ac3", "VE900", "4 006381 333931", "ABC", 302474151804],
)  # fmt: skip
def test_codes_as_shops_print_them_are_codes(value: object) -> None:
    assert code_flaw(value) is None


@given(
    st.from_regex(r"[A-Z][A-Z0-9]{0,5}(?:[-./][A-Z0-9]{1,8}){0,3}", fullmatch=True),
)
def test_any_code_of_letters_digits_and_separators_is_a_code(code: str) -> None:
    assert valid_code(code) == code


@given(
    sign=st.sampled_from(["$", "US$", "€", "£", "¥", "EUR ", "USD "]),
    cents=st.integers(min_value=1, max_value=10_000_000),
)
def test_any_price_is_no_code(sign: str, cents: int) -> None:
    assert code_flaw(f"{sign}{cents // 100}.{cents % 100:02d}") == "a price"


def test_a_labelled_value_that_is_a_price_is_not_the_sku() -> None:
    product = _product(
        "<h1>Blue Lamp</h1><p class='price'>$11.99</p><button>Add to cart</button>"
        "<ul><li>Item: US$11.99</li><li>Item number: BL-1234</li></ul>"
    )
    assert product["sku"] == "BL-1234"


def test_a_structured_sku_that_is_no_code_gives_way_to_the_printed_one() -> None:
    data = {
        "@context": "https://schema.org",
        "@type": "Product",
        "name": "Blue Lamp",
        "sku": "N/A",
        "offers": {"@type": "Offer", "price": "11.99", "priceCurrency": "USD"},
    }
    head = f"<script type='application/ld+json'>{json.dumps(data)}</script>"
    product = _product("<h1>Blue Lamp</h1><p>SKU: BL-1234</p>", head)
    assert product["sku"] == "BL-1234"


def test_a_code_element_that_prints_a_price_is_not_the_sku() -> None:
    product = _product(
        "<h1>Blue Lamp</h1><div class='sku-price'>US$11.99</div>"
        "<button>Add to cart</button><p>Model: BL-1234</p>"
    )
    assert product["sku"] == "BL-1234"


def _structured(sku: str) -> str:
    data = {
        "@context": "https://schema.org",
        "@type": "Product",
        "name": "Blue Lamp",
        "sku": sku,
        "offers": {"@type": "Offer", "price": "11.99", "priceCurrency": "USD"},
    }
    return f"<script type='application/ld+json'>{json.dumps(data)}</script>"


@pytest.mark.parametrize(
    "label", ["Item #", "Item number", "SKU", "Model", "MPN", "Art.-Nr.", "Artikelnummer"]
)
def test_a_labelled_code_beats_a_structured_id_the_page_never_shows(label: str) -> None:
    product = _product(
        f"<div class='product'><h1>Blue Lamp</h1><p>{label}: BL-1234</p><p>$11.99</p></div>",
        _structured("884736152"),
    )
    assert product["sku"] == "BL-1234"


def test_a_structured_code_the_page_shows_stays() -> None:
    product = _product(
        "<div class='product'><h1>Blue Lamp</h1><p>Model: BL-1234</p>"
        "<p>Product id 884736152</p></div>",
        _structured("884736152"),
    )
    assert product["sku"] == "884736152"


def test_a_model_name_is_no_model_number() -> None:
    product = _product(
        "<div class='product'><h1>Blue Lamp</h1><p>Model: Primrose</p></div>",
        _structured("884736152"),
    )
    assert product["sku"] == "884736152"
