"""Product fields from visible markup, for pages without (complete) structured data.

Reads ``itemprop`` attributes even outside an ``itemscope``, then common markup: the main
heading (an ``h1``, else a heading classed ``…name``/``…title``) as the name, the first
price-like element (``itemprop=price``, ``data-price``/``data-amount``, a class with
``price``/``cost``) outside product cards and site chrome, stock/availability elements,
``SKU: …`` labels, and breadcrumbs (``breadcrumb``/``crumbs``/``trail`` blocks).

:func:`heuristic_product` also reports whether the page shows the signs of a product page
(an add-to-cart control, a SKU, a product-detail container), which
:mod:`distcrawl.extract.page` weighs against the number of product links.

The XPaths select attributes and step up to their element
(``//@class[contains(.,'price')]/parent::*`` rather than ``//*[contains(@class,'price')]``):
libxml2 evaluates a predicate on every element of the page several times slower than it
walks the attributes, and both select the same elements in the same order.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from ._xpath import xpath as _xpath
from .availability import normalize_availability
from .canonical import join_url
from .codes import valid_gtin
from .description import DESCRIPTION_WORDS, titled_description
from .labels import LabelValue, label_pairs
from .prices import normalize_currency, parse_price, parse_structured_price
from .schema import clean_category_path
from .stock import (
    StockSource,
    block_wording,
    describe,
    nearest,
    product_block,
    stock_lines,
)

if TYPE_CHECKING:
    from lxml.html import HtmlElement

__all__ = [
    "HEURISTIC_FIELDS",
    "HeuristicProduct",
    "breadcrumb_trail",
    "heuristic_product",
    "printed_code",
    "sku_from_url",
]

#: the Product fields heuristics can read
HEURISTIC_FIELDS: frozenset[str] = frozenset(
    {"name", "price", "currency", "list_price", "sku", "gtin", "brand", "availability",
     "category_path", "description", "image_urls"}
)  # fmt: skip

# "product-header" or "add-to-basket" blocks hold the product itself: whole words only there
_CHROME = re.compile(
    r"\b(?:nav|menu|footer|related|recommend|upsell|cross-?sell|recently|carousel"
    r"|mini-?cart|mini-?basket|cart-total|newsletter|cookie|modal|logo)"
    r"|(?:^|\s)(?:header|site-header|masthead|top-?bar)(?:\s|$)"
)
_CHROME_TAGS = {"nav", "footer", "aside"}
_OLD_PRICE = re.compile(
    r"old|was|list|regular|compare|strike|original|before|rrp|msrp|uvp|crossed|former"
)
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
_ADD_TO_CART = re.compile(
    r"add[\s_-]?to[\s_-]?(?:cart|basket|bag|trolley)|buy[\s_-]?now|in den warenkorb|warenkorb"
    r"|ajouter au panier|añadir al carrito|aggiungi al carrello|in winkelwagen|do koszyka"
    r"|в корзину|купить|加入購物車|加入购物车|放入購物車|立即購買|カートに入れる|장바구니"
    r"|adicionar ao carrinho|lägg i varukorgen|læg i kurv|legg i handlekurv|lisää ostoskoriin"
    r"|sepete ekle|dodaj do koszyka|v košík|do košíku|v košarico|u košaricu"
    r"|(?:^|[\s_-])buy(?:[\s_-]|$)|buy[\s_-]?(?:btn|button)|btn[\s_-]?buy|addtocart",
    re.IGNORECASE,
)
_PRODUCT_CONTAINER = re.compile(
    r"\bpdp\b|\bpdp-|product[-_]?(?:detail|page|info|main|single|view)|single[-_]product"
)
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
#: elements classed "stock" or "availability" weighed at most (the first ones in the page)
_MAX_STOCK_ELEMENTS = 20
#: crumb "names" that are only separators
_SEPARATORS = {"/", ">", "|", "\u203a", "\u00bb"}
_BREADCRUMB_XPATH = (
    "(//@itemtype[contains(.,'BreadcrumbList')]"
    " | //@class[contains(.,'breadcrumb') or contains(.,'crumbs')"
    " or contains(concat(' ',normalize-space(.),' '),' trail ')]"
    " | //@id[contains(.,'breadcrumb')] | //@aria-label[contains(.,'readcrumb')])/parent::*"
)


#: a cached lookup not made yet
_NOT_LOOKED: Any = object()


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
    button: Any = _NOT_LOOKED


def _text(el: HtmlElement) -> str:
    return " ".join((el.text_content() or "").split())


def _value(el: HtmlElement) -> str:
    """An element's value the way microdata reads it: content/href/src attributes, else text."""
    for attr in ("content", "value", "datetime"):
        if el.get(attr):
            return str(el.get(attr)).strip()
    if el.tag in ("a", "link") and el.get("href"):
        return str(el.get("href")).strip()
    if el.tag == "img" and el.get("src"):
        return str(el.get("src")).strip()
    return _text(el)


