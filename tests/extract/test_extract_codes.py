"""Product codes: a GTIN only when digits and check digit are valid; any other labelled code
is the shop's own, stored as printed."""

from __future__ import annotations

import json

import pytest

from distcrawl.extract import analyze
from distcrawl.extract.codes import gtin_kind, valid_gtin

URL = "https://shop.example/p/item"


@pytest.mark.parametrize(
    ("printed", "kind", "stored"),
    [
        ("96385074", "GTIN-8", "96385074"),
        ("036000291452", "GTIN-12", "036000291452"),  # a UPC-A
        ("4006381333931", "GTIN-13", "4006381333931"),  # an EAN-13
        ("10036000291459", "GTIN-14", "10036000291459"),
        ("9783161484100", "ISBN-13", "9783161484100"),
        ("978-3-16-148410-0", "ISBN-13", "9783161484100"),
        ("0306406152", "ISBN-10", "0306406152"),
        ("0-306-40615-2", "ISBN-10", "0306406152"),
        ("080442957X", "ISBN-10", "080442957X"),
        ("4 006381 333931", "GTIN-13", "4006381333931"),
        (" 4006381333931 ", "GTIN-13", "4006381333931"),
    ],
)
def test_every_kind_of_valid_code_is_a_gtin(printed: str, kind: str, stored: str) -> None:
    assert gtin_kind(printed) == kind
    assert valid_gtin(printed) == stored


@pytest.mark.parametrize(
    "printed",
    [
        "96385075",  # GTIN-8, check digit off by one
        "036000291453",  # UPC-A
        "4006381333932",  # EAN-13
        "10036000291458",  # GTIN-14
        "9783161484101",  # ISBN-13
        "0306406153",  # ISBN-10
        "0804429570",  # ISBN-10 whose check is X
        "1234567",  # too short for any kind
        "400638133393",  # 12 digits, not a UPC-A
        "123456789012345",  # 15 digits
        "0000000000000",  # a placeholder, check digit or not
        "bfd5e1701c862ac3",  # hex: its digits are no code
        "517018623",  # those digits strung together
        "EAN 4006381333931",  # the label is not part of the code
        "4006381333931 / 4006381333948",
        "40063--81333931",
        "",
    ],
)
def test_an_invalid_code_is_no_gtin(printed: str) -> None:
    assert gtin_kind(printed) is None
    assert valid_gtin(printed) is None


def test_non_text_values() -> None:
    assert valid_gtin(4006381333931) == "4006381333931"
    assert valid_gtin(None) is None
    assert valid_gtin(True) is None


def _product(body: str, head: str = "") -> dict[str, object]:
    page = f"<html><head>{head}</head><body>{body}</body></html>"
    analysis = analyze(url=URL, body=page.encode())
    assert analysis.kind == "product"
    return {**(analysis.product or {}), "explain": analysis.explain()}


_BOOTSTRAP_PAGE = (
    "<div class='row'><div class='col-md-6'><h1 class='h3'>Sharp Objects</h1>"
    "<p class='mb-0'>Price: £47.82</p><p class='mb-0'>In stock</p></div></div>"
    "<h2>Product Information</h2><dl class='row'>"
    "<dt class='col-sm-3'>UPC</dt><dd class='col-sm-9'>bfd5e1701c862ac3</dd>"
    "<dt class='col-sm-3'>Product Type</dt><dd class='col-sm-9'>Books</dd></dl>"
)


def test_a_hex_upc_is_the_sku_unchanged_and_no_gtin() -> None:
    product = _product(_BOOTSTRAP_PAGE)
    assert product["sku"] == "bfd5e1701c862ac3"
    assert product["gtin"] is None
    explain = product["explain"]
    assert isinstance(explain, dict)
    assert explain["sku"]["source"] == "label"
    assert "'UPC'" in explain["sku"]["detail"]
    assert "not a valid GTIN" in explain["sku"]["detail"]


def test_a_valid_upc_label_is_the_gtin() -> None:
    product = _product(_BOOTSTRAP_PAGE.replace("bfd5e1701c862ac3", "036000291452"))
    assert product["gtin"] == "036000291452"
    assert product["sku"] != "036000291452"


def test_an_sku_label_wins_over_a_code_labelled_upc_that_is_no_gtin() -> None:
    body = _BOOTSTRAP_PAGE.replace(
        "<dt class='col-sm-3'>Product Type",
        "<dt class='col-sm-3'>SKU</dt><dd class='col-sm-9'>SO-1</dd>"
        "<dt class='col-sm-3'>Product Type",
    )
    product = _product(body)
    assert (product["sku"], product["gtin"]) == ("SO-1", None)


@pytest.mark.parametrize("label", ["EAN", "GTIN", "ISBN", "Barcode"])
def test_a_wrong_check_digit_under_any_gtin_label_is_kept_as_printed_in_sku(label: str) -> None:
    product = _product(
        f"<h1>Lamp</h1><p class='price'>$12.00</p><table><tr><th>{label}</th>"
        "<td>4006381333932</td></tr></table>"
    )
    assert (product["sku"], product["gtin"]) == ("4006381333932", None)


def test_an_invalid_gtin_in_json_ld_is_dropped_and_the_valid_one_kept() -> None:
    data = {
        "@context": "https://schema.org",
        "@type": "Product",
        "name": "Lamp",
        "sku": "L-1",
        "gtin13": "0000000000000",
        "gtin12": "036000291452",
        "offers": {"@type": "Offer", "price": "12.00", "priceCurrency": "USD"},
    }
    product = _product(
        "<h1>Lamp</h1>", f"<script type='application/ld+json'>{json.dumps(data)}</script>"
    )
    assert (product["sku"], product["gtin"]) == ("L-1", "036000291452")


def test_an_invalid_gtin_in_microdata_or_text_is_not_stored() -> None:
    product = _product(
        "<h1>Lamp</h1><p class='price'>$12.00</p><span class='sku'>L-1</span>"
        "<span itemprop='gtin13'>4006381333932</span><p>EAN: 4006381333932</p>"
    )
    assert (product["sku"], product["gtin"]) == ("L-1", None)


def test_a_valid_gtin_in_text_is_stored_without_its_separators() -> None:
    product = _product(
        "<h1>Atlas</h1><p class='price'>$12.00</p><span class='sku'>A-1</span>"
        "<p>ISBN 978-3-16-148410-0</p>"
    )
    assert product["gtin"] == "9783161484100"


def _script_product(variants: list[dict[str, object]]) -> dict[str, object]:
    data = {"id": 17, "title": "Lamp", "price": 1200, "variants": variants}
    return _product("<h1>Lamp</h1>", f"<script>window.product = {json.dumps(data)};</script>")


def test_a_product_in_one_variant_has_its_codes_there() -> None:
    product = _script_product([{"id": 1, "sku": "L-17", "barcode": "4006381333931"}])
    assert (product["sku"], product["gtin"]) == ("L-17", "4006381333931")


def test_of_several_variants_none_gives_the_products_codes() -> None:
    product = _script_product([{"id": 1, "sku": "L-17-S"}, {"id": 2, "sku": "L-17-M"}])
    assert product["sku"] != "L-17-S"


def test_a_one_variant_barcode_that_is_no_gtin_is_not_stored() -> None:
    product = _script_product([{"id": 1, "sku": "L-17", "barcode": "4006381333932"}])
    assert (product["sku"], product["gtin"]) == ("L-17", None)
