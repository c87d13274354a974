"""Product codes of visible markup: the code an element marked as one prints, labelled
codes (SKU, item number, model, EAN ...), "SKU: ..." in the text, and the number ending a
product URL as the last resort.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from ._xpath import xpath as _xpath
from .codes import code_flaw, valid_gtin
from .labels import LabelValue, label_pairs
from .markup import HeuristicProduct, is_chrome, page_pairs, text_of, value_of

if TYPE_CHECKING:
    from lxml.html import HtmlElement

__all__ = ["labelled_code", "printed_code", "read_identifiers", "sku_from_url"]


_SKU_LABEL = re.compile(
    r"^\s*(?:sku|art(?:ikel)?[\s.-]*nr|item\s*(?:#|no\.?|number)|product\s*(?:code|no\.?)"
    r"|code|ref(?:erence)?|model|mpn)\s*[:#.]?\s*",
    re.IGNORECASE,
)
#: what is not a letter or digit (a code's separators)
_ALNUM = re.compile(r"[\W_]+")
#: "-code" classes that are not the product's: postal, zip, promo, coupon, voucher, country
_NOT_A_PRODUCT_CODE = re.compile(
    r"postal|post-code|postcode|zip|promo|coupon|voucher|discount|gift|country|area-code|phone"
    r"|currency|lang|qr-?code|captcha|security|verification|color-code|colour-code"
)
#: what every attribute marking a product code contains ("-code" covers "product-code")
_CODE_MARKS = ("sku", "-code", "item-number", "product-ref")
#: a long number ending the last path segment (``/itm/302474151804``, ``…-p400105394.html``)
_URL_ID = re.compile(r"(?<!\d)(\d{5,14})(?:\.html?|\.aspx|\.php)?/?$")
#: the label ends where a word would go on: "SKUGGIS" is a name, not "SKU: GGIS"
_SKU_IN_TEXT = re.compile(
    r"\b(?:SKU|Art\.?-?Nr\.?|Item\s?#)(?![A-Za-z])\s*[:#]?\s*([A-Za-z0-9][\w\-./]{2,40})"
)
_GTIN_IN_TEXT = re.compile(r"\b(?:GTIN|EAN|UPC|ISBN)(?:-?1[03])?\s*[:#]?\s*(\d[\d\- ]{6,16}\d)")
# the labels those two start with: a substring check is far cheaper than a regex that tries
# its leading \b at every position of the page's text
_SKU_WORDS = ("SKU", "Art", "Item")
_GTIN_WORDS = ("GTIN", "EAN", "UPC", "ISBN")


def printed_code(
    root: HtmlElement,
    cards: set[HtmlElement] | Callable[[], set[HtmlElement]],
    page_text: str = "",
    quoted: Collection[str] = (),
) -> tuple[str, HtmlElement] | None:
    """The product code an element marked as one shows (``itemprop=sku``, a class with
    ``sku``/``product-code``/``item-number``/``product-ref``) outside chrome and other
    products' cards, as printed without its label ("Product code: 141677" -> ``141677``).

    With *page_text* (the source) and *quoted* (script bodies of it, which hold no
    attributes), the page's attributes are walked only when the source has a code mark
    elsewhere; *cards* may be a function that gives them, called only then."""
    if page_text and not _may_mark_code(page_text, quoted):
        return None
    # any attribute may say "product-reference" (data-qa-qualifier=…): walking every
    # attribute of the page costs, so only where the source has the words at all
    marked = " | //@*[.='product-reference' or .='product-ref']"
    if page_text and "product-ref" not in page_text:
        marked = ""
    if callable(cards):
        cards = cards()
    el = next(
        (
            el
            for el in _xpath(
                "(//@itemprop[.='sku'] | //@class[contains(.,'sku') or contains(.,'product-code')"
                " or contains(.,'-code') or contains(.,'item-number') or contains(.,'product-ref')]"
                f"{marked})/parent::*"
            )(root)
            # a postal or discount code is not the product's
            if not _NOT_A_PRODUCT_CODE.search((el.get("class") or "").lower())
            and not is_chrome(el, cards)
        ),
        None,
    )
    if el is None:
        return None
    value = value_of(el)
    shown = text_of(el)
    if shown != value and _ALNUM.sub("", shown) == _ALNUM.sub("", value):
        # content="4667999" on a code printed "466/7999": the code as printed, not reshaped
        value = shown
    if not (code := _code(_unlabelled(value))):
        return None
    return code, el


def labelled_code(
    root: HtmlElement,
    cards: Callable[[], set[HtmlElement]],
    result: HeuristicProduct,
    within: HtmlElement | None = None,
) -> tuple[str, LabelValue] | None:
    """The first code the page prints beside an SKU label (SKU, item number, article number,
    product code, ...), else a model or part number (with a digit) beside its label, as
    printed; data attributes are no labels. With *within*, only labels inside that block are
    read, unless the page's labels were read already; *cards* gives what lies outside the
    product, asked only when a label is found."""
    if within is not None and result.pairs is None:
        pairs = [p for p in label_pairs(within) if p.field in ("sku", "mpn")]
        if pairs:
            outside = cards()
            pairs = [p for p in pairs if not is_chrome(p.element, outside)]
    else:
        pairs = page_pairs(root, cards(), result, "sku", "mpn")
    by_field: dict[str, list[LabelValue]] = {}
    for pair in pairs:
        if pair.field in ("sku", "mpn") and not pair.shape.startswith("@"):
            by_field.setdefault(pair.field, []).append(pair)
    for name in ("sku", "mpn"):
        for pair in by_field.get(name, ()):
            code = _code(pair.value)
            # a model's name ("Model: Primrose") is no model number
            if code and (name == "sku" or any(c.isdigit() for c in code)):
                return code, pair
    return None


def _may_mark_code(page_text: str, quoted: Collection[str]) -> bool:
    """Whether an attribute of the page can hold a code mark: one of the words is in the
    source outside *quoted*, or a character reference ("&#115;") could spell one."""
    if "&#" in page_text:
        return True
    return any(
        page_text.count(word) > sum(body.count(word) for body in quoted) for word in _CODE_MARKS
    )


def _unlabelled(value: str) -> str:
    """*value* without the label before it: a known code label, else any few words without
    digits before a colon ("Cod produs: DR2401", "Número de artículo: 1234")."""
    value = _SKU_LABEL.sub("", value)
    head, colon, tail = value.partition(":")
    if colon and tail.strip() and len(head.split()) <= 3 and not any(c.isdigit() for c in head):
        return tail
    return value


def read_identifiers(
    root: HtmlElement, cards: set[HtmlElement], result: HeuristicProduct, *, labels: bool = True
) -> None:
    fields = result.fields
    if (shown := printed_code(root, cards, result.page_text)) is not None:
        sku, el = shown
        fields["sku"] = sku
        where = "itemprop=sku" if el.get("itemprop") == "sku" else f"class={el.get('class')!r}"
        result.where["sku"] = f"<{el.tag} {where}>"
        result.found_in["sku"] = el
        result.strong = True
    for gtin_el in _xpath("//@itemprop[starts-with(.,'gtin') or .='isbn']/parent::*")(root):
        if is_chrome(gtin_el, cards):
            continue
        if gtin := valid_gtin(value_of(gtin_el)):
            fields["gtin"] = gtin
            result.where["gtin"] = f"itemprop={gtin_el.get('itemprop')}"
            result.found_in["gtin"] = gtin_el
            break
    if labels and ("sku" not in fields or "gtin" not in fields):
        _label_identifiers(root, cards, result)
    if "sku" in fields and "gtin" in fields:
        return
    body_text = " ".join(
        _xpath(
            "//body/descendant::text()[not(ancestor::script or ancestor::style)]",
            smart_strings=False,
        )(root)
    )
    if (
        "sku" not in fields
        and (match := _search(_SKU_IN_TEXT, _SKU_WORDS, body_text))
        and code_flaw(match.group(1).rstrip(".")) is None
    ):
        fields["sku"] = match.group(1).rstrip(".")
        result.where["sku"] = f"text {match.group(0)[:60]!r}"
        result.strong = True
    if "gtin" not in fields and (match := _search(_GTIN_IN_TEXT, _GTIN_WORDS, body_text)):
        printed = match.group(1).strip()
        if gtin := valid_gtin(printed) or valid_gtin(printed.split()[0]):
            fields["gtin"] = gtin
            result.where["gtin"] = f"text {match.group(0)[:60]!r}"


def sku_from_url(url: str) -> str | None:
    """The long number ending a product URL's path (``/itm/302474151804``), the last resort."""
    match = _URL_ID.search(urlsplit(url).path)
    return match.group(1) if match else None


