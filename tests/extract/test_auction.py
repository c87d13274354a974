"""An auction's price: the bid beside a count of bids over the starting price that structured
data gives."""

from __future__ import annotations

from decimal import Decimal

from distcrawl.extract import analyze

URL = "https://auctions.example/item/93133869_pillows-pair"


def _ld(price: str, currency: str = "USD") -> str:
    return (
        '<script type="application/ld+json">{"@context": "http://schema.org",'
        ' "@type": "Product", "name": "Pillows, pair", "sku": 93133869,'
        f' "offers": {{"@type": "Offer", "price": {price}, "priceCurrency": "{currency}",'
        ' "availability": "http://schema.org/InStock"}}</script>'
    )


def _analyze(body: str) -> tuple[dict[str, object], dict[str, str], dict[str, str]]:
    analysis = analyze(url=URL, body=f"<html><body>{body}</body></html>".encode())
    assert analysis.kind == "product" and analysis.product is not None
    return dict(analysis.product), analysis.sources, analysis.where


def _bidding_box(bids: str) -> str:
    return (
        "<h1>Pillows, pair</h1><div class='bidding-box'><div class='status'>"
        "<span class='price'>$200</span><span class='count'>2<!-- --> <!-- -->"
        f"{bids}</span></div><span>Starting Price <!-- -->$150</span></div>"
    )


def test_the_bid_beside_a_count_of_bids_beats_the_structured_starting_price() -> None:
    product, sources, where = _analyze(_ld("150") + _bidding_box("bids"))
    assert product["price"] == Decimal("200")
    assert product["currency"] == "USD"
    assert sources["price"] == "heuristics"
    assert "overruled json-ld price 150: the starting price" in where["price"]


def test_a_price_beside_a_count_that_is_not_of_bids_is_no_bid() -> None:
    product, sources, _ = _analyze(_ld("150") + _bidding_box("reviews"))
    assert product["price"] == Decimal("150")
    assert sources["price"] == "json-ld"


def test_a_structured_price_the_page_does_not_label_as_starting_is_kept() -> None:
    body = (
        "<h1>Pillows, pair</h1><div class='status'><span class='price'>$200</span>"
        "<span class='count'>2 bids</span></div><p>Buy it now $150</p>"
    )
    product, sources, _ = _analyze(_ld("150") + body)
    assert product["price"] == Decimal("150")
    assert sources["price"] == "json-ld"


def _ebay_like(bids: int, bid_label: str, bid: str, first_row: str = "") -> str:
    return (
        f"<h1>Pony cart harness</h1><div class='bid-box'>{first_row}<div class='row'>"
        f"<span class='label'>{bid_label}:</span><span class='amount'>{bid}</span></div>"
        f"<div class='row'><a href='#history'>[ {bids} bids ]</a></div></div>"
    )


def test_no_bids_placed_keeps_the_starting_bid() -> None:
    buy_now = "<div class='row'><span>Buy it now:</span><span>£150.00</span></div>"
    body = _ebay_like(0, "Starting bid", "£115.00", first_row=buy_now)
    product, _, _ = _analyze(_ld("115.00", "GBP") + body)
    assert product["price"] == Decimal("115.00")


def test_a_bid_labelled_apart_from_its_amount_and_a_count_in_brackets() -> None:
    body = "<p><span>Starting bid:</span> <span>£115.00</span></p>" + _ebay_like(
        3, "Current bid", "£130.00"
    )
    product, _, _ = _analyze(_ld("115.00", "GBP") + body)
    assert product["price"] == Decimal("130.00")
