"""Availability from every place a shop prints it; the source nearest the price and heading
wins, and --explain names the overruled ones."""

from __future__ import annotations

import pytest

from distcrawl.extract import analyze
from distcrawl.extract.availability import out_of_stock_wording, stock_line

URL = "https://shop.example/p/item"


def _analysis(body: str) -> tuple[dict[str, object], dict[str, dict[str, str]]]:
    analysis = analyze(url=URL, body=f"<html><body>{body}</body></html>".encode())
    assert analysis.kind == "product"
    return dict(analysis.product or {}), analysis.explain()


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("Out of stock", "OutOfStock"),
        ("Sold out", "OutOfStock"),
        ("SOLD OUT!", "OutOfStock"),
        ("Temporarily unavailable", "OutOfStock"),
        ("Currently out of stock.", "OutOfStock"),
        ("Out of stock (0 available)", "OutOfStock"),
        ("(0 available)", "OutOfStock"),
        ("In stock", "InStock"),
        ("✓ In stock", "InStock"),
        ("In stock (22 available)", "InStock"),
        ("(10 available)", "InStock"),
        ("Only 3 left!", "InStock"),
        ("Only 3 left in stock", "InStock"),
        ("Pre-order", "PreOrder"),
        ("Ausverkauft", "OutOfStock"),
        ("Nicht lieferbar", "OutOfStock"),
        ("Auf Lager", "InStock"),
        ("Épuisé", "OutOfStock"),
        ("En stock", "InStock"),
        ("Agotado", "OutOfStock"),
        ("Non disponible", "OutOfStock"),
        ("Esaurito", "OutOfStock"),
        ("Niet op voorraad", "OutOfStock"),
        ("Op voorraad", "InStock"),
        ("Нет в наличии", "OutOfStock"),
        ("в наличии", "InStock"),
    ],
)
def test_a_stock_line_says_the_availability(text: str, said: str) -> None:
    assert stock_line(text) == said


@pytest.mark.parametrize(
    "text",
    [
        "Available in 3 colours",
        "Add to cart",
        "Price: £12.00",
        "5 items",
        "Our bestseller is never out of stock for long, order today and save",
        "",
    ],
)
def test_other_text_is_no_stock_line(text: str) -> None:
    assert stock_line(text) is None


def test_out_of_stock_wording_in_a_sentence() -> None:
    assert out_of_stock_wording("Sorry, this lamp is out of stock.") == "out of stock"
    assert out_of_stock_wording("The in-store check is temporarily unavailable.") is None


_HEAD = "<div class='col-md-6'><h1 class='h3'>Sharp Objects</h1><p class='mb-0'>Price: £47.82</p>"


def test_an_out_of_stock_paragraph_beside_the_price() -> None:
    product, explain = _analysis(f"{_HEAD}<p class='mb-0'>Out of stock</p></div>")
    assert product["availability"] == "OutOfStock"
    assert explain["availability"]["source"] == "heuristic"
    assert "'Out of stock'" in explain["availability"]["detail"]


def test_an_in_stock_paragraph_beside_the_price() -> None:
    product, explain = _analysis(f"{_HEAD}<p class='mb-0'>In stock</p></div>")
    assert product["availability"] == "InStock"
    assert "'In stock'" in explain["availability"]["detail"]


def test_the_default_names_the_block_it_looked_in() -> None:
    product, explain = _analysis(f"{_HEAD}<p>A fine book.</p></div>")
    assert product["availability"] == "InStock"
    assert "product's block" in explain["availability"]["detail"]


def test_out_of_stock_wording_anywhere_in_the_products_block() -> None:
    product, explain = _analysis(
        f"{_HEAD}<p>Sorry, this title is out of stock at the moment; ask us when it is back.</p>"
        "</div>"
    )
    assert product["availability"] == "OutOfStock"
    assert "out of stock" in explain["availability"]["detail"]


def test_out_of_stock_wording_outside_the_products_block_is_not_this_products() -> None:
    product, _ = _analysis(
        f"<div class='row'>{_HEAD}<p>A fine book.</p></div></div>"
        "<div class='row'><p>Items marked sold out ship when they are back.</p></div>"
    )
    assert product["availability"] == "InStock"


def test_a_disabled_buy_button() -> None:
    product, explain = _analysis(
        "<h1>Lamp</h1><p class='amount'>$12.00</p>"
        "<form action='/basket/add'><button type='submit' disabled>Add to basket</button></form>"
    )
    assert product["availability"] == "OutOfStock"
    assert "disabled buy button" in explain["availability"]["detail"]