def _code(value: str) -> str | None:
    """A product code as printed: its first word, without trailing punctuation; None when
    the value is no code (a price, a date, a phone number, a sentence: :func:`.code_flaw`)."""
    words = value.split()
    code = words[0].strip(".,;:()[]") if words else ""
    if not code or len(code) > 64 or (not re.search(r"\d", code) and len(words) > 1):
        return None
    if code_flaw(value if len(words) <= 3 else code) is not None:
        return None
    return code


def _label_identifiers(
    root: HtmlElement, cards: set[HtmlElement], result: HeuristicProduct
) -> None:
    fields = result.fields
    by_field: dict[str, list[LabelValue]] = {}
    missing = [name for name in ("sku", "gtin") if name not in fields]
    extra = ["ref", "mpn", "gtin"] if "sku" in missing else []
    for pair in page_pairs(root, cards, result, *missing, *extra):
        by_field.setdefault(pair.field, []).append(pair)
    for name in ("sku", "ref", "mpn"):
        if "sku" in fields:
            break
        written = [p for p in by_field.get(name, ()) if not p.shape.startswith("@")]
        attrs = [p for p in by_field.get(name, ()) if p.shape.startswith("@")]
        if not written and len({p.value for p in attrs}) != 1:
            continue  # codes of several variants in data attributes: none is the page's
        # the first labelled value that is a code ("Item: US$11.99" is a price)
        for pair in written or attrs[:1]:
            if code := _code(pair.value):
                fields["sku"] = code
                result.where["sku"] = f"label {pair.shape} {pair.label!r}: {pair.value[:60]!r}"
                result.found_in["sku"] = pair
                result.strong = True
                break
    # a code labelled "UPC" or "EAN" that is no valid GTIN is still the shop's code for the
    # product: the SKU as printed when no SKU label said otherwise, never its digits alone
    not_gtins: list[LabelValue] = []
    for pair in by_field.get("gtin", ()):
        gtin = valid_gtin(pair.value) or valid_gtin(pair.value.split(" ")[0])
        if gtin is None:
            not_gtins.append(pair)
        elif "gtin" not in fields:
            fields["gtin"] = gtin
            result.where["gtin"] = f"label {pair.shape} {pair.label!r}: {pair.value[:60]!r}"
            result.found_in["gtin"] = pair
    written = [p for p in not_gtins if not p.shape.startswith("@")]
    if "sku" not in fields and written and (code := _code(written[0].value)):
        pair = written[0]
        fields["sku"] = code
        result.where["sku"] = (
            f"label {pair.shape} {pair.label!r}: {pair.value[:60]!r} (not a valid GTIN:"
            " the shop's own code, as printed)"
        )
        result.found_in["sku"] = pair
        result.strong = True


def _search(pattern: re.Pattern[str], labels: tuple[str, ...], text: str) -> re.Match[str] | None:
    """``pattern.search(text)``, skipped when none of the labels it starts with is there."""
    return pattern.search(text) if any(label in text for label in labels) else None
