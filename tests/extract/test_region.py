"""The page's own product, not its neighbours': sections a shop titles as other products' or
as reviews are never read for the product's price, code or stock."""

from __future__ import annotations

from typing import Any

import pytest
from lxml import html

from distcrawl.extract import analyze
from distcrawl.extract.region import neighbour_sections, neighbour_title

URL = "https://shop.example/p/blue-lamp"


def _product(body: str) -> dict[str, Any]:
    analysis = analyze(url=URL, body=f"<html><body>{body}</body></html>".encode())
    assert analysis.kind == "product", analysis
    return dict(analysis.product or {})


_OTHERS = (
    "<div><div><span class='price'>$12.99</span> Red Lamp <button>Add to cart</button></div>"
    "<div><span class='price'>$15.99</span> Green Lamp <button>Add to cart</button></div></div>"
)


@pytest.mark.parametrize(
    "title",
    [
        "Customers also bought",
        "Customers who viewed this item also viewed",
        "You may also like",
        "You might also like",
        "Related products",
        "Similar items",
        "Frequently bought together",
        "Recently viewed",
        "Sponsored products related to this item",
        "More from this seller",
        "Customer reviews",
        "Das könnte Ihnen auch gefallen",
        "Ähnliche Artikel",
        "Kunden kauften auch",
        "Vous aimerez aussi",
        "Produits similaires",
        "Productos relacionados",
        "También te puede interesar",
        "Prodotti correlati",
        "Produtos relacionados",
        "Gerelateerde producten",
        "Podobne produkty",
    ],
)
def test_a_section_title_names_other_products_in_the_shops_language(title: str) -> None:
    assert neighbour_title(title)


@pytest.mark.parametrize(
    "text",
    ["Description", "Product details", "Specifications", "Aussie Floral Print Shirt", "Delivery"],
)
def test_other_headings_title_no_neighbour_section(text: str) -> None:
    assert not neighbour_title(text)


def test_a_price_in_a_section_titled_as_other_products_is_not_the_products() -> None:
    product = _product(
        "<main><h1>Blue Lamp</h1><div class='buybox'><span>Price</span> <b>$20.00</b></div>"
        "<section><div class='t'><h3>You may also like</h3></div>"
        f"<ul><li>{_OTHERS}</li></ul></section></main>"
    )
    assert product["price"] == 20


def test_a_section_is_the_blocks_after_its_title_up_to_the_next_heading() -> None:
    # a flat layout: the title and the other products are siblings of the product's own
    # heading and price; the description after the next heading is the product's again
    product = _product(
        "<div class='wrap'><h1>Blue Lamp</h1><p>€ 24,00</p><p>Sold out</p>"
        f"<h2>Customers also bought</h2>{_OTHERS}"
        "<h2>Description</h2><p>A lamp for reading.</p></div>"
    )
    assert (product["price"], product["currency"]) == (24, "EUR")
    assert product["availability"] == "OutOfStock"
    assert product["description"] == "A lamp for reading."


def test_stock_wording_in_the_reviews_is_not_the_products() -> None:
    product = _product(
        "<div class='wrap'><h1>Blue Lamp</h1><p class='price'>€ 24,00</p>"
        "<button>Add to cart</button><h2>Reviews</h2>"
        "<div><p>Great lamp, it was sold out for weeks.</p><p>Out of stock again?</p></div>"
        "</div>"
    )
    assert product["availability"] == "InStock"


def test_a_section_never_holds_the_pages_main_heading() -> None:
    root = html.fromstring(
        "<html><body><div id='all'><h3>Reviews (0)</h3><h1>Blue Lamp</h1>"
        "<p class='price'>$20.00</p></div></body></html>"
    )
    heading = root.get_element_by_id("all").find("h1")
    sections = neighbour_sections(root, heading)
    assert heading not in sections
    assert not any(heading in set(s.iter()) for s in sections)


def test_a_buy_button_in_a_section_of_other_products_is_not_the_products() -> None:
    analysis = analyze(
        url=URL,
        body=(
            "<html><body><div class='wrap'><h1>Blue Lamp</h1><p class='price'>$20.00</p>"
            f"<h2>Similar items</h2>{_OTHERS}</div></body></html>"
        ).encode(),
    )
    # nothing of the product's own says its stock: in stock for its price, not for a button
    assert analysis.sources["availability"] == "default"
    assert "button" not in analysis.explain()["availability"]["detail"]


def test_a_price_element_in_the_block_of_the_heading_and_buy_button_wins() -> None:
    # a promotion's price comes first in the page; the product's own price element sits in
    # the block holding its heading and buy button, after a long list of features
    features = "".join(f"<li>Feature {n}</li>" for n in range(80))
    product = _product(
        "<div class='promo'><b>Deal of the day</b> <span class='price'>$5.00</span></div>"
        f"<div class='main'><h1>Blue Lamp</h1><ul>{features}</ul>"
        "<span class='price'>$20.00</span><button>Add to cart</button></div>"
    )
    assert product["price"] == 20


def test_a_titled_carousel_of_other_products_does_not_make_a_product_page_a_listing() -> None:
    # sold out: no buy button, no product markup; three linked cards of other products
    cards = "".join(
        f"<li><a href='/p/other-{n}.html'>Other lamp {n}</a><span class='price'>$1{n}.00</span>"
        "</li>"
        for n in range(3)
    )
    analysis = analyze(
        url=URL,
        body=(
            "<html><body><div class='product'><h1>Blue Lamp</h1><p>Model: BL-1234</p>"
            "<span class='price'>$20.00</span><p>Sold out</p></div>"
            f"<section><h2>Customers also bought</h2><ul>{cards}</ul></section></body></html>"
        ).encode(),
    )
    assert analysis.kind == "product"
    assert (analysis.product or {})["price"] == 20
    assert len(analysis.links["product"]) == 3  # the neighbours are followed all the same
