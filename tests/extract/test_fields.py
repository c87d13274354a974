"""Product fields read from visible markup: which price and code are the page's own."""

from __future__ import annotations

from decimal import Decimal

from distcrawl.extract import analyze

URL = "https://shop.example/p/lens-stick-on"


def _product(body: str, url: str = URL) -> dict[str, object]:
    analysis = analyze(url=url, body=f"<html><body>{body}</body></html>".encode())
    assert analysis.kind == "product"
    return dict(analysis.product or {})


def test_a_price_before_tax_is_not_the_price() -> None:
    product = _product(
        "<h1>Reading lens</h1><button class='add-to-cart'>Add to cart</button>"
        "<ul><li class='price-tax'>Ex tax: <span class='price-tax-live'>36.53€</span></li>"
        "<li class='price'><span class='price-new'>40.00€</span></li></ul>"
    )
    assert product["price"] == Decimal("40.00")


def test_a_price_with_tax_is_the_price() -> None:
    product = _product(
        "<h1>Reading lens</h1><button class='add-to-cart'>Add to cart</button>"
        "<span class='price-including-tax'>40.00€</span>"
    )
    assert product["price"] == Decimal("40.00")


def test_a_delivery_price_is_not_the_price() -> None:
    product = _product(
        "<h1>Watch</h1><button class='add-to-cart'>Add to cart</button>"
        "<table><tr class='product__livraison--item'>"
        "<td class='product__livraison--price'>2,99 €</td></tr></table>"
        "<p class='product-price'>259,00 €</p>"
    )
    assert product["price"] == Decimal("259.00")


def test_the_product_reference_element_gives_the_sku() -> None:
    product = _product(
        "<h1>Flat boots</h1><span class='main-price'>69.95 EUR</span>"
        "<button class='add-to-cart'>Add</button>"
        "<p class='product-color'>Black - <span data-qa-qualifier='product-reference'>"
        "1002/710</span></p>",
        url="https://shop.example/be/en/flat-boots-p11002710.html",
    )
    assert product["sku"] == "1002/710"


def test_a_postal_code_is_not_the_sku() -> None:
    product = _product(
        "<h1>Remote control</h1><span class='price'>12,00 €</span>"
        "<button class='add-to-cart'>Add</button>"
        "<p>Seller in <span class='postal-code'>6805</span> Feldkirch</p>"
        "<p>Item code: <span class='product-code'>RC-77</span></p>"
    )
    assert product["sku"] == "RC-77"


def test_the_products_own_block_with_outside_links_is_not_a_card() -> None:
    product = _product(
        "<div class='left-product'><h1>iMac Pro 27</h1><img src='/i.jpg'></div>"
        "<div class='right-product'><div class='notax'>"
        "<span class='price'>4386,00 €</span></div>"
        "<a href='https://maker.example/'>Maker</a>"
        "<a href='https://maker.example/imac-pro/specs/'>Product site</a></div>"
    )
    assert product["price"] == Decimal("4386.00")


def test_the_only_h1_inside_a_page_wide_header_is_the_name_and_its_code_the_sku() -> None:
    product = _product(
        "<header class='top'><nav><a href='/phones/'>Phones</a></nav>"
        "<h1><span>Samsung Galaxy A01 (red)</span> <span class='element-article'>"
        "Код: 01245</span></h1></header>"
        "<div class='product-main'><div class='price'>44 890 KZT</div>"
        "<button class='add-to-cart'>Add to cart</button></div>"
    )
    assert str(product["name"]).startswith("Samsung Galaxy A01 (red)")
    assert product["sku"] == "01245"


def test_a_structured_sku_of_several_words_is_a_model_name_not_a_code() -> None:
    ld = (
        '<script type="application/ld+json">{"@context": "https://schema.org",'
        ' "@type": "Product", "name": "Dell OptiPlex 9010", "sku": "OPTIPLEX 9010 TOWER",'
        ' "offers": {"@type": "Offer", "price": "899", "priceCurrency": "ILS"}}</script>'
    )
    product = _product(f"{ld}<h1>Dell OptiPlex 9010</h1>", url="https://shop.example/Prod/144432/")
    assert product["sku"] == "144432"


def test_a_structured_sku_of_two_words_is_kept() -> None:
    ld = (
        '<script type="application/ld+json">{"@context": "https://schema.org",'
        ' "@type": "Product", "name": "Lamp", "sku": "AB 1234",'
        ' "offers": {"@type": "Offer", "price": "19", "priceCurrency": "EUR"}}</script>'
    )
    assert _product(f"{ld}<h1>Lamp</h1>")["sku"] == "AB 1234"


def _ld(sku: str) -> str:
    return (
        '<script type="application/ld+json">{"@context": "https://schema.org",'
        f' "@type": "Product", "name": "Drum unit", "sku": "{sku}",'
        ' "offers": {"@type": "Offer", "price": "63.07", "priceCurrency": "RON"}}</script>'
    )


def test_the_printed_product_code_beats_a_structured_sku_the_page_never_shows() -> None:
    analysis = analyze(
        url=URL,
        body=(
            f"<html><body>{_ld('DMCSZ4BBM')}<h1>Drum unit</h1>"
            "<span class='product-code-display'>Cod produs: DR2401</span></body></html>"
        ).encode(),
    )
    assert analysis.product is not None and analysis.product["sku"] == "DR2401"
    assert analysis.sources["sku"] == "heuristics"
    assert "overruled json-ld sku 'DMCSZ4BBM'" in analysis.where["sku"]