def _is_chrome(el: HtmlElement, cards: set[HtmlElement]) -> bool:
    """Inside site chrome (nav, header, footer, related products) or another product's card."""
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


def _first(root: HtmlElement, xpath: str, cards: set[HtmlElement]) -> HtmlElement | None:
    for el in _xpath(xpath)(root):
        if not _is_chrome(el, cards):
            return el
    return None


def heuristic_product(
    root: HtmlElement,
    url: str,
    cards: set[HtmlElement],
    wanted: Collection[str] = HEURISTIC_FIELDS,
    *,
    signals: bool = True,
    pairs: list[LabelValue] | None = None,
    few_links: bool = True,
    priced: Callable[[], bool] = lambda: True,
    page_text: str = "",
    earlier: HeuristicProduct | None = None,
) -> HeuristicProduct:
    """Read what visible markup says about the page's own product.

    Only the *wanted* fields are read (structured data may have the rest already), plus
    name, price and the product-page signals when *signals* is true (when the page kind is
    still open). *pairs* are the labelled values an earlier call read, if any. A page with
    many product links and no product signal is a listing whatever else it prints: without
    *few_links*, such a page is spared the costlier readers (labels, text after the heading),
    and a page whose source shows no currency at all (*priced* says, asked only when it
    matters) is not searched for a price in labels and text. With *page_text* (the source),
    labels are only read for fields whose label words it contains. *earlier* is the result of
    an earlier call on the same page: its heading and price element anchor the stock sources.
    """
    result = HeuristicProduct(pairs=pairs, page_text=page_text)
    fields = result.fields
    heading = earlier.heading if earlier is not None else None
    if earlier is not None:
        result.button = earlier.button
        if "price" in earlier.found_in:
            result.found_in["price"] = earlier.found_in["price"]
    if signals or "name" in wanted:
        # an itemprop=name in the <head> is the page's text for sharing, not its heading
        prop = _first(
            root,
            "//@itemprop[.='name']/parent::*[not(ancestor::*[@itemscope] or ancestor::head)]",
            cards,
        )
        heading = prop if prop is not None else _main_heading(root, cards)
        result.heading = heading
        if heading is not None:
            name = _value(heading)
            if name:
                fields["name"] = name[:500]
                result.where["name"] = f"<{heading.tag}> main heading"
                result.found_in["name"] = heading
        if "name" not in fields:
            og = _xpath("//head/meta[@property='og:title']/@content")(root)
            if og and str(og[0]).strip():
                fields["name"] = " ".join(str(og[0]).split())[:500]
                result.where["name"] = "meta og:title"
    if signals and not few_links:
        # many product links: only a product signal makes the costlier readers worth it
        result.strong = _strong_signals(root, cards, heading, result)
    deep = not signals or few_links or result.strong
    if signals or "price" in wanted or "currency" in wanted:
        _read_price(root, cards, result)
        if "price" in fields and heading is not None and deep:
            _prefer_own_block_price(root, cards, heading, result)
        if "price" not in fields and deep and priced():
            _read_label_price(root, cards, result)
            if "price" not in fields and heading is not None:
                _read_price_near(heading, cards, result)
    if signals or "sku" in wanted or "gtin" in wanted:
        _read_identifiers(root, cards, result, labels=deep and (result.strong or priced()))
    if "availability" in wanted:
        if heading is None:
            heading = result.heading = _main_heading(root, cards)
        _read_availability(root, cards, result, heading)
    if "brand" in wanted:
        for pair in _pairs(root, cards, result, "brand"):
            if pair.field == "brand" and 1 < len(pair.value) <= 60:
                fields["brand"] = pair.value
                result.where["brand"] = f"label {pair.shape} {pair.label!r}"
                result.found_in["brand"] = pair
                break
    if "description" in wanted and (not page_text or _has_any(page_text, DESCRIPTION_WORDS)):
        titled = titled_description(root, lambda el: _is_chrome(el, cards))
        if titled is not None:
            fields["description"], title = titled
            result.where["description"] = f"the block titled {_text(title)[:40]!r}"
    for name, xpath in (
        (
            "brand",
            "//@itemprop[.='brand']/parent::*"
            " | //@class[contains(.,'brand')]/parent::*[not(self::img)]",
        ),
        (
            "description",
            "//@itemprop[.='description']/parent::* | //@class[contains(.,'desc')]/parent::*"
            " | //head/meta[@name='description']",
        ),
    ):
        el = _first(root, xpath, cards) if name in wanted and name not in fields else None
        if el is not None:
            nested = _xpath(".//*[@itemprop='name']")(el)
            value = _value(nested[0] if nested else el)
            if value:
                fields[name] = value
                result.where[name] = f"<{el.tag} class={el.get('class')!r}>"
                result.found_in[name] = el
    images = _images(root, url, cards) if "image_urls" in wanted else []
    if images:
        fields["image_urls"] = images
        result.where["image_urls"] = "<img> in a gallery or product-image block"
    crumbs = breadcrumb_trail(root) if "category_path" in wanted else []
    if crumbs:
        names = [name for name, _ in crumbs]
        last_is_link = crumbs[-1][1] is not None
        path = clean_category_path(
            names, product_name=fields.get("name"), last_url_is_page=not last_is_link
        )
        if path:
            fields["category_path"] = path
            result.where["category_path"] = "breadcrumb block (aria-label, class or id)"
    if signals and not result.strong:
        result.strong = _strong_signals(root, cards, heading, result)
    return result


