"""The description from the block a shop titles "Description", "Overview", ... or from
structured data."""

from __future__ import annotations

import json

import pytest

from distcrawl.extract import analyze

URL = "https://shop.example/p/item"
TEXT = "A sturdy lamp of brass, hand-made in Lisbon."
_TOP = "<h1>Brass lamp</h1><p class='amount'>$12.00</p>"


def _product(body: str, head: str = "") -> dict[str, object]:
    page = f"<html><head>{head}</head><body>{body}</body></html>"
    analysis = analyze(url=URL, body=page.encode())
    assert analysis.kind == "product"
    return {**(analysis.product or {}), "explain": analysis.explain()}


@pytest.mark.parametrize(
    "title", ["Description", "Product Description", "Overview", "About this item",
              "Produktbeschreibung", "Description du produit", "Descripción", "Описание"]
)  # fmt: skip
def test_a_heading_and_its_paragraph(title: str) -> None:
    product = _product(f"{_TOP}<h2>{title}</h2><p>{TEXT}</p><h2>Specifications</h2><p>1 kg</p>")
    assert product["description"] == TEXT
    explain = product["explain"]
    assert isinstance(explain, dict)
    assert title in explain["description"]["detail"]


def test_several_paragraphs_up_to_the_next_heading() -> None:
    product = _product(
        f"{_TOP}<h3>Description:</h3><p>{TEXT}</p><ul><li>Brass</li><li>40 cm</li></ul>"
        "<h3>Reviews</h3><p>Nice.</p>"
    )
    assert product["description"] == f"{TEXT} Brass 40 cm"


def test_a_title_in_its_own_wrapper() -> None:
    product = _product(
        f"{_TOP}<div id='product_description' class='sub-header'><h2>Product Description</h2>"
        f"</div><p>{TEXT}</p><div class='sub-header'><h2>Product Information</h2></div>"
        "<table><tr><th>UPC</th><td>a897fe39b1053632</td></tr></table>"
    )
    assert product["description"] == TEXT


def test_a_bold_title_and_the_text_after_it() -> None:
    product = _product(f"{_TOP}<p><strong>Description:</strong> {TEXT}</p>")
    assert product["description"] == TEXT


def test_a_tab_and_its_panel() -> None:
    product = _product(
        f"{_TOP}<ul class='tabs'><li><a href='#tab-description'>Description</a></li>"
        "<li><a href='#tab-reviews'>Reviews (2)</a></li></ul>"
        f"<div id='tab-description'><h2>Description</h2><p>{TEXT}</p></div>"
        "<div id='tab-reviews'><p>Nice.</p></div>"
    )
    assert product["description"] == TEXT


def test_bold_words_inside_a_sentence_are_no_title() -> None:
    product = _product(f"{_TOP}<p>Read the <b>description</b> below.</p>")
    assert product["description"] is None


def test_a_description_title_in_the_footer_is_not_the_products() -> None:
    product = _product(f"{_TOP}<footer><h4>Overview</h4><p>Shipping and returns.</p></footer>")
    assert product["description"] is None


def test_a_titled_block_wins_over_the_meta_description() -> None:
    product = _product(
        f"{_TOP}<h2>Description</h2><p>{TEXT}</p>",
        head="<meta name='description' content='Buy a brass lamp at our shop!'>",
    )
    assert product["description"] == TEXT


def test_structured_data_gives_the_description() -> None:
    data = {
        "@context": "https://schema.org",
        "@type": "Product",
        "name": "Brass lamp",
        "description": TEXT,
        "offers": {"@type": "Offer", "price": "12.00", "priceCurrency": "USD"},
    }
    product = _product(
        f"{_TOP}<h2>Description</h2><p>Other words.</p>",
        head=f"<script type='application/ld+json'>{json.dumps(data)}</script>",
    )
    assert product["description"] == TEXT
