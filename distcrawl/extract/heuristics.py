"""Product fields from visible markup, for pages without (complete) structured data.

:func:`heuristic_product` reads ``itemprop`` attributes even outside an ``itemscope``, then
common markup: the main heading (an ``h1``, else a heading classed ``…name``/``…title``) as
the name, the price (:mod:`.markup_price`), the product codes (:mod:`.markup_codes`), the
stock (:mod:`.stock`), brand, description, images and breadcrumbs
(``breadcrumb``/``crumbs``/``trail`` blocks), outside product cards and site chrome
(:mod:`.markup`).

It also reports whether the page shows the signs of a product page (an add-to-cart
control, a SKU, a product-detail container), which :mod:`distcrawl.extract.page` weighs
against the number of product links.

The XPaths select attributes and step up to their element
(``//@class[contains(.,'price')]/parent::*`` rather than ``//*[contains(@class,'price')]``):
libxml2 evaluates a predicate on every element of the page several times slower than it
walks the attributes, and both select the same elements in the same order.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING

from ._xpath import xpath as _xpath
from .canonical import join_url
from .description import DESCRIPTION_WORDS, titled_description
from .labels import LabelValue
from .markup import (
    HeuristicProduct,
    first_outside,
    is_chrome,
    page_button,
    page_pairs,
    text_of,
    value_of,
)
from .markup_codes import labelled_code, printed_code, read_identifiers, sku_from_url
from .markup_price import (
    prefer_own_block_price,
    read_label_price,
    read_price,
    read_price_near,
)
from .notation import AMBIGUOUS_PRICE, Notation
from .region import neighbour_sections
from .schema import clean_category_path
from .stock import read_availability

if TYPE_CHECKING:
    from lxml.html import HtmlElement

__all__ = [
    "HEURISTIC_FIELDS",
    "HeuristicProduct",
    "breadcrumb_trail",
    "heuristic_product",
    "labelled_code",
    "outside_of",
    "printed_code",
    "sku_from_url",
]

#: the Product fields heuristics can read
HEURISTIC_FIELDS: frozenset[str] = frozenset(
    {"name", "price", "currency", "list_price", "sku", "gtin", "brand", "availability",
     "category_path", "description", "image_urls", AMBIGUOUS_PRICE}
)  # fmt: skip

_PRODUCT_CONTAINER = re.compile(
    r"\bpdp\b|\bpdp-|product[-_]?(?:detail|page|info|main|single|view)|single[-_]product"
)
#: the fields whose readers look in the page's own product only (not in other products' cards
#: and sections)
_READERS = frozenset(
    {"price", "currency", "sku", "gtin", "availability", "brand", "description", "image_urls"}
)
#: the fields whose readers read amounts in the page's notation
_PRICED = frozenset({"price", "currency"})
#: crumb "names" that are only separators
_SEPARATORS = {"/", ">", "|", "\u203a", "\u00bb"}
_BREADCRUMB_XPATH = (
    "(//@itemtype[contains(.,'BreadcrumbList')]"
    " | //@class[contains(.,'breadcrumb') or contains(.,'crumbs')"
    " or contains(concat(' ',normalize-space(.),' '),' trail ')]"
    " | //@id[contains(.,'breadcrumb')] | //@aria-label[contains(.,'readcrumb')])/parent::*"
)


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

    Nothing is read in other products' *cards* nor in the sections the page titles as other
    products' or as reviews (:func:`.region.neighbour_sections`).
    """
    result = HeuristicProduct(pairs=pairs, page_text=page_text)
    fields = result.fields
    heading = earlier.heading if earlier is not None else None
    result.notation = earlier.notation if earlier is not None else None
    if result.notation is None and (signals or not _PRICED.isdisjoint(wanted)):
        result.notation = Notation(root, page_text)
    if earlier is not None:
        result.heading = heading
        result.button = earlier.button
        result.outside = earlier.outside
        if "price" in earlier.found_in:
            result.found_in["price"] = earlier.found_in["price"]
    if signals or "name" in wanted:
        # an itemprop=name in the <head> is the page's text for sharing, not its heading
        prop = first_outside(
            root,
            "//@itemprop[.='name']/parent::*[not(ancestor::*[@itemscope] or ancestor::head)]",
            cards,
        )
        heading = prop if prop is not None else _main_heading(root, cards)
        result.heading = heading
        if heading is not None:
            name = value_of(heading)
            if name:
                fields["name"] = name[:500]
                result.where["name"] = f"<{heading.tag}> main heading"
                result.found_in["name"] = heading
        if "name" not in fields:
            og = _xpath("//head/meta[@property='og:title']/@content")(root)
            if og and str(og[0]).strip():
                fields["name"] = " ".join(str(og[0]).split())[:500]
                result.where["name"] = "meta og:title"
    if signals or not _READERS.isdisjoint(wanted):
        cards = outside_of(root, cards, result)
        heading = result.heading
    if signals and not few_links:
        # many product links: only a product signal makes the costlier readers worth it
        result.strong = _strong_signals(root, cards, heading, result)
    deep = not signals or few_links or result.strong
    if signals or "price" in wanted or "currency" in wanted:
        read_price(root, cards, result)
        if result.priced() and heading is not None and deep:
            prefer_own_block_price(root, cards, heading, result)
        if not result.priced() and deep and priced():
            read_label_price(root, cards, result)
            if not result.priced() and heading is not None:
                read_price_near(heading, cards, result)
    if signals or "sku" in wanted or "gtin" in wanted:
        read_identifiers(root, cards, result, labels=deep and (result.strong or priced()))
    if "availability" in wanted:
        if heading is None:
            heading = result.heading = _main_heading(root, cards)
        read_availability(root, cards, result, heading)
    if "brand" in wanted:
        for pair in page_pairs(root, cards, result, "brand"):
            if pair.field == "brand" and 1 < len(pair.value) <= 60:
                fields["brand"] = pair.value
                result.where["brand"] = f"label {pair.shape} {pair.label!r}"
                result.found_in["brand"] = pair
                break
    if "description" in wanted and (not page_text or _has_any(page_text, DESCRIPTION_WORDS)):
        titled = titled_description(root, lambda el: is_chrome(el, cards))
        if titled is not None:
            fields["description"], title = titled
            result.where["description"] = f"the block titled {text_of(title)[:40]!r}"
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
        el = first_outside(root, xpath, cards) if name in wanted and name not in fields else None
        if el is not None:
            nested = _xpath(".//*[@itemprop='name']")(el)
            value = value_of(nested[0] if nested else el)
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