def _strong_signals(
    root: HtmlElement,
    cards: set[HtmlElement],
    heading: HtmlElement | None,
    result: HeuristicProduct,
) -> bool:
    """itemprop product markup, an add-to-cart control or a product-detail container."""
    return (
        bool(_xpath("//@itemprop[.='price' or .='sku' or .='offers']")(root))
        or _page_button(root, cards, result) is not None
        or _has_product_container(heading)
    )


def _main_heading(root: HtmlElement, cards: set[HtmlElement]) -> HtmlElement | None:
    """The page's own title: the ``h1`` (of several, the one the <title> repeats best)."""
    headings = [el for el in root.iter("h1") if _text(el) and not _is_chrome(el, cards)]
    if len(headings) > 1:
        title = " ".join(
            str(t)
            for t in _xpath("//head/title/text() | //head/meta[@property='og:title']/@content")(
                root
            )
        ).lower()
        words = set(re.findall(r"\w+", title))
        if words:
            return max(
                headings,
                key=lambda el: len(words & set(re.findall(r"\w+", _text(el).lower()))),
            )
    if headings:
        return headings[0]
    only = [el for el in root.iter("h1") if _text(el)]
    if len(only) == 1 and not _xpath(".//img | .//a")(only[0]):
        return only[0]  # the page's one titled h1, though a header block wraps it
    return _first(
        root,
        "//@class[contains(.,'name') or contains(.,'title')]"
        "/parent::*[self::h2 or self::h3 or self::div or self::span][normalize-space()]",
        cards,
    )


