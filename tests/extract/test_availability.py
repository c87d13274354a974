"""Availability wording to schema.org ItemAvailability names."""

from __future__ import annotations

import pytest

from distcrawl.extract import normalize_availability
from distcrawl.extract.availability import stock_line


@pytest.mark.parametrize(
    ("value", "name"),
    [
        ("https://schema.org/InStock", "InStock"),
        ("http://schema.org/OutOfStock", "OutOfStock"),
        ("schema:PreOrder", "PreOrder"),
        ("instock", "InStock"),
        ("https://schema.org/SoldOut", "SoldOut"),
        ("LimitedAvailability", "LimitedAvailability"),
        ("in_stock", "InStock"),
        ("In stock", "InStock"),
        ("In Stock - ships today", "InStock"),
        ("Available", "InStock"),
        ("Sold out", "OutOfStock"),
        ("sold_out", "OutOfStock"),
        ("Out of stock", "OutOfStock"),
        ("out-of-stock", "OutOfStock"),
        ("Currently unavailable", "OutOfStock"),
        ("Not available", "OutOfStock"),
        ("Ausverkauft", "OutOfStock"),
        ("Nicht lieferbar", "OutOfStock"),
        ("Épuisé", "OutOfStock"),
        ("Agotado", "OutOfStock"),
        ("Available for pre-order", "PreOrder"),
        ("Pre-Order", "PreOrder"),
        ("Backordered", "BackOrder"),
        ("Discontinued", "Discontinued"),
        ("No longer available", "Discontinued"),
        ("Only 3 left!", "InStock"),
        ("Low stock", "InStock"),
        ("Lieferbar", "InStock"),
        (True, "InStock"),
        (False, "OutOfStock"),
        (["https://schema.org/BackOrder"], "BackOrder"),
        ("Blue", None),
        ("", None),
        (None, None),
        (42, None),
    ],
)
def test_availability_names(value: object, name: str | None) -> None:
    assert normalize_availability(value) == name


@pytest.mark.parametrize(
    ("text", "name"),
    [
        # a count that merely ends in 0 is stock, not its absence (issue 16)
        ("In stock (10 available)", "InStock"),
        ("(20 available)", "InStock"),
        ("100 left", "InStock"),
        ("Only 10 in stock", "InStock"),
        ("0 available", "OutOfStock"),
        ("0 left", "OutOfStock"),
        ("Stock: 0 available", "OutOfStock"),
        ("0 in stock", "OutOfStock"),
        ("Only 1 left", "InStock"),
        ("Only 1 left!", "InStock"),
        ("only 2 available", "InStock"),
    ],
)
def test_stock_counts(text: str, name: str) -> None:
    assert normalize_availability(text) == name


def test_a_long_text_is_read_whole_and_a_stock_line_however_indented_is_one() -> None:
    from distcrawl.extract.availability import stock_line

    # past the length whose readings are remembered, the same reading: its first 300 chars
    assert normalize_availability("Sold out. " + "A sentence about it. " * 60) == "OutOfStock"
    assert normalize_availability("A sentence about it. " * 60 + "Sold out") is None
    assert stock_line(" " * 1200 + "In stock" + "\n" * 50) == "InStock"
    assert stock_line("Sold out " * 200) is None


@pytest.mark.parametrize(
    "text",
    ["Only 3 left!", "Only 1 left in stock", "Low stock", "Few left", "Limited stock",
     "Nur noch 2 Stück", "Plus que 2 en stock", "Almost gone"],
)  # fmt: skip
def test_few_left_is_in_stock_unless_the_shop_names_limited_availability(text: str) -> None:
    assert normalize_availability(text) == "InStock"
    assert stock_line(text) == "InStock"
    # the shop's own schema.org name stays what it says
    assert normalize_availability("https://schema.org/LimitedAvailability") == (
        "LimitedAvailability"
    )
