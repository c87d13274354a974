"""analyze(): page kinds, links and canonical URLs, and no exception for any input."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from distcrawl.extract import PAGE_KINDS, analyze

URL = "https://shop.example.com/x"


def _kind(body: str, url: str = URL) -> str:
    return analyze(url=url, body=body.encode()).kind


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"\x00\x01\x02\xff\xfe" * 1000,
        bytes(range(256)) * 64,
        b"<html><body><p>unclosed <div><span><a href='/'>x",
        b"<div " + b" ".join(b'a%d="v"' % i for i in range(2000)) + b">",
        b"<div>" * 20000,
        b'<script type="application/ld+json">' + b"[" * 50000 + b"</script>",
        b'<script type="application/ld+json">{"@type": "Product", "name": </script>',
        b'<script type="application/ld+json">{"@type": ["Product"], "name": {"@value": 5},'
        b' "offers": [null, 1, "x", {"price": {"a": []}}], "image": [null, {}]}</script>',
        b'<script>window.__PRODUCT__ = {name: "not json"};</script>',
        b'<html itemscope itemtype="http://schema.org/Product"><meta itemprop="offers" '
        b'itemscope itemtype="http://schema.org/Offer"><b itemprop="price">?</b></html>',
        b'<html><body vocab="http://schema.org/" typeof="Product"><b property="name">x</b>'
        b'<i property="offers" typeof="Offer" resource="#o"><b property="price">1</b></i>',
        b"<a href='javascript:alert(1)'>x</a><a href='http://[::1'>y</a><a href='mailto:a@b'>",
        "<h1>Caf\u00e9</h1><p class='price'>\u20ac5</p>".encode("utf-16"),
    ],
)
def test_hostile_input_never_raises(body: bytes) -> None:
    analysis = analyze(url=URL, body=body, encoding=None, profile=None)
    assert analysis.kind in PAGE_KINDS
    assert set(analysis.links) == {"category", "listing", "product", "next"}
    assert all(isinstance(e, str) for e in analysis.errors)


def test_unknown_encoding_and_text_bodies() -> None:
    analysis = analyze(url=URL, body=b"<h1>x</h1>", encoding="no-such-codec")
    assert any("unknown encoding" in e for e in analysis.errors)
    assert analyze(url=URL, body="<h1>x</h1>").kind == "other"


def test_oversized_body_is_cut_with_an_error() -> None:
    from distcrawl.extract import page

    body = b"<p>" + b"x" * (page.DEFAULT_MAX_BODY_BYTES + 10)
    assert any("cut to" in e for e in analyze(url=URL, body=body).errors)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=2000) | st.text(max_size=2000).map(str.encode))
def test_analyze_never_raises_on_random_bytes(body: bytes) -> None:
    assert analyze(url=URL, body=body).kind in PAGE_KINDS


_FRAGMENTS = [
    "<html>", "<head>", "<body>", "</div>", "<div class='product'>", "<h1>", "</h1>",
    "<span class='price'>", "$12.99", "</span>", "<a href='/p/1.html'>", "</a>", "<li>",
    '<script type="application/ld+json">', "</script>", '{"@type":"Product","name":"x"',
    ',"offers":{"price":"1"}}', "<nav>", '<a rel="next" href="?page=2">', "<link rel=canonical",
    " href='//evil.example/'>", "itemscope", "<b itemprop='price'>", "typeof='Product'",
]  # fmt: skip


@settings(max_examples=80, deadline=None)
@given(st.lists(st.sampled_from(_FRAGMENTS), max_size=40))
def test_analyze_never_raises_on_tag_soup(parts: list[str]) -> None:
    analysis = analyze(url=URL, body="".join(parts).encode())
    assert analysis.kind in PAGE_KINDS
    if analysis.product is not None:
        assert analysis.product["url"] == analysis.canonical_url


def test_rel_canonical_on_another_site_is_ignored() -> None:
    body = b'<link rel="canonical" href="https://evil.example/p/1"><h1>x</h1>'
    analysis = analyze(url="https://shop.example.com/p/1?utm_source=x", body=body)
    assert analysis.canonical_url == "https://shop.example.com/p/1"
    assert any("another site" in e for e in analysis.errors)


def test_product_page_with_related_products_is_still_a_product() -> None:
    cards = "".join(
        f'<li class="card"><a href="/p/{i}.html">Other {i}</a>'
        f'<span class="price">${i}.00</span></li>'
        for i in range(8)
    )
    body = (
        '<h1>Main thing</h1><span class="price">$5.00</span>'
        '<button class="add-to-cart">Add to cart</button>'
        f'<section class="related"><ul>{cards}</ul></section>'
    )
    analysis = analyze(url=URL, body=body.encode())
    assert analysis.kind == "product"
    assert analysis.product is not None
    assert str(analysis.product["price"]) == "5.00"
    assert len(analysis.links["product"]) == 8


def test_listing_of_cards_is_a_listing_even_with_a_heading_and_prices() -> None:
    cards = "".join(
        f'<div class="tile"><a href="/shop/item{i}">Thing {i}</a><span>€{i},50</span></div>'
        for i in range(4)
    )
    assert _kind(f"<h1>Things</h1><div class='grid'>{cards}</div>") == "listing"


def test_jsonld_item_list_of_products_is_a_listing() -> None:
    items = ",".join(
        f'{{"@type":"Product","name":"P{i}","url":"https://shop.example.com/p/{i}",'
        f'"offers":{{"price":"{i}.00","priceCurrency":"USD"}}}}'
        for i in range(5)
    )
    body = f'<script type="application/ld+json">[{items}]</script>'
    assert _kind(body) == "listing"


def test_single_product_listing_with_pagination_is_a_listing() -> None:
    body = (
        "<h1>Kites</h1><ul class='products'><li class='product-card'>"
        "<a class='product-link' href='/p/1-kite.html'>Kite</a><span>$9.99</span></li></ul>"
    )
    assert _kind(body) == "listing"


def test_category_and_other_pages() -> None:
    assert _kind("<nav><a href='/c/a/'>A</a><a href='/c/b/'>B</a></nav><h1>Shop</h1>") == "category"
    assert _kind("<h1>About us</h1><p>We sell things.</p>") == "other"


def test_pagination_links_in_order_and_canonical() -> None:
    body = b"""<head><link rel="next" href="/l?page=3"></head><body>
      <div class="pager"><a href="/l?page=1&utm_source=x">1</a> <a href="/l?page=3">3</a>
      <a href="/l?page=4">4</a></div> <a class="next-page" href="/l?page=3">&raquo;</a></body>"""
    analysis = analyze(url="https://s.example/l?page=2", body=body)
    assert analysis.links["next"] == [
        "https://s.example/l?page=3",
        "https://s.example/l",
        "https://s.example/l?page=4",
    ]


@pytest.mark.parametrize("word", ["Next", "Weiter", "Suivant", "\u203a", "\u00bb"])
def test_next_words(word: str) -> None:
    body = f'<p><a href="/list/2">{word}</a></p>'.encode()
    assert analyze(url="https://s.example/list/1", body=body).links["next"] == [
        "https://s.example/list/2"
    ]


def test_account_cart_and_filter_links_are_not_categories() -> None:
    body = b"""<nav><a href="/c/shoes/">Shoes</a><a href="/cart">Cart</a>
      <a href="/account/login">Sign in</a></nav>
      <div class="facets"><a href="/c/shoes/?color=red">Red</a></div>"""
    assert analyze(url=URL, body=body).links["category"] == ["https://shop.example.com/c/shoes/"]


def test_a_long_listing_under_a_big_menu_is_read_whole() -> None:
    # the speed of analysis is measured by bench/extract.py (its smoke test asserts the figures)
    cards = "".join(
        f'<li class="product-card"><a class="product-link" href="/p/{i}-x.html">P {i}</a>'
        f'<span class="card-price">${i}.99</span></li>'
        for i in range(48)
    )
    body = (f"<nav class='categories'>{'<a href=/c/a/>A</a>' * 30}</nav>"
            f"<h1>Kites</h1><ul class='products'>{cards}</ul>").encode()  # fmt: skip
    analysis = analyze(url=URL, body=body)
    assert analysis.kind == "listing"
    assert len(analysis.links["product"]) == 48


def test_product_blocks_named_like_site_chrome_still_count() -> None:
    body = b"""<header class="site-header"><h1>Shop name</h1><span class="price">$0.00</span>
      </header><main><article><header class="product-header"><h1>Real product</h1></header>
      <div class="product-sidebar"><span class="price">$42.00</span>
      <div class="add-to-basket"><button>Add to basket</button></div></div></article></main>"""
    analysis = analyze(url=URL, body=body)
    assert analysis.kind == "product"
    assert analysis.product is not None
    assert analysis.product["name"] == "Real product"
    assert str(analysis.product["price"]) == "42.00"


def test_magento_style_category_products_grid_is_a_listing() -> None:
    items = "".join(
        f'<li class="item"><a href="/widget-{i}.html" class="product-image">W{i}</a>'
        f'<span class="regular-price"><span class="price">${i}.00</span></span></li>'
        for i in range(4)
    )
    body = f'<div class="category-products"><ul class="products-grid">{items}</ul></div>'
    analysis = analyze(url=URL, body=body.encode())
    assert analysis.kind == "listing"
    assert len(analysis.links["product"]) == 4


def test_microdata_cards_of_a_small_listing_are_not_its_product() -> None:
    cards = "".join(
        f'<li itemscope itemtype="https://schema.org/Product"><a itemprop="url" '
        f'href="/p/{i}-thing.html"><span itemprop="name">Thing {i}</span></a>'
        f'<span itemprop="offers" itemscope itemtype="https://schema.org/Offer">'
        f'<meta itemprop="price" content="{i}.50"><meta itemprop="priceCurrency" content="EUR">'
        f"</span></li>"
        for i in range(2)
    )
    analysis = analyze(url=URL, body=f"<h1>Things</h1><ul>{cards}</ul>".encode())
    assert analysis.kind == "listing"
    assert analysis.product is None


def test_every_field_analyze_fills_is_a_product_field() -> None:
    """The spider builds Product(**analysis.product): a field Product lacks would raise."""
    from distcrawl.extract import PRODUCT_FIELDS
    from distcrawl.node.items import Product

    assert set(PRODUCT_FIELDS) <= set(Product.fields)


def test_offer_links_in_one_row_of_a_layout_table_do_not_make_a_listing() -> None:
    offers = "".join(
        f"<div><a href='https://promo.shop.example.com/event{i}/index.htm'>Offer {i}</a></div>"
        for i in range(4)
    )
    body = (
        "<table><tr><td><h1>Goose floss, 250 g</h1></td></tr>"
        "<tr><td>Special price <span>294</span> 元</td></tr></table>"
        "<table><tr><td>Offers</td>"
        f"<td>Spend $590 and get a gift {offers}</td></tr></table>"
    )
    analysis = analyze(url=URL, body=body.encode())
    assert analysis.kind == "product"
    assert analysis.product is not None
    assert str(analysis.product["price"]) == "294"