def _pairs(
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
            if not _is_chrome(p.element, cards)
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


def _read_label_price(root: HtmlElement, cards: set[HtmlElement], result: HeuristicProduct) -> None:
    """A price from a "Price: $12.99" / "Our price" label when no price element said it."""
    for pair in _pairs(root, cards, result, "price"):
        if pair.field != "price" or not re.search(r"\d", pair.value):
            continue
        amount, currency = parse_price(pair.value[:80])
        if amount is not None and amount > 0:
            result.fields["price"] = amount
            if currency:
                result.fields["currency"] = currency
            result.where["price"] = f"label {pair.shape} {pair.label!r}: {pair.value[:60]!r}"
            result.found_in["price"] = pair
            return


def _read_price(root: HtmlElement, cards: set[HtmlElement], result: HeuristicProduct) -> None:
    fields = result.fields
    currency_el = _first(root, "//@itemprop[.='priceCurrency']/parent::*", cards)
    hint = _value(currency_el) if currency_el is not None else None
    # itemprop=price says what it is: it goes before anything merely classed "price"
    candidates = _xpath("//@itemprop[.='price']/parent::*")(root) + _xpath(
        "(//@data-price | //@data-amount | //@data-price-amount"
        " | //@data-product-price | //@class[contains(.,'price') or contains(.,'cost')])/parent::*"
    )(root)
    old: HtmlElement | None = None
    for el in candidates:
        if _is_chrome(el, cards) or el.tag in ("script", "style", "link", "input"):
            continue
        if el.tag == "meta" and not (el.get("itemprop") == "price" and el.get("content")):
            continue
        classes = f"{el.get('class') or ''} {el.get('id') or ''}".lower()
        if _OLD_PRICE.search(classes):
            old = old if old is not None else el
            continue
        if _NOT_A_PRICE.search(classes) or el.tag in ("del", "s", "strike"):
            continue
        if _is_tax_class(classes):
            continue
        if _xpath(".//*[contains(@class,'price') or @itemprop='price' or @data-price]")(el):
            continue  # a price box: its own price elements come next in document order
        amount, currency = _element_price(el, hint)
        if amount is None:
            continue
        fields["price"] = amount
        result.where["price"] = f"<{el.tag} class={el.get('class')!r}>"
        result.found_in["price"] = el
        if currency:
            fields["currency"] = currency
            result.where["currency"] = "beside the price"
        struck = _xpath(".//del | .//s | .//strike")(el)
        if old is None and struck:
            old = struck[0]
        if el.get("itemprop") == "price":
            result.strong = True
        break
    if old is not None and "price" in fields:
        amount, _ = _element_price(old, hint)
        if amount is not None and amount > fields["price"]:
            fields["list_price"] = amount
    if "currency" not in fields and hint:
        currency = normalize_currency(hint)
        if currency:
            fields["currency"] = currency


#: text in these is never the current price (struck-through "was" prices, code)
_NO_PRICE_TAGS = frozenset({"script", "style", "del", "s", "strike", "noscript", "option"})


def _read_price_near(
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
        found = [t for t in found if _inside(_holder(t), within)]
    texts = [str(t).strip() for t in found]
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
        if _OLD_PRICE.search(candidate.lower()):
            continue
        parent = _holder(found[i])
        if parent is None:
            continue
        if _is_chrome(parent, cards) or _in_linked_row(parent):
            continue
        amount, currency = parse_price(candidate[:80])
        if amount is None or amount <= 0:
            continue
        result.fields["price"] = amount
        if currency:
            result.fields["currency"] = currency
        result.where["price"] = f"text after the heading: {candidate[:60]!r}"
        if joined and currency and (holder := _holder(found[i + 1])) is not None:
            result.found_in["currency"] = holder
        result.found_in["price"] = parent
        struck = _xpath("following::*[self::del or self::s or self::strike][position() <= 3]")(
            parent
        )
        if struck:
            old, _ = parse_price(_text(struck[0])[:80])
            if old is not None and old > amount:
                result.fields["list_price"] = old
        return


def _prefer_own_block_price(
    root: HtmlElement, cards: set[HtmlElement], heading: HtmlElement, result: HeuristicProduct
) -> None:
    """The price printed in the product's own block, over a price element outside it.

    A product page prints its heading, its price and its buy button together; a block that
    holds the heading and the page's own buy button is the product's. A price-classed element
    outside that block (a "buy the bundle" box at the foot, a widget of other products)
    gives way to a price printed after the heading inside it ("Lowest price $<b>99</b>").
    """
    price_el = result.found_in.get("price")
    if price_el is None or isinstance(price_el, LabelValue):
        return
    button = _page_button(root, cards, result)
    if button is None:
        return
    above = set(heading.iterancestors())
    block = next((p for p in button.iterancestors() if p in above), None)
    if block is None or block.tag in ("body", "html") or _is_chrome(block, cards):
        return
    if _inside(price_el, block):
        return
    own = HeuristicProduct()
    _read_price_near(heading, cards, own, within=block)
    if "price" not in own.fields:
        return
    for name in ("price", "currency", "list_price"):
        result.fields.pop(name, None)
        result.found_in.pop(name, None)
    result.fields.update(own.fields)
    result.found_in.update(own.found_in)
    result.where["price"] = f"{own.where['price']} (in the block of the heading and buy button)"
    if "currency" in own.fields:
        result.where["currency"] = "beside the price"
    else:
        result.where.pop("currency", None)


def _inside(el: HtmlElement | None, block: HtmlElement) -> bool:
    """*el* is *block* or one of its descendants."""
    return el is not None and (el is block or any(p is block for p in el.iterancestors()))


def _is_tax_class(classes: str) -> bool:
    """A class/id word naming a tax amount or the price before tax (OpenCart's "price-tax")."""
    return any(
        _TAX_WORD.search(word) and not _WITH_TAX.search(word)
        for word in classes.split()
        if "tax" in word or "net" in word or "vat" in word
    )


def _holder(text: Any) -> HtmlElement | None:
    """The element a text node (an lxml smart string) is part of."""
    parent = text.getparent()
    return parent.getparent() if parent is not None and text.is_tail else parent


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


def _element_price(el: HtmlElement, hint: str | None) -> tuple[Any, str | None]:
    """Amount and currency of one price element, preferring machine-readable attributes."""
    hint = el.get("data-currency") or el.get("data-cur") or el.get("data-price-currency") or hint
    for attr in ("content", "data-price", "data-amount", "data-price-amount", "data-product-price"):
        raw = el.get(attr)
        if raw and (amount := parse_structured_price(raw)) is not None:
            _, currency = parse_price(_text(el), hint)
            return amount, currency or normalize_currency(hint)
    # the current price only: a struck-through "was" price inside the element is not it
    parts = _xpath(".//text()[not(ancestor::del or ancestor::s or ancestor::strike)]")(el)
    text = " ".join(" ".join(str(p) for p in parts).split())
    if not text or len(text) > 80 or not re.search(r"\d", text):
        return None, None
    return parse_price(text, hint)


def _read_availability(
    root: HtmlElement,
    cards: set[HtmlElement],
    result: HeuristicProduct,
    heading: HtmlElement | None,
) -> None:
    """Availability from every place the page prints it; the nearest the price and heading
    wins (:mod:`.stock`). Page-wide labels and the buy button count when they were read for
    another field anyway or when the product's own block has no stock line or element. With
    none of them, out-of-stock wording in the product's block, else an enabled buy button,
    says it."""
    price_at = result.found_in.get("price")
    price_el = price_at.element if isinstance(price_at, LabelValue) else price_at
    sources: list[StockSource] = []
    for el in _xpath(
        "(//@itemprop[.='availability'] | //@class[contains(.,'stock')"
        " or contains(.,'availability') or contains(.,'inventory')]"
        " | //@id[contains(.,'availability')])/parent::*"
    )(root)[:_MAX_STOCK_ELEMENTS]:
        if el.tag in ("script", "style", "link") or _is_chrome(el, cards):
            continue
        availability = normalize_availability(_value(el)) or normalize_availability(_text(el))
        if availability:
            label = _text(el)[:40] or _value(el)[:40]
            sources.append(
                StockSource(availability, el, f"<{el.tag} class={el.get('class')!r}> {label!r}")
            )
    block = product_block(heading, price_el)
    if block is not None:
        sources.extend(stock_lines(block, lambda el: _is_chrome(el, cards), (price_el, heading)))

    # labels anywhere on the page and the buy button weigh in when another reader looked
    # them up anyway, or when the product's own block says nothing of its stock: a stock line
    # or element in that block is seldom farther from the price than they are
    def in_block() -> bool:
        return block is not None and any(_inside(s.element, block) for s in sources)

    if result.pairs is not None or not in_block():
        for pair in _pairs(root, cards, result, "availability"):
            if pair.field == "availability" and (found := normalize_availability(pair.value)):
                what = f"label {pair.shape} {pair.label!r}: {pair.value!r}"
                sources.append(StockSource(found, pair.element, what))
    looked_up = result.button is not _NOT_LOOKED
    button = _page_button(root, cards, result) if looked_up or not in_block() else None
    if button is not None and button.tag == "form":
        # a buy form is as usable as its submit control
        inner = _xpath(".//button | .//input[@type='submit']")(button)
        button = inner[0] if inner else button
    enabled: StockSource | None = None
    if button is not None:
        disabled = (
            button.get("disabled") is not None
            or "disabled" in (button.get("class") or "").lower().split()
        )
        label = _text(button) or str(button.get("value") or "")
        said = normalize_availability(label)
        state = "disabled" if disabled else "enabled"
        what = f"{state} buy button <{button.tag}> {label[:40]!r}"
        if said is not None and said != "InStock":
            sources.append(StockSource(said, button, what))
        elif disabled:
            sources.append(StockSource("OutOfStock", button, what))
        else:
            # a button that takes orders says little: shops often leave it on a sold-out page
            enabled = StockSource("InStock", button, what)
    anchors = (price_el, heading)
    picked = nearest(sources, anchors) if sources else None
    if picked is not None:
        chosen, overruled = picked
        anchored = any(a is not None for a in anchors)
        result.fields["availability"] = chosen.availability
        result.found_in["availability"] = chosen.element
        result.where["availability"] = describe(chosen, overruled, anchored=anchored)
        return
    wording = block_wording(block, lambda el: _is_chrome(el, cards)) if block is not None else None
    if wording is not None:
        result.fields["availability"] = "OutOfStock"
        result.where["availability"] = f"out-of-stock wording in the product's block: {wording!r}"
    elif enabled is not None:
        result.fields["availability"] = "InStock"
        result.found_in["availability"] = enabled.element
        result.where["availability"] = enabled.what
    elif block is not None:
        # no field: what the page's default (a price: in stock) rests on, for --explain
        result.where["availability"] = "no out-of-stock wording in the product's block"


def printed_code(
    root: HtmlElement,
    cards: set[HtmlElement],
    page_text: str = "",
    quoted: Collection[str] = (),
) -> tuple[str, HtmlElement] | None:
    """The product code an element marked as one shows (``itemprop=sku``, a class with
    ``sku``/``product-code``/``item-number``/``product-ref``) outside chrome and other
    products' cards, as printed without its label ("Product code: 141677" -> ``141677``).

    With *page_text* (the source) and *quoted* (script bodies of it, which hold no
    attributes), the page's attributes are walked only when the source has a code mark
    elsewhere."""
    if page_text and not _may_mark_code(page_text, quoted):
        return None
    # any attribute may say "product-reference" (data-qa-qualifier=…): walking every
    # attribute of the page costs, so only where the source has the words at all
    marked = " | //@*[.='product-reference' or .='product-ref']"
    if page_text and "product-ref" not in page_text:
        marked = ""
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
            and not _is_chrome(el, cards)
        ),
        None,
    )
    if el is None:
        return None
    value = _value(el)
    shown = _text(el)
    if shown != value and _ALNUM.sub("", shown) == _ALNUM.sub("", value):
        # content="4667999" on a code printed "466/7999": the code as printed, not reshaped
        value = shown
    if not (code := _code(_unlabelled(value))):
        return None
    return code, el


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