def test_a_structured_sku_the_page_shows_is_kept_over_another_printed_code() -> None:
    product = _product(
        f"{_ld('DMCSZ4BBM')}<h1>Drum unit</h1><p>Catalogue key DMCSZ4BBM</p>"
        "<span class='product-code'>Product code: DR2401</span>"
    )
    assert product["sku"] == "DMCSZ4BBM"


def test_a_structured_sku_is_kept_when_no_element_prints_a_code() -> None:
    product = _product(f"{_ld('DMCSZ4BBM')}<h1>Drum unit</h1><p>Model: DR2401</p>")
    assert product["sku"] == "DMCSZ4BBM"


def test_a_code_in_a_script_is_not_shown_on_the_page() -> None:
    product = _product(
        f"{_ld('MKI6-1')}<script>var id = 'MKI6-1';</script><h1>Drum unit</h1>"
        "<div class='product-sku'>MKI6</div>"
    )
    assert product["sku"] == "MKI6"


def test_an_itemprop_sku_beside_the_structured_one_is_read() -> None:
    # "sku" is in the JSON-LD body too: the element's mark is one more in the source
    product = _product(f"{_ld('DMCSZ4BBM')}<h1>Drum unit</h1><span itemprop='sku'>DR2401</span>")
    assert product["sku"] == "DR2401"


def test_a_code_class_spelled_with_a_character_reference_is_read() -> None:
    product = _product(
        f"{_ld('DMCSZ4BBM')}<h1>Drum unit</h1><b class='product-&#115;ku'>DR2401</b>"
    )
    assert product["sku"] == "DR2401"


def test_a_code_printed_with_separators_is_kept_as_printed_over_its_content_attribute() -> None:
    product = _product(
        "<h1>Kettle</h1><span class='price'>£24.99</span>"
        "<button class='add-to-cart'>Add to trolley</button>"
        "<span itemprop='sku' content='4667999'>466/7999</span>"
    )
    assert product["sku"] == "466/7999"


def test_a_content_attribute_that_is_another_code_than_the_text_is_the_code() -> None:
    product = _product(
        "<h1>Kettle</h1><span class='price'>£24.99</span>"
        "<button class='add-to-cart'>Add to trolley</button>"
        "<span itemprop='sku' content='4667999'>Cat. no. shown below</span>"
    )
    assert product["sku"] == "4667999"


def test_a_name_that_starts_with_sku_is_no_sku_label() -> None:
    product = _product(
        "<h1>SKUGGIS hook</h1><span class='price'>€4.99</span>"
        "<button class='add-to-cart'>Add to cart</button><p>SKUGGIS hooks hold coats.</p>"
    )
    assert product["sku"] is None


def test_a_sku_printed_in_text_is_read() -> None:
    product = _product(
        "<h1>Coat hook</h1><span class='price'>€4.99</span>"
        "<button class='add-to-cart'>Add to cart</button><p>SKU: HK-2041</p>"
    )
    assert product["sku"] == "HK-2041"


def test_the_price_beside_the_heading_and_buy_button_beats_a_price_box_outside_them() -> None:
    product = _product(
        "<ul class='deal'><li><div class='title'>Jerky, any 10 packs</div>"
        "<p class='info'>Lean pork, oven roasted.</p>"
        "<p>Was <strike>1,390</strike></p>"
        "<div class='pdeal'>Lowest price $<span>99</span> a pack</div>"
        "<a id='buy_btn' href='javascript:;' onclick='buy()'>Buy</a></li></ul>"
        "<p>A long description of the product.</p>"
        "<div class='btn_price'>One set of ten: <span>990</span> (save $400)</div>"
    )
    assert product["price"] == Decimal("99")


def test_a_price_box_inside_the_products_own_block_stays_the_price() -> None:
    product = _product(
        "<div class='summary'><h1>Jerky</h1><p>Ships from $5 a parcel.</p>"
        "<span class='price'>$12.00</span>"
        "<button class='add-to-cart'>Add to cart</button></div>"
    )
    assert product["price"] == Decimal("12.00")


def test_a_price_box_outside_stays_the_price_when_the_own_block_prints_none() -> None:
    product = _product(
        "<div class='top'><h1>Jerky</h1><button class='add-to-cart'>Add to cart</button></div>"
        "<div class='offer'><span class='price'>$12.00</span></div>"
    )
    assert product["price"] == Decimal("12.00")


def test_an_amount_after_a_currency_sign_in_the_text_before_it_is_a_price() -> None:
    product = _product(
        "<h1>Jerky</h1><p>Lowest price $<b>99</b> a pack</p>"
        "<a class='buy-btn' href='javascript:buy()'>Buy</a>"
    )
    assert product["price"] == Decimal("99")


def test_an_itemprop_name_in_the_head_is_not_the_heading() -> None:
    analysis = analyze(
        url=URL,
        body=(
            b"<html><head><meta itemprop='name' content='Best goose floss in town, since 1950'>"
            b"</head><body><h1>Goose floss, 250 g</h1><span class='price'>$294</span>"
            b"<button class='add-to-cart'>Add to cart</button></body></html>"
        ),
    )
    assert analysis.product is not None
    assert analysis.product["name"] == "Goose floss, 250 g"


def test_a_bracketed_label_and_code_in_a_table_cell_give_the_sku() -> None:
    product = _product(
        "<table><tr><td><img src='/goose.jpg'></td></tr>"
        "<tr><td>\u3008\u5546\u54c1\u7de8\u865f\uff1aM67296549\u3009</td></tr></table>"
        "<h1>Goose floss</h1><span class='price'>$294</span>"
        "<button class='add-to-cart'>Add to cart</button>",
        url="https://shop.example/goods/M67296549.htm",
    )
    assert product["sku"] == "M67296549"
