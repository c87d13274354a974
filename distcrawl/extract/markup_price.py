"""The price of visible markup: price elements, "Price:" labels, the first amount printed
after the main heading, and the one printed in the product's own block over one outside it.
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from ._xpath import xpath as _xpath
from .labels import LabelValue
from .markup import (
    HeuristicProduct,
    first_outside,
    inside,
    is_chrome,
    page_button,
    page_pairs,
    text_holder,
    text_of,
    value_of,
)
from .notation import AMBIGUOUS, AMBIGUOUS_PRICE
from .prices import normalize_currency, parse_price, parse_structured_price
from .roles import (
    CURRENT,
    WAS,
    around,
    element_role,
    priced_text,
    text_node_role,
    text_role,
)

if TYPE_CHECKING:
    from lxml.html import HtmlElement

__all__ = ["prefer_own_block_price", "read_label_price", "read_price", "read_price_near"]


#: a price with its currency beside it: "$12.99", "12,99 €", "12.99 USD", "EUR 12"
_PRICE_NEAR = re.compile(
    r"[$€£¥₹₽]\s*\d|\d\s*(?:[$€£¥₹₽]|(?:EUR|USD|GBP|CHF|JPY|CAD|AUD|SEK|NOK|DKK|PLN|CZK"
    r"|RUB|INR|CNY|TWD|NT\$|zł|kr|Kč|lei|\u0440\u0443\u0431|\u5143)\b)|\b(?:EUR|USD|GBP|CHF|CAD|AUD)\s*\d"
)
#: a currency sign ending a text, its amount in the next element: "Lowest price $<b>99</b>"
_SIGN_AT_END = re.compile(r"([$€£¥₹₽₩₺₪₫])\s*$")
_BARE_AMOUNT = re.compile(r"\d{1,3}(?:[.,\s]?\d{3})*(?:[.,]\d{1,2})?")
_NOT_A_PRICE = re.compile(
    r"save|saving|discount|per-?unit|unit-?price|shipping|range|filter|delivery|livraison"
    r"|versand|envio|envío|spedizione|verzending|dostawa|doprava|dostava"
)
#: a class word of a tax figure or a price without tax ("price-tax", "excl-tax", "netto")
_TAX_WORD = re.compile(r"tax|netto|ex[-_]?vat")
#: ... unless it is the price with tax ("price-including-tax", "incl-tax", "inkl-mwst")
_WITH_TAX = re.compile(r"incl|inkl|with[-_]?tax")


def read_label_price(root: HtmlElement, cards: set[HtmlElement], result: HeuristicProduct) -> None:
    """A price from a "Price: $12.99" / "Our price" label when no price element said it."""
    for pair in page_pairs(root, cards, result, "price"):
        if pair.field != "price" or not re.search(r"\d", pair.value):
            continue
        value = pair.value[:80]
        if text_role(*around(value, 0, value)) != CURRENT:
            continue  # "Price: 4 x $25", "Price: $19/mo"
        amount, currency, why = read_amount(result, priced_text(value))
        where = f"label {pair.shape} {pair.label!r}: {pair.value[:60]!r}"
        if why == AMBIGUOUS:
            _ambiguous(result, value, currency, where, pair)
            return
        if amount is not None and amount > 0:
            result.fields["price"] = amount
            if currency:
                result.fields["currency"] = currency
            result.where["price"] = where + _notation(why)
            result.found_in["price"] = pair
            return


def read_price(
    root: HtmlElement,
    cards: set[HtmlElement],
    result: HeuristicProduct,
    *,
    within: HtmlElement | None = None,
) -> None:
    """The first price element whose role is the current price (``itemprop=price`` first,
    then ``data-price``-like attributes and ``price``/``cost`` classes); with *within*, only
    one inside that element."""
    fields = result.fields
    currency_el = first_outside(root, "//@itemprop[.='priceCurrency']/parent::*", cards)
    hint = value_of(currency_el) if currency_el is not None else None
    # itemprop=price says what it is: it goes before anything merely classed "price"
    candidates = _xpath("//@itemprop[.='price']/parent::*")(root) + _xpath(
        "(//@data-price | //@data-amount | //@data-price-amount"
        " | //@data-product-price | //@class[contains(.,'price') or contains(.,'cost')])/parent::*"
    )(root)
    old: HtmlElement | None = None
    skipped = ""
    if within is not None:
        candidates = [el for el in candidates if inside(el, within)]
    for el in candidates:
        if is_chrome(el, cards) or el.tag in ("script", "style", "link", "input"):
            continue
        if el.tag == "meta" and not (el.get("itemprop") == "price" and el.get("content")):
            continue
        classes = f"{el.get('class') or ''} {el.get('id') or ''}".lower()
        if el.tag in ("del", "s", "strike"):
            old = old if old is not None else el  # a price struck through: the was price
            continue
        if _NOT_A_PRICE.search(classes):
            continue
        if _is_tax_class(classes):
            continue
        if _xpath(".//*[contains(@class,'price') or @itemprop='price' or @data-price]")(el):
            continue  # a price box: its own price elements come next in document order
        amount, currency, why = _element_price(el, hint, result)
        if amount is None and why != AMBIGUOUS:
            continue
        role, said = element_role(el)
        if role == WAS:
            old = old if old is not None else el
            continue
        if role != CURRENT:
            skipped = skipped or f" (after {role} price <{el.tag}>: {said})"
            continue
        where = f"<{el.tag} class={el.get('class')!r}>{skipped}"
        if why == AMBIGUOUS:
            _ambiguous(result, text_of(el), currency, where, el)
            break
        fields["price"] = amount
        result.where["price"] = where + _notation(why)
        result.found_in["price"] = el
        if currency:
            fields["currency"] = currency
            result.where["currency"] = "beside the price"
        # a was price struck through inside the price element or beside it in its box
        struck = _xpath(
            ".//del | .//s | .//strike"
            " | preceding-sibling::*[self::del or self::s or self::strike][1]"
            " | following-sibling::*[self::del or self::s or self::strike][1]"
        )(el)
        if old is None and struck:
            old = struck[0]
        if el.get("itemprop") == "price":
            result.strong = True
        break
    if old is not None and "price" in fields:
        amount, _, _ = _element_price(old, hint, result)
        if amount is None and old.tag in ("del", "s", "strike"):
            amount = read_amount(result, priced_text(text_of(old)[:80]), hint)[0]
        if amount is not None and amount > fields["price"]:
            fields["list_price"] = amount
    if "currency" not in fields and hint:
        currency = normalize_currency(hint)
        if currency:
            fields["currency"] = currency


#: text in these is never the current price (struck-through "was" prices, code)
_NO_PRICE_TAGS = frozenset({"script", "style", "del", "s", "strike", "noscript", "option"})


def read_price_near(
    heading: HtmlElement,
    cards: set[HtmlElement],
    result: HeuristicProduct,
    *,
    within: HtmlElement | None = None,
) -> None:
    """The first price printed after the main heading: "$12.99", "Now €12,99", "12,99 EUR".

    Struck-through text is the list price ("Was $15.99"); an amount in one element and its
    currency code in the next ("<span>12,99</span> <span>EUR</span>"), or after a currency
    sign ending the text before it ("$<span>99</span>"), read as one price. With *within*,
    only text inside that element counts.
    """
    # a position-only predicate lets libxml2 stop early; the rest is filtered here
    found = [
        t
        for t in _xpath("(following::text())[position() <= 60]")(heading)
        if t.strip() and t.getparent() is not None and t.getparent().tag not in _NO_PRICE_TAGS
    ][:30]
    if within is not None:
        found = [t for t in found if inside(text_holder(t), within)]
    texts = [str(t).strip() for t in found]
    was: tuple[Any, str | None, str, HtmlElement] | None = None
    for i, text in enumerate(texts):
        if len(text) > 60 or not re.search(r"\d", text):
            continue
        candidate = text
        bare = _BARE_AMOUNT.fullmatch(text) is not None
        sign = _SIGN_AT_END.search(texts[i - 1]) if bare and i > 0 else None
        joined = bare and sign is None and i + 1 < len(texts)
        if sign is not None:
            candidate = f"{sign.group(1)}{text}"
        elif joined:
            candidate = f"{text} {texts[i + 1]}"
        if not _PRICE_NEAR.search(candidate) or _NOT_A_PRICE.search(candidate.lower()):
            continue
        parent = text_holder(found[i])
        if parent is None:
            continue
        if is_chrome(parent, cards) or _in_linked_row(parent):
            continue
        if _is_tax_class(f"{parent.get('class') or ''} {parent.get('id') or ''}".lower()):
            continue  # the price before tax, as in a price element's class
        role = text_node_role(found[i])[0]
        if role not in (CURRENT, WAS):
            continue  # "4 x $25", "$19/mo", "<span class=instalment>", "Excl. VAT: $10"
        amount, currency, why = read_amount(result, priced_text(candidate[:80]))
        if why == AMBIGUOUS and role == CURRENT:
            _ambiguous(result, candidate, currency, "text after the heading", parent)
            return
        if amount is None or amount <= 0:
            continue
        if role == WAS:
            # a was price is one beside a current price; printed alone, it is the price
            was = was or (amount, currency, candidate, parent)
            continue
        result.fields["price"] = amount
        if currency:
            result.fields["currency"] = currency
        result.where["price"] = f"text after the heading: {candidate[:60]!r}{_notation(why)}"
        if joined and currency and (holder := text_holder(found[i + 1])) is not None:
            result.found_in["currency"] = holder
        result.found_in["price"] = parent
        # a was price struck through inside the same line ("Now $12 <s>Was $15</s>") or
        # just after it
        struck = _xpath(
            "(descendant::*[self::del or self::s or self::strike]"
            " | following::*[self::del or self::s or self::strike])[position() <= 3]"
        )(parent)
        if struck:
            old, _, _ = read_amount(result, priced_text(text_of(struck[0])[:80]))
            if old is not None and old > amount:
                result.fields["list_price"] = old
        if was is not None and was[0] > amount:
            result.fields["list_price"] = was[0]
        return
    if was is not None:
        amount, currency, candidate, parent = was
        result.fields["price"] = amount
        if currency:
            result.fields["currency"] = currency
        result.where["price"] = (
            f"text after the heading: {candidate[:60]!r} (marked as a was price, but no other"
            " price beside it)"
        )
        result.found_in["price"] = parent


def prefer_own_block_price(
    root: HtmlElement, cards: set[HtmlElement], heading: HtmlElement, result: HeuristicProduct
) -> None:
    """The price printed in the product's own block, over a price element outside it.

    A product page prints its heading, its price and its buy button together; a block that
    holds the heading and the page's own buy button is the product's. A price-classed element
    outside that block (a "buy the bundle" box at the foot, a widget of other products)
    gives way to a price element inside it, else to a price printed after the heading inside
    it ("Lowest price $<b>99</b>").
    """
    price_el = result.found_in.get("price")
    if price_el is None or isinstance(price_el, LabelValue):
        return
    button = page_button(root, cards, result)
    if button is None:
        return
    above = set(heading.iterancestors())
    block = next((p for p in button.iterancestors() if p in above), None)
    if block is None or block.tag in ("body", "html") or is_chrome(block, cards):
        return
    if inside(price_el, block):
        return
    own = HeuristicProduct(notation=result.notation)
    read_price(root, cards, own, within=block)
    if not own.priced():
        read_price_near(heading, cards, own, within=block)
    if not own.priced():
        return
    for name in ("price", "currency", "list_price", AMBIGUOUS_PRICE):
        result.fields.pop(name, None)
        result.found_in.pop(name, None)
    result.fields.update(own.fields)
    result.found_in.update(own.found_in)
    result.where["price"] = f"{own.where['price']} (in the block of the heading and buy button)"
    if "currency" in own.fields:
        result.where["currency"] = "beside the price"
    else:
        result.where.pop("currency", None)


def _is_tax_class(classes: str) -> bool:
    """A class/id word naming a tax amount or the price before tax (OpenCart's "price-tax")."""
    return any(
        _TAX_WORD.search(word) and not _WITH_TAX.search(word)
        for word in classes.split()
        if "tax" in word or "net" in word or "vat" in word
    )


#: a link to another page: a script (``javascript:buy()``) or an anchor on this page is not
_LINK_ELSEWHERE = (
    ".//a[@href][not(starts-with(normalize-space(@href),'javascript:'))"
    " and not(starts-with(normalize-space(@href),'#'))]"
)


def _in_linked_row(el: HtmlElement) -> bool:
    """In a list item or table row that links elsewhere: a listing's entry, not this page's."""
    if el.tag in ("li", "tr"):
        return bool(_xpath(_LINK_ELSEWHERE)(el))
    for depth, parent in enumerate(el.iterancestors(), start=1):
        if depth > 3:
            return False
        if parent.tag in ("li", "tr"):
            return bool(_xpath(_LINK_ELSEWHERE)(parent))
    return False


def _element_price(
    el: HtmlElement, hint: str | None, result: HeuristicProduct
) -> tuple[Any, str | None, str]:
    """Amount, currency and how the notation was decided (:func:`read_amount`) of one price
    element, preferring machine-readable attributes."""
    hint = el.get("data-currency") or el.get("data-cur") or el.get("data-price-currency") or hint
    for attr in ("content", "data-price", "data-amount", "data-price-amount", "data-product-price"):
        raw = el.get(attr)
        if raw and (amount := parse_structured_price(raw)) is not None:
            _, currency = parse_price(text_of(el), hint)
            return amount, currency or normalize_currency(hint), ""
    # the current price only: a struck-through "was" price inside the element is not it
    parts = _xpath(".//text()[not(ancestor::del or ancestor::s or ancestor::strike)]")(el)
    text = " ".join(" ".join(str(p) for p in parts).split())
    if not text or len(text) > 80 or not re.search(r"\d", text):
        return None, None, ""
    return read_amount(result, priced_text(text), hint)


def read_amount(
    result: HeuristicProduct, text: str, hint: str | None = None
) -> tuple[Decimal | None, str | None, str]:
    """Amount, currency and why of a printed price in the page's notation (:mod:`.notation`;
    why is :data:`AMBIGUOUS` when the page leaves it open)."""
    if result.notation is None:
        amount, currency = parse_price(text, hint)
        return amount, currency, ""
    return result.notation.read(text, hint)


def _ambiguous(
    result: HeuristicProduct,
    printed: str,
    currency: str | None,
    where: str,
    found: HtmlElement | LabelValue,
) -> None:
    """The price as printed, flagged: nothing on the page decides its notation."""
    result.fields[AMBIGUOUS_PRICE] = " ".join(printed.split())[:60]
    if currency:
        result.fields["currency"] = currency
    result.where["price"] = f"{where}: {printed[:40]!r} (its notation is ambiguous on this page)"
    result.found_in["price"] = found


def _notation(why: str) -> str:
    return f" ({why})" if why else ""
