"""What every reader of visible markup shares: the result being built, the page's chrome
(navigation, header, footer, related products) and other products' cards that no reader
looks in, its labelled values and its own buy button, each looked up once per page.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ._xpath import xpath as _xpath
from .labels import LabelValue, label_pairs
from .notation import AMBIGUOUS_PRICE, Notation

if TYPE_CHECKING:
    from lxml.html import HtmlElement

__all__ = [
    "NOT_LOOKED",
    "HeuristicProduct",
    "first_outside",
    "inside",
    "is_chrome",
    "page_button",
    "page_pairs",
    "text_holder",
    "text_of",
    "value_of",
]


# "product-header" or "add-to-basket" blocks hold the product itself: whole words only there
_CHROME = re.compile(
    r"\b(?:nav|menu|footer|related|recommend|upsell|cross-?sell|recently|carousel"
    r"|mini-?cart|mini-?basket|cart-total|newsletter|cookie|modal|logo)"
    r"|(?:^|\s)(?:header|site-header|masthead|top-?bar)(?:\s|$)"
)
_CHROME_TAGS = {"nav", "footer", "aside"}
_ADD_TO_CART = re.compile(
    r"add[\s_-]?to[\s_-]?(?:cart|basket|bag|trolley)|buy[\s_-]?now|in den warenkorb|warenkorb"
    r"|ajouter au panier|añadir al carrito|aggiungi al carrello|in winkelwagen|do koszyka"
    r"|в корзину|купить|加入購物車|加入购物车|放入購物車|立即購買|カートに入れる|장바구니"
    r"|adicionar ao carrinho|lägg i varukorgen|læg i kurv|legg i handlekurv|lisää ostoskoriin"
    r"|sepete ekle|dodaj do koszyka|v košík|do košíku|v košarico|u košaricu"
    r"|(?:^|[\s_-])buy(?:[\s_-]|$)|buy[\s_-]?(?:btn|button)|btn[\s_-]?buy|addtocart",
    re.IGNORECASE,
)
#: a cached lookup not made yet
NOT_LOOKED: Any = object()


@dataclass
class HeuristicProduct:
    """Fields read from visible markup, and how strongly the page looks like a product."""

    fields: dict[str, Any] = field(default_factory=dict)
    #: an add-to-cart control, a SKU label, itemprop markup or a product-detail container
    strong: bool = False
    #: per field, where it was read: "label dt/dd 'SKU'", "h1", "add-to-cart button", ...
    where: dict[str, str] = field(default_factory=dict)
    #: the page's labelled values, read once when a field needs them
    pairs: list[LabelValue] | None = None
    #: per field, the element it was read from, or the label/value pair (``profile draft``)
    found_in: dict[str, HtmlElement | LabelValue] = field(default_factory=dict)
    #: the page's source, when known: labels whose words it lacks are not looked for
    page_text: str = ""
    #: the page's main heading, once looked for
    heading: HtmlElement | None = None
    #: the page's own buy button (None: there is none), once looked for
    button: Any = NOT_LOOKED
    #: what no reader looks in: other products' cards and the sections titled as other
    #: products' or as reviews (:mod:`.region`), once looked for
    outside: set[HtmlElement] | None = None
    #: the page's notation of amounts (:mod:`.notation`)
    notation: Notation | None = None

    def priced(self) -> bool:
        """A price was found, read or left open by an ambiguous notation."""
        return "price" in self.fields or AMBIGUOUS_PRICE in self.fields


def text_of(el: HtmlElement) -> str:
    return " ".join((el.text_content() or "").split())


def value_of(el: HtmlElement) -> str:
    """An element's value the way microdata reads it: content/href/src attributes, else text."""
    for attr in ("content", "value", "datetime"):
        if el.get(attr):
            return str(el.get(attr)).strip()
    if el.tag in ("a", "link") and el.get("href"):
        return str(el.get("href")).strip()
    if el.tag == "img" and el.get("src"):
        return str(el.get("src")).strip()
    return text_of(el)


def is_chrome(el: HtmlElement, cards: set[HtmlElement]) -> bool:
    """Inside site chrome (nav, header, footer, related products) or another product's card
    (or a block of *cards*: a section of other products)."""
    if el in cards:
        return True
    for parent in el.iterancestors():
        if parent in cards or parent.tag in _CHROME_TAGS:
            return True
        if parent.tag == "header" and not any(
            a.tag in ("article", "main") for a in parent.iterancestors()
        ):
            return True  # the site's header; an article's own header holds its title
        if parent.tag == "body":
            return False
        if _CHROME.search(f"{parent.get('class') or ''} {parent.get('id') or ''}".lower()):
            return True
    return False


