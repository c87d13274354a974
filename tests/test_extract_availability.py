"""Availability wording to schema.org ItemAvailability names."""

from __future__ import annotations

import pytest

from distcrawl.extract import normalize_availability


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
        ("Only 3 left!", "LimitedAvailability"),
        ("Low stock", "LimitedAvailability"),
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