def outside_of(
    root: HtmlElement, cards: set[HtmlElement], result: HeuristicProduct
) -> set[HtmlElement]:
    """What no reader looks in: other products' *cards* and the page's sections titled as
    other products' or as reviews (looked for once, kept in *result*)."""
    if result.outside is None:
        if result.heading is None:
            result.heading = _main_heading(root, cards)
        result.outside = cards | neighbour_sections(root, result.heading)
    return result.outside


def _strong_signals(
    root: HtmlElement,
    cards: set[HtmlElement],
    heading: HtmlElement | None,
    result: HeuristicProduct,
) -> bool:
    """itemprop product markup, an add-to-cart control or a product-detail container."""
    return (
        bool(_xpath("//@itemprop[.='price' or .='sku' or .='offers']")(root))
        or page_button(root, cards, result) is not None
        or _has_product_container(heading)
    )


def _main_heading(root: HtmlElement, cards: set[HtmlElement]) -> HtmlElement | None:
    """The page's own title: the ``h1`` (of several, the one the <title> repeats best)."""
    headings = [el for el in root.iter("h1") if text_of(el) and not is_chrome(el, cards)]
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
                key=lambda el: len(words & set(re.findall(r"\w+", text_of(el).lower()))),
            )
    if headings:
        return headings[0]
    only = [el for el in root.iter("h1") if text_of(el)]
    if len(only) == 1 and not _xpath(".//img | .//a")(only[0]):
        return only[0]  # the page's one titled h1, though a header block wraps it
    return first_outside(
        root,
        "//@class[contains(.,'name') or contains(.,'title')]"
        "/parent::*[self::h2 or self::h3 or self::div or self::span][normalize-space()]",
        cards,
    )


def _has_any(text: str, words: tuple[str, ...]) -> bool:
    return any(word in text for word in words)


def _images(root: HtmlElement, url: str, cards: set[HtmlElement]) -> list[str]:
    found: list[str] = []
    for el in _xpath(
        "//@itemprop[.='image']/parent::* | //@class[contains(.,'gallery')"
        " or contains(.,'product-image') or contains(.,'product-photo')"
        " or contains(.,'main-image') or contains(.,'pdp-image')]/parent::*//img"
    )(root):
        if is_chrome(el, cards):
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
            name = text_of(item)
            if name and name not in _SEPARATORS:
                crumbs.append((name, link.get("href") if link is not None else None))
        if crumbs:
            return crumbs
    return []


def _has_product_container(heading: HtmlElement | None) -> bool:
    if heading is None:
        return False
    for parent in heading.iterancestors():
        if _PRODUCT_CONTAINER.search(f"{parent.get('class') or ''} {parent.get('id') or ''}"):
            return True
    return False
