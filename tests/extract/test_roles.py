"""A printed price's role from its neighbourhood: only the current price is the product's, a
was price is its list price, and instalments, unit prices, shipping fees, savings and bundle
prices are none of them."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from distcrawl.extract import analyze
from distcrawl.extract.roles import (
    BUNDLE,
    CURRENT,
    INSTALMENT,
    SAVING,
    SHIPPING,
    UNIT,
    WAS,
    around,
    mark_role,
    text_role,
)

URL = "https://shop.example/p/blue-lamp"


def _product(body: str) -> dict[str, Any]:
    analysis = analyze(url=URL, body=f"<html><body>{body}</body></html>".encode())
    assert analysis.kind == "product", analysis
    return dict(analysis.product or {})


def _role(line: str, own: str | None = None) -> str:
    own = line if own is None else own
    return text_role(*around(line, line.index(own), own))


@pytest.mark.parametrize(
    ("line", "own", "role"),
    [
        ("Was $20.00", None, WAS),
        ("RRP £20", None, WAS),
        ("List Price: US$24.99", None, WAS),
        ("UVP 29,99 €", None, WAS),
        ("statt 29,99 €", None, WAS),
        ("Now $15 Was $20", "$20", WAS),
        ("Now $15 Was $20", "$15", CURRENT),
        ("4 x $25.00", None, INSTALMENT),
        ("10x de R$ 99,90 sem juros", None, INSTALMENT),
        ("or 4 interest-free payments of $12.50 with Klarna", None, INSTALMENT),
        ("12 cuotas de $ 1.250", None, INSTALMENT),
        ("$19/mo", None, INSTALMENT),
        ("$34.99 per month for 24 months", None, INSTALMENT),
        ("€ 3,50 / kg", None, UNIT),
        ("$12.99 ($1.08 / Count)", "$1.08", UNIT),
        ("Grundpreis: 7,00 € / 1 l", None, UNIT),
        ("+ $4.99 shipping", None, SHIPPING),
        ("Shipping: $4.99", None, SHIPPING),
        ("Free delivery on orders over £50", None, SHIPPING),
        ("Save $5.00", None, SAVING),
        ("You save: 20,00 €", None, SAVING),
        ("$5 off", None, SAVING),
        ("Buy all three: $59.97", None, BUNDLE),
        ("Bundle price €99", None, BUNDLE),
        ("Price: $12.99", None, CURRENT),
        ("Our price £12.99", None, CURRENT),
        ("From $9.99", None, CURRENT),
        ("Starting at $19.99", None, CURRENT),
        ("Price excl. VAT: €10,00", None, CURRENT),
        ("$12.99 ($1.08 / Count)", "$12.99", CURRENT),
    ],
)
def test_the_words_around_an_amount_say_its_role(line: str, own: str | None, role: str) -> None:
    assert _role(line, own) == role


@pytest.mark.parametrize(
    ("marks", "role"),
    [
        ("old-price", WAS),
        ("price price--old", WAS),
        ("priceOld", WAS),
        ("price_was", WAS),
        ("compare-at-price", WAS),
        ("price-rrp", WAS),
        ("installment-price", INSTALMENT),
        ("price klarna-monthly", INSTALMENT),
        ("unit-price", UNIT),
        ("price-per-unit", UNIT),
        ("shipping-cost", SHIPPING),
        ("you-save", SAVING),
        ("bundle-total", BUNDLE),
    ],
)
def test_class_words_say_a_prices_role(marks: str, role: str) -> None:
    assert mark_role(marks) == role


@pytest.mark.parametrize(
    "marks",
    [
        "price",
        "special-price",
        "product-price",
        "price-holder",
        "list-unstyled",
        "text-regular",
        "boleto-price",
        "price-item price-item--regular",
        "a-color-price",
        "golden",
    ],
)
def test_other_class_words_say_no_role(marks: str) -> None:
    assert mark_role(marks) == CURRENT


@pytest.mark.parametrize(
    "neighbour",
    [
        "<span class='price installment'>4 x $25.00</span>",
        "<span class='price'>$19<small>/mo</small></span>",
        "<p>or 4 interest-free payments of <span class='price'>$12.50</span></p>",
        "<span class='price-per-unit'>$1.08 / count</span>",
        "<div class='shipping'><span class='price'>$4.99</span></div>",
        "<p>Save <span class='price'>$5.00</span></p>",
    ],
)
def test_a_price_element_that_is_not_the_current_price_gives_way(neighbour: str) -> None:
    # printed before the product's own price, in document order
    product = _product(
        f"<h1>Blue Lamp</h1><div class='box'>{neighbour}</div>"
        "<div class='box'><span class='price'>$99.99</span></div><button>Add to cart</button>"
    )
    assert product["price"] == Decimal("99.99")


def test_a_was_price_wrapped_before_the_current_one_is_the_list_price() -> None:
    # the old price's wrapper carries the mark; the price element inside says only "price"
    product = _product(
        "<h1>Blue Lamp</h1><div class='price-box'>"
        "<span class='old-price'><span class='price-wrapper'><span class='price'>$120.00</span>"
        "</span></span>"
        "<span class='special-price'><span class='price-wrapper'><span class='price'>$99.00"
        "</span></span></span></div><button>Add to cart</button>"
    )
    assert (product["price"], product["list_price"]) == (99, 120)


def test_a_price_after_the_heading_that_is_an_instalment_gives_way() -> None:
    product = _product(
        "<h1>Blue Lamp</h1><p>10x de R$ 99,90 sem juros</p><p>R$ 999,00</p><button>Comprar</button>"
    )
    assert product["price"] == Decimal("999.00")


def test_a_was_price_printed_alone_is_the_price() -> None:
    product = _product("<h1>Blue Lamp</h1><ul><li><span class='old-price'>40.00€</span></li></ul>")
    assert product["price"] == 40


def test_a_word_after_the_price_in_a_hidden_block_says_nothing() -> None:
    product = _product(
        "<h1>Blue Lamp</h1><div class='box'><span class='price'>£5,100.00</span>"
        "<div style='display: none'> shipping</div></div><button>Buy it now</button>"
    )
    assert product["price"] == 5100


@pytest.mark.parametrize(
    ("printed", "price"),
    [
        ("In stock 3 pcs 12,99 €", Decimal("12.99")),
        ("-20% 15,99 €", Decimal("15.99")),
        ("1 item: 12.99 USD", Decimal("12.99")),
    ],
)
def test_the_amount_beside_the_currency_is_the_price_among_other_numbers(
    printed: str, price: Decimal
) -> None:
    product = _product(f"<h1>Blue Lamp</h1><div class='price'>{printed}</div><button>Buy</button>")
    assert product["price"] == price


def test_a_multi_buy_offer_is_no_price_of_one() -> None:
    assert _role("2 for $10") == BUNDLE
    product = _product(
        "<h1>Blue Lamp</h1><p class='offer'>2 for $10</p><p>Price: $5.49</p><button>Buy</button>"
    )
    assert product["price"] == Decimal("5.49")


def test_a_labelled_price_that_is_an_instalment_gives_way() -> None:
    product = _product(
        "<h1>Blue Lamp</h1><p>Price: 4 x $25.00</p><p>$99.00</p><button>Buy now</button>"
    )
    assert product["price"] == 99


@pytest.mark.parametrize(
    "element",
    [
        "<div class='price-holder'>$99.00</div>",
        "<div class='price bold'>$99.00</div>",
        "<div class='price price--golden'>$99.00</div>",
        "<div class='product-price-listing'>$99.00</div>",
    ],
)
def test_a_was_mark_is_a_whole_class_word(element: str) -> None:
    # "holder", "bold", "golden" and "listing" contain "old" and "list", and say nothing: the
    # first price element is the price, not the one after it
    product = _product(
        f"<h1>Blue Lamp</h1>{element}<button>Add to cart</button>"
        "<div class='price-foot'>$120.00</div>"
    )
    assert product["price"] == 99


def test_a_was_word_inside_another_word_after_the_heading_says_nothing() -> None:
    product = _product("<h1>Blue Lamp</h1><p>Gold edition $99.00</p><button>Buy now</button>")
    assert product["price"] == 99


def test_the_heading_before_a_price_is_no_label_of_it() -> None:
    # "Save" and "Bundle" in the product's name say nothing of its price
    product = _product(
        "<div><h1>Save the Planet Bundle</h1><span class='price'>$10.00</span>"
        "<button>Add to cart</button></div>"
    )
    assert product["price"] == 10


def test_a_label_in_a_block_of_its_own_before_the_price_says_its_role() -> None:
    # a flex layout: the label and the amount each in a block of their own
    product = _product(
        "<h1>Blue Lamp</h1><div class='row'><div class='label'>Was</div>"
        "<div class='value'><span class='price'>$120.00</span></div></div>"
        "<div class='row'><div class='label'>Now</div>"
        "<div class='value'><span class='price'>$99.00</span></div></div>"
        "<button>Add to cart</button>"
    )
    assert (product["price"], product["list_price"]) == (99, 120)


def test_a_was_price_struck_through_in_the_prices_own_line_is_the_list_price() -> None:
    product = _product(
        "<h1>Blue Lamp</h1><p>Now £676.25 <s>Was £845.31</s></p><button>Buy</button>"
    )
    assert (product["price"], product["list_price"]) == (Decimal("676.25"), Decimal("845.31"))


def test_a_price_element_struck_through_before_the_current_one_is_the_list_price() -> None:
    product = _product(
        "<h1>Blue Lamp</h1><div class='price-box'><span>statt</span> "
        "<s class='price'>1.249,99 €</s> <span>jetzt nur</span> "
        "<span class='price'>999,99 €</span></div><button>In den Warenkorb</button>"
    )
    assert (product["price"], product["list_price"]) == (Decimal("999.99"), Decimal("1249.99"))