def first_outside(root: HtmlElement, xpath: str, cards: set[HtmlElement]) -> HtmlElement | None:
    for el in _xpath(xpath)(root):
        if not is_chrome(el, cards):
            return el
    return None


def page_pairs(
    root: HtmlElement, cards: set[HtmlElement], result: HeuristicProduct, *fields: str
) -> list[LabelValue]:
    """The page's labelled values outside chrome and other products' cards (read once).

    None when the page's source has no label word of any of *fields* at all: a label
    that is not in the page cannot be read from it, and the words cost a substring check.
    """
    if result.pairs is None:
        text = result.page_text
        if text and not any(word in text for name in fields for word in _LABEL_WORDS[name]):
            return []
        # a code printed in the page's title ("<h1>… Код: 01245</h1>") is the page's own,
        # even where a page-wide header block wraps that title
        result.pairs = [
            p
            for p in label_pairs(root)
            if not is_chrome(p.element, cards)
            or any(a.tag == "h1" for a in p.element.iterancestors())
        ]
    return result.pairs


#: words one of which every label of a field contains, in the casings shops print
_LABEL_WORDS: dict[str, tuple[str, ...]] = {
    "sku": ("SKU", "sku", "Sku", "tem", "TEM", "rt", "RT", "ef", "EF", "éf", "od", "OD",
            "ode", "MPN", "art", "Part", "ASIN", "tyle", "at", "Produ", "produ", "Bestell",
            "Šifra", "ртикул", "Код", "код", "商品", "型", "品番", "Numéro", "numéro", "N°"),
    "mpn": ("MPN", "odel", "ODEL", "odèle", "art", "ersteller"),
    "ref": ("ef", "EF", "éf", "od", "OD", "tyle", "Šifra", "ртикул", "Код", "код"),
    "gtin": ("GTIN", "gtin", "EAN", "ean", "Ean", "UPC", "upc", "ISBN", "isbn", "arcode",
             "JAN"),
    "brand": ("rand", "RAND", "arke", "ARKE", "arque", "ARQUE", "arca", "erk", "anufactur",
              "ANUFACTUR", "ersteller", "abricant", "ренд", "роизводитель", "品牌"),
    "availability": ("vailab", "VAILAB", "tock", "TOCK", "tatus", "TATUS", "erfügbar",
                     "erfugbar", "ager", "iefer", "isponib", "eschikbaar", "аличие", "庫存",
                     "库存"),
    "price": ("rice", "RICE", "Now", "now", "NOW", "reis", "rix", "recio", "rezzo", "rijs",
              "ena", "Цена", "цена", "價", "价"),
}  # fmt: skip


def inside(el: HtmlElement | None, block: HtmlElement) -> bool:
    """*el* is *block* or one of its descendants."""
    return el is not None and (el is block or any(p is block for p in el.iterancestors()))


def text_holder(text: Any) -> HtmlElement | None:
    """The element a text node (an lxml smart string) is part of."""
    parent = text.getparent()
    return parent.getparent() if parent is not None and text.is_tail else parent


def page_button(
    root: HtmlElement, cards: set[HtmlElement], result: HeuristicProduct
) -> HtmlElement | None:
    """:func:`_buy_button`, looked for once per page."""
    if result.button is NOT_LOOKED:
        result.button = _buy_button(root, cards)
    button: HtmlElement | None = result.button
    return button


def _buy_button(root: HtmlElement, cards: set[HtmlElement]) -> HtmlElement | None:
    """The page's own add-to-cart control (not one of another product's card)."""
    for el in _xpath(
        "//button | //input[@type='submit' or @type='button'] | //form[@action]"
        " | //a[contains(@class,'cart') or contains(@class,'buy') or contains(@id,'cart')"
        " or contains(@id,'buy')]"
    )(root):
        label = " ".join(
            str(v)
            for v in (
                el.get("class"),
                el.get("id"),
                el.get("name"),
                el.get("value"),
                el.get("action"),
                text_of(el),
            )
            if v
        )
        if _ADD_TO_CART.search(label) and not is_chrome(el, cards):
            return el
    return None