def _read_identifiers(
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
        if _is_chrome(gtin_el, cards):
            continue
        if gtin := valid_gtin(_value(gtin_el)):
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
    if "sku" not in fields and (match := _search(_SKU_IN_TEXT, _SKU_WORDS, body_text)):
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
    """A product code as printed: its first word, without trailing punctuation."""
    words = value.split()
    code = words[0].strip(".,;:()[]") if words else ""
    if not code or len(code) > 64 or (not re.search(r"\d", code) and len(words) > 1):
        return None
    return code


def _label_identifiers(
    root: HtmlElement, cards: set[HtmlElement], result: HeuristicProduct
) -> None:
    fields = result.fields
    by_field: dict[str, list[LabelValue]] = {}
    missing = [name for name in ("sku", "gtin") if name not in fields]
    extra = ["ref", "mpn", "gtin"] if "sku" in missing else []
    for pair in _pairs(root, cards, result, *missing, *extra):
        by_field.setdefault(pair.field, []).append(pair)
    for name in ("sku", "ref", "mpn"):
        if "sku" in fields:
            break
        written = [p for p in by_field.get(name, ()) if not p.shape.startswith("@")]
        attrs = [p for p in by_field.get(name, ()) if p.shape.startswith("@")]
        if not written and len({p.value for p in attrs}) != 1:
            continue  # codes of several variants in data attributes: none is the page's
        pair = (written or attrs)[0]
        if code := _code(pair.value):
            fields["sku"] = code
            result.where["sku"] = f"label {pair.shape} {pair.label!r}: {pair.value[:60]!r}"
            result.found_in["sku"] = pair
            result.strong = True
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


def _has_any(text: str, words: tuple[str, ...]) -> bool:
    return any(word in text for word in words)


def _search(pattern: re.Pattern[str], labels: tuple[str, ...], text: str) -> re.Match[str] | None:
    """``pattern.search(text)``, skipped when none of the labels it starts with is there."""
    return pattern.search(text) if any(label in text for label in labels) else None


def _images(root: HtmlElement, url: str, cards: set[HtmlElement]) -> list[str]:
    found: list[str] = []
    for el in _xpath(
        "//@itemprop[.='image']/parent::* | //@class[contains(.,'gallery')"
        " or contains(.,'product-image') or contains(.,'product-photo')"
        " or contains(.,'main-image') or contains(.,'pdp-image')]/parent::*//img"
    )(root):
        if _is_chrome(el, cards):
            continue
        src = el.get("src") or el.get("data-src") or el.get("content") or el.get("href")
        if src and not src.strip().startswith("data:"):
            found.append(join_url(url, src.strip()))
    return list(dict.fromkeys(found))


def breadcrumb_trail(root: HtmlElement) -> list[tuple[str, str | None]]:
    """(name, href) of each crumb of the first breadcrumb block; href None for plain text."""
    for block in _xpath(_BREADCRUMB_XPATH)(root):
        items = _xpath(".//li")(block) or _xpath(".//a")(block)
        crumbs: list[tuple[str, str | None]] = []
        for item in items:
            if item.tag == "li" and _xpath(".//li")(item):
                continue  # a nested list: its own items are the crumbs
            link = item if item.tag == "a" else next(iter(_xpath(".//a[@href]")(item)), None)
            name = _text(item)
            if name and name not in _SEPARATORS:
                crumbs.append((name, link.get("href") if link is not None else None))
        if crumbs:
            return crumbs
    return []


def _page_button(
    root: HtmlElement, cards: set[HtmlElement], result: HeuristicProduct
) -> HtmlElement | None:
    """:func:`_buy_button`, looked for once per page."""
    if result.button is _NOT_LOOKED:
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
                _text(el),
            )
            if v
        )
        if _ADD_TO_CART.search(label) and not _is_chrome(el, cards):
            return el
    return None


def _has_product_container(heading: HtmlElement | None) -> bool:
    if heading is None:
        return False
    for parent in heading.iterancestors():
        if _PRODUCT_CONTAINER.search(f"{parent.get('class') or ''} {parent.get('id') or ''}"):
            return True
    return False
