"""Prices to Decimal and currencies to ISO 4217 codes (price-parser underneath)."""

from __future__ import annotations

from decimal import Decimal

import pytest

from distcrawl.extract import normalize_currency, parse_price
from distcrawl.extract.prices import parse_structured_price


@pytest.mark.parametrize(
    ("text", "amount", "currency"),
    [
        ("€12,99", "12.99", "EUR"),
        ("$1,299.00", "1299.00", "USD"),
        ("1.299,50 €", "1299.50", "EUR"),
        ("12,99 EUR", "12.99", "EUR"),
        ("£5", "5", "GBP"),
        ("CHF 24.90", "24.90", "CHF"),
        ("US$ 4.00", "4.00", "USD"),
        ("¥1200", "1200", "JPY"),
        ("Price: 19.99", "19.99", None),
        ("Price on request", None, None),
        ("", None, None),
    ],
)
def test_visible_price_text(text: str, amount: str | None, currency: str | None) -> None:
    assert parse_price(text) == (None if amount is None else Decimal(amount), currency)


def test_currency_hint_fills_a_bare_number() -> None:
    assert parse_price("12.99", "EUR") == (Decimal("12.99"), "EUR")
    assert parse_price("€12,99", "USD") == (Decimal("12.99"), "EUR")


@pytest.mark.parametrize(
    ("value", "amount"),
    [
        ("12.99", "12.99"),
        (12.99, "12.99"),
        (1299, "1299"),
        ("1.299", "1.299"),  # schema.org: the dot is always the decimal mark
        ("1,299.00", "1299.00"),
        ("12,99", "12.99"),
        ("NaN", None),
        ("-5", None),
        (True, None),
        (None, None),
        ({"a": 1}, None),
    ],
)
def test_structured_price_values(value: object, amount: str | None) -> None:
    assert parse_structured_price(value) == (None if amount is None else Decimal(amount))


@pytest.mark.parametrize(
    ("value", "code"),
    [
        ("usd", "USD"),
        ("€", "EUR"),
        ("US$", "USD"),
        ("zł", "PLN"),
        ("Kč", "CZK"),
        ("Currency: GBP", "GBP"),
        ("XYZ", None),
        ("dollars", None),
        (None, None),
        (12, None),
    ],
)
def test_currency_codes(value: object, code: str | None) -> None:
    assert normalize_currency(value) == code
