"""A shop's notation of amounts, from the whole page: its currency, its other prices and its
language decide what "1.299" or "229.990" is; an amount nothing decides is flagged."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from distcrawl.extract import analyze
from distcrawl.extract.notation import AMBIGUOUS_PRICE

URL = "https://shop.example/p/blue-lamp"


def _product(body: str, lang: str | None = None, head: str = "") -> dict[str, Any]:
    html = f"<html lang='{lang}'>" if lang else "<html>"
    page = f"{html}<head>{head}</head><body>{body}</body></html>"
    analysis = analyze(url=URL, body=page.encode())
    assert analysis.kind == "product", analysis
    return dict(analysis.product or {})


def _priced(printed: str, lang: str | None = None, extra: str = "") -> dict[str, Any]:
    return _product(
        f"<h1>Blue Lamp</h1><p class='price'>{printed}</p><button>Add to cart</button>{extra}",
        lang,
    )


@pytest.mark.parametrize(
    ("printed", "price"),
    [
        ("CLP 24.990", Decimal("24990")),
        ("24.990 COP", Decimal("24990")),
        ("¥1,299", Decimal("1299")),
        ("₩ 23,450", Decimal("23450")),
        ("Rp 23.450", Decimal("23450")),
    ],
)
def test_a_currency_printed_without_decimals_groups_thousands(printed: str, price: Decimal) -> None:
    assert _priced(printed)["price"] == price


@pytest.mark.parametrize(
    ("printed", "price"),
    [
        ("KD 229.990", Decimal("229.990")),
        ("229,990 DT", Decimal("229.990")),
        ("BD 12.500", Decimal("12.500")),
        ("OMR 5.250", Decimal("5.250")),
    ],
)
def test_a_currency_with_three_decimals_has_a_decimal_mark_before_three_digits(
    printed: str, price: Decimal
) -> None:
    assert _priced(printed)["price"] == price


def test_the_pages_other_prices_decide_the_decimal_mark() -> None:
    # the delivery fee says "," is the decimal mark: the dot of the price groups thousands
    others = "<p>Versand: 4,95 €</p><p>Zubehör ab 12,99 €</p>"
    assert _priced("1.299 €", extra=others)["price"] == 1299
    others = "<p>Shipping $4.95</p>"
    assert _priced("$1,299", extra=others)["price"] == 1299


@pytest.mark.parametrize(
    ("printed", "lang", "price"),
    [
        ("1.299 €", "de", Decimal("1299")),
        ("$ 24.990", "es-CL", Decimal("24990")),
        ("R$ 1.299", "pt-BR", Decimal("1299")),
        ("$1,299", "en-US", Decimal("1299")),
        ("£1,299", "en", Decimal("1299")),
    ],
)
def test_the_pages_language_decides_the_decimal_mark(
    printed: str, lang: str, price: Decimal
) -> None:
    assert _priced(printed, lang)["price"] == price


def test_an_amount_nothing_on_the_page_decides_is_stored_with_a_flag() -> None:
    product = _priced("$1.299")
    assert product["price"] is None
    assert product[AMBIGUOUS_PRICE] == "$1.299"
    # it is offered at a price all the same
    assert product["availability"] == "InStock"


@pytest.mark.parametrize(
    ("printed", "lang", "price"),
    [
        ("1.299,00 €", "en", Decimal("1299.00")),
        ("$1,299.00", "de", Decimal("1299.00")),
        ("12,99 €", None, Decimal("12.99")),
        ("$12.99", None, Decimal("12.99")),
        ("$1.5", None, Decimal("1.5")),
    ],
)
def test_an_amount_that_says_its_reading_is_read_as_printed(
    printed: str, lang: str | None, price: Decimal
) -> None:
    product = _priced(printed, lang)
    assert (product["price"], product[AMBIGUOUS_PRICE]) == (price, None)


@pytest.mark.parametrize(
    ("price", "currency", "read"),
    [
        ("24.990", "CLP", Decimal("24990")),
        ("24.990", "USD", Decimal("24.990")),
        ("24990", "CLP", Decimal("24990")),
        ("229.990", "KWD", Decimal("229.990")),
    ],
)
def test_a_structured_price_groups_thousands_only_in_a_currency_without_decimals(
    price: str, currency: str, read: Decimal
) -> None:
    data = {
        "@context": "https://schema.org",
        "@type": "Product",
        "name": "Blue Lamp",
        "offers": {"@type": "Offer", "price": price, "priceCurrency": currency},
    }
    head = f"<script type='application/ld+json'>{json.dumps(data)}</script>"
    product = _product("<h1>Blue Lamp</h1>", head=head)
    assert product["price"] == read


_LANGS = {",": ["de", "fr", "es", "it", "nl", "pt-BR", "pl"], ".": ["en", "en-GB", "ja", "es-MX"]}


def _printed(cents: int, decimal: str, decimals: bool) -> str:
    group = "." if decimal == "," else ","
    whole = f"{cents // 100:,}".replace(",", group)
    return f"{whole}{decimal}{cents % 100:02d}" if decimals else whole


@settings(max_examples=150, deadline=None)
@given(
    cents=st.integers(min_value=100, max_value=99_999_999),
    decimal=st.sampled_from([",", "."]),
    decimals=st.booleans(),
    says=st.sampled_from(["lang", "other price", "both"]),
    sign=st.sampled_from(["€", "$", "£", "kr"]),
    data=st.data(),
)
def test_any_amount_in_a_notation_the_page_states_is_read_right(
    cents: int, decimal: str, decimals: bool, says: str, sign: str, data: st.DataObject
) -> None:
    # whole amounts are printed without decimals ("1.299 €"), the others with them
    if not decimals:
        cents -= cents % 100
    printed = f"{_printed(cents, decimal, decimals)} {sign}"
    lang = data.draw(st.sampled_from(_LANGS[decimal])) if says != "other price" else None
    other = f"<p>Delivery 4{decimal}95 {sign}</p>" if says != "lang" else ""
    product = _priced(printed, lang, extra=other)
    assert product["price"] == Decimal(cents) / 100, (printed, lang, other)