def test_an_enabled_buy_button_alone_says_in_stock() -> None:
    product, explain = _analysis(
        "<h1>Lamp</h1><p class='amount'>$12.00</p>"
        "<form action='/basket/add'><button type='submit'>Add to basket</button></form>"
    )
    assert product["availability"] == "InStock"
    assert "enabled buy button" in explain["availability"]["detail"]


def test_a_stock_line_overrules_an_enabled_buy_button() -> None:
    product, _ = _analysis(
        "<h1>Lamp</h1><p class='amount'>$12.00</p><p>Sold out</p>"
        "<form action='/basket/add'><button type='submit'>Add to basket</button></form>"
    )
    assert product["availability"] == "OutOfStock"


def test_conflicting_sources_the_one_nearest_the_price_and_heading_wins() -> None:
    # the row far below says in stock; the line printed with the price says otherwise
    product, explain = _analysis(
        f"<div class='row'>{_HEAD}<p class='mb-0'>Out of stock</p></div></div>"
        "<h2>Product Description</h2><p>A thriller.</p>"
        "<h2>Product Information</h2><dl><dt>UPC</dt><dd>bfd5e1701c862ac3</dd>"
        "<dt>Availability</dt><dd>In stock (1 available)</dd></dl>"
    )
    assert product["availability"] == "OutOfStock"
    detail = explain["availability"]["detail"]
    assert detail.startswith("line <p> 'Out of stock'"), detail
    assert "nearest the price and heading" in detail
    assert "overruled: label dt/dd 'Availability': 'In stock (1 available)': InStock" in detail


def test_conflicting_sources_the_other_way_round() -> None:
    product, explain = _analysis(
        f"<div class='row'>{_HEAD}<p class='mb-0'>In stock</p></div></div>"
        "<div class='related'><h2>You may also like</h2><div><p>Sold out</p></div></div>"
        "<dl><dt>Availability</dt><dd>Sold out</dd></dl>"
    )
    assert product["availability"] == "InStock"
    assert (
        "overruled: label dt/dd 'Availability': 'Sold out': OutOfStock"
        in (explain["availability"]["detail"])
    )


def test_a_disabled_button_beside_the_price_overrules_a_stock_row_far_away() -> None:
    product, explain = _analysis(
        "<div class='main'><h1>Lamp</h1><p class='amount'>$12.00</p>"
        "<button class='add-to-cart' disabled>Add to cart</button></div>"
        "<footer-note><table><tr><th>Stock</th><td>In stock</td></tr></table></footer-note>"
    )
    assert product["availability"] == "OutOfStock"
    assert "overruled" in explain["availability"]["detail"]


def test_a_hidden_stock_element_is_not_read() -> None:
    product, _ = _analysis(
        "<h1>Lamp</h1><p class='price'>$12.00</p>"
        "<div class='out-of-stock-message' style='display: none'>Out of stock</div>"
        "<div class='stock-status'>In stock</div>"
    )
    assert product["availability"] == "InStock"


def test_a_stock_line_in_another_products_card_is_not_this_products() -> None:
    product, _ = _analysis(
        "<div class='product-main'><h1>Lamp</h1><p class='price'>$12.00</p><p>In stock</p>"
        "<div class='related-products'><p>Sold out</p></div></div>"
    )
    assert product["availability"] == "InStock"


def test_a_sold_out_size_is_not_the_products_stock() -> None:
    product, _ = _analysis(
        f"{_HEAD}<ul class='size-selector'><li><span>S</span></li>"
        "<li><span>M</span> <span>Sold out</span></li></ul></div>"
    )
    assert product["availability"] == "InStock"


@pytest.mark.parametrize(
    "control",
    [
        "<button>Notify me when available</button>",
        "<a href='#alert'>Email me when back in stock</a>",
        "<input type='submit' value='Benachrichtigen, wenn verfügbar'>",
        "<button>Me prévenir</button>",
        "<button>Avísame cuando esté disponible</button>",
    ],
)
def test_a_notify_me_control_in_place_of_a_buy_button_says_out_of_stock(control: str) -> None:
    product, explain = _analysis(
        f"<div class='product'><h1>Blue Lamp</h1><p class='price'>$20.00</p>{control}</div>"
    )
    assert product["availability"] == "OutOfStock"
    assert "notify-me control" in explain["availability"]["detail"]


def test_a_notify_me_control_of_another_product_says_nothing() -> None:
    product, _ = _analysis(
        "<div class='product'><h1>Blue Lamp</h1><p class='price'>$20.00</p>"
        "<button>Add to cart</button></div>"
        "<div><h2>You may also like</h2><div><p>Red Lamp $25.00</p>"
        "<button>Notify me when available</button></div></div>"
    )
    assert product["availability"] == "InStock"
