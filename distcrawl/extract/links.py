"""Links of a page sorted by what they lead to, without any site profile.

* **next** (pagination): ``rel=next`` (``<link>`` or ``<a>``) and "next" links (text
  Next, angle quotes, Weiter, Suivant, class or aria-label ``next``) first, then every
  other link of a pagination block (``pagination``, ``pager``) or to the same path with a
  page parameter.
* **product**: a path that looks like a detail page (``/p/…``, ``/product/…``,
  ``/products/…``, ``…-123.html``), a link classed ``product…``, or a link in a repeated
  card (``li``/``article``, or a block classed product/card/item/tile) that shows a price.
* **category**: links in navigation (``nav``, menus, category and sub-category lists,
  breadcrumbs) or with a category-like path (``/c/``, ``/category/``, ``/collections/``…),
  minus account, cart, search and legal pages. A category index and a listing cannot be
  told apart before they are fetched, so links to both come out as ``category``;
  ``listing`` stays empty unless a profile fills it.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from distcrawl.base.names import reasons

from ._xpath import xpath as _xpath
from .canonical import join_url
from .region import inside_any, neighbour_sections

if TYPE_CHECKING:
    from lxml.html import HtmlElement

__all__ = [
    "DEFAULT_CONTEXT_CACHE_SIZE",
    "DEFAULT_LISTING_MIN_PRODUCT_LINKS",
    "LINK_KINDS",
    "LinkScan",
    "is_card_context",
    "scan_links",
]

#: keys of ``PageAnalysis.links``, always all present
LINK_KINDS: tuple[str, ...] = ("category", "listing", "product", "next")

#: link contexts read per process (a site's templates repeat them on every page)
DEFAULT_CONTEXT_CACHE_SIZE = 1024

#: longer contexts bypass that cache: a hostile page must not bloat it
_MAX_CACHED_CHARS = 2048

#: anchor texts that mean "the next page", compared lower-case and stripped
NEXT_WORDS: frozenset[str] = frozenset(
    {
        "next",
        "next page",
        "next \u00bb",
        "next \u203a",
        "next >",
        "\u203a",
        "\u00bb",
        ">",
        "→",
        "\u00bb\u00bb",
        "weiter",
        "nächste",
        "nächste seite",
        "suivant",
        "page suivante",
        "siguiente",
        "avanti",
        "successivo",
        "volgende",
        "następna",
    }
)

_PRODUCT_PATH = re.compile(
    r"/(?:p|product|products|item|items|dp|artikel|produkt|produit|prodotto|producto)/[^/?#]+"
    r"|[-_/]p[-_]?\d+(?:\.html?)?$|/\d+[-_][^/]+\.html?$|[^/]+[-_]\d{3,}\.html?$",
    re.IGNORECASE,
)
_CATEGORY_PATH = re.compile(
    r"/(?:c|cat|category|categories|collections?|departments?|dept|catalog|catalogue|"
    r"kategorie|kategorien|categorie|categoria|rayon|shop)(?:/|$)",
    re.IGNORECASE,
)
_EXCLUDED_PATH = re.compile(
    r"/(?:cart|basket|bag|checkout|login|logout|signin|sign-in|signup|sign-up|register|"
    r"account|my-account|wishlist|compare|search|help|faq|contact|about|privacy|terms|"
    r"imprint|impressum|legal|cookies?|returns|shipping|newsletter|blog|press|careers|jobs)"
    r"(?:[/.?]|$)",
    re.IGNORECASE,
)
_PAGE_PARAM = re.compile(r"(?:^|&)(?:page|pg|pagenum|page_num|offset|start)=\d+", re.IGNORECASE)
_PAGE_PATH = re.compile(r"/page/\d+/?$", re.IGNORECASE)
_PRICE_TEXT = re.compile(r"[$€£¥₹]\s*\d|\d\s*(?:[$€£¥₹]|eur|usd|gbp|kr|zł|chf)\b", re.IGNORECASE)
_SKIPPED_SCHEMES = ("javascript:", "mailto:", "tel:", "data:", "sms:", "#")

# matched against "class id tag" of a link's ancestors; \b keeps "unavailable" from "nav"
_NAV_CONTEXT = re.compile(
    r"\b(?:nav|menu|breadcrumb|crumbs|trail)|(?:^|\s)(?:header|site-header|masthead)(?:\s|$)"
)
# category lists, but also Magento's "category-products" grid: no veto on product cards
_CATEGORY_CONTEXT = re.compile(r"\b(?:categor|department|sidebar)")
# filter and facet links multiply one listing into endless combinations: never followed
_FILTER_CONTEXT = re.compile(r"\bfacet|(?:^|\s)(?:filters?|refinements?|sort|sorting)(?:\s|$)")
_PAGINATION_CONTEXT = re.compile(r"\b(?:pagination|pager|paging|page-numbers)")
_ASIDE_CONTEXT = re.compile(r"related|recommend|upsell|cross-?sell|recently")
_CARD_WORDS = ("product", "card", "item", "tile")
#: this many product links outside "related products" blocks make a page a listing
DEFAULT_LISTING_MIN_PRODUCT_LINKS = 3


@dataclass
class LinkScan:
    """Links by kind plus what the link layout says about the page."""

    links: dict[str, list[str]] = field(default_factory=lambda: {k: [] for k in LINK_KINDS})
    #: product cards showing a price (their prices belong to other products, not this page)
    cards: set[HtmlElement] = field(default_factory=set)
    #: product links outside "related products" blocks (a listing has many)
    main_product_links: int = 0
    #: the page has pagination
    paginated: bool = False
    #: why the scan stopped before the page's last link ("too_many_links", "parse_time"),
    #: and how many ``<a>`` it left unread
    cut: str = ""
    unread: int = 0


@dataclass(frozen=True)
class _Context:
    """What the blocks around a link say about it."""

    pagination: bool
    filters: bool
    nav: bool
    category: bool
    aside: bool

    @classmethod
    def read(cls, context: str) -> _Context:
        """*context* is "class id tag" of a link's ancestors, nearest first."""
        return cls(
            pagination=bool(_PAGINATION_CONTEXT.search(context)),
            filters=bool(_FILTER_CONTEXT.search(context)),
            nav=bool(_NAV_CONTEXT.search(context)),
            category=bool(_CATEGORY_CONTEXT.search(context)),
            aside=bool(_ASIDE_CONTEXT.search(context)),
        )


_read_context = lru_cache(maxsize=DEFAULT_CONTEXT_CACHE_SIZE)(_Context.read)


def _classes(el: HtmlElement) -> str:
    return f"{el.get('class') or ''} {el.get('id') or ''}".lower()


def is_card_context(el: HtmlElement) -> HtmlElement | None:
    """The nearest card-like ancestor (``li``, ``article``, a table row, or a block classed
    like a card)."""
    for depth, parent in enumerate(el.iterancestors()):
        if depth > 5 or parent.tag in ("body", "ul", "ol", "main", "nav"):
            return None
        if parent.tag in ("li", "article", "tr") or (
            parent.tag in ("div", "section") and any(w in _classes(parent) for w in _CARD_WORDS)
        ):
            return parent
    return None


def _has_price(card: HtmlElement) -> bool:
    if _xpath(
        ".//*[contains(@class,'price') or contains(@class,'cost') or @itemprop='price' "
        "or @data-price]"
    )(card):
        return True
    return bool(_PRICE_TEXT.search(card.text_content()[:2000]))


def _repeated(card: HtmlElement, root: HtmlElement, memo: dict[str, bool]) -> bool:
    """A list item or table row, or a block whose class another block of the page shares.

    Listings repeat their cards; a page's own product block (``div.right-product`` holding
    the price, a brand link and the maker's page) is one of a kind, whatever its class says:
    a link that only its priced block makes a product link needs a block that repeats.
    """
    if card.tag in ("li", "tr"):
        return True
    classes = card.get("class")
    if not classes:
        return True  # an unclassed <article>: nothing to compare, as before
    if classes not in memo:
        memo[classes] = len(_xpath("//@class[.=$c]")(root, c=classes)) > 1
    return memo[classes]


#: anchors read between two looks at the clock
_CLOCK_EVERY = 256


def scan_links(
    root: HtmlElement,
    page_url: str,
    canonical: Callable[[str], str],
    *,
    max_links: int = 0,
    deadline: float | None = None,
) -> LinkScan:
    """Sort the page's links into :data:`LINK_KINDS`, absolute and canonical, in page order.

    A hostile page must not cost a node more than a bounded amount of work: the scan stops
    after ``max_links`` ``<a>`` elements (0: no limit) or at ``deadline`` (``time.monotonic()``),
    saying so in :attr:`LinkScan.cut`."""
    scan = LinkScan()
    base = page_url
    for base_href in _xpath("//head/base/@href")(root)[:1]:
        base = join_url(page_url, str(base_href).strip())
    page_canonical = canonical(page_url)
    page_path = urlsplit(page_canonical).path
    first_next: list[str] = []
    other_pages: list[str] = []
    seen: dict[str, set[str]] = {k: set() for k in LINK_KINDS}
    card_price: dict[HtmlElement, bool] = {}
    #: main product links that only their card made product links, with that card
    counted_by_card: dict[str, HtmlElement] = {}
    #: the anchors of the main product links
    counted: list[HtmlElement] = []
    repeats: dict[str, bool] = {}
    # links share their ancestors (a nav, a list): each one's part of a context is built once
    contexts: dict[tuple[HtmlElement, int], str] = {}

    def add(kind: str, url: str, target: list[str] | None = None) -> None:
        if url not in seen[kind]:
            seen[kind].add(url)
            (scan.links[kind] if target is None else target).append(url)

    def has_price(card: HtmlElement) -> bool:
        if card not in card_price:
            card_price[card] = _has_price(card)
        return card_price[card]

    for link in _xpath("//head/link[@href][contains(@rel,'next')]")(root):
        url = _absolute(base, link.get("href"), canonical)
        if url:
            add("next", url, first_next)
    anchors = root.iter("a")
    for read, a in enumerate(anchors):
        if (max_links and read >= max_links) or (
            deadline is not None
            and read
            and not read % _CLOCK_EVERY
            and time.monotonic() > deadline
        ):
            too_many = max_links and read >= max_links
            scan.cut = reasons.TOO_MANY_LINKS if too_many else reasons.PARSE_TIME
            scan.unread = int(_xpath("count(//a)")(root)) - read  # in C: no element proxies
            break
        url = _absolute(base, a.get("href"), canonical)
        if url is None or url == page_canonical:
            continue
        rel = (a.get("rel") or "").lower().split()
        own = _classes(a) + " " + (a.get("aria-label") or "").lower()
        # text_content() runs an XPath; a link without child elements has only its .text
        content = a.text_content() if len(a) else a.text
        text = " ".join((content or "").split()).lower()
        ancestry = _context(a.getparent(), 8, contexts)
        if len(ancestry) <= _MAX_CACHED_CHARS:
            context = _read_context(ancestry)
        else:
            context = _Context.read(ancestry)
        split = urlsplit(url)
        if "next" in rel or "next" in own.split() or own.startswith("next") or text in NEXT_WORDS:
            scan.paginated = True
            add("next", url, first_next)
            continue
        if (
            "prev" in rel
            or context.pagination
            or (
                split.path == page_path
                and (_PAGE_PARAM.search(split.query) or _PAGE_PATH.search(split.path))
            )
            or _PAGE_PATH.search(split.path)
        ):
            scan.paginated = True
            add("next", url, other_pages)
            continue
        if context.filters:
            continue
        in_nav = context.nav
        card = None if in_nav else is_card_context(a)
        is_product = not in_nav and bool(_PRODUCT_PATH.search(split.path))
        by_card = False
        if card is not None and not is_product:
            is_product = by_card = (
                has_price(card)
                and not _EXCLUDED_PATH.search(split.path)
                and _repeated(card, root, repeats)
            )
        if not is_product and not in_nav and "product" in own and "categor" not in own:
            is_product = not _EXCLUDED_PATH.search(split.path)
        if is_product:
            if card is not None and has_price(card):
                scan.cards.add(card)
            if not context.aside and url not in seen["product"]:
                scan.main_product_links += 1
                counted.append(a)
                if by_card and card is not None:
                    counted_by_card[url] = card
            add("product", url)
            continue
        if _EXCLUDED_PATH.search(split.path):
            continue
        if in_nav or context.category or _CATEGORY_PATH.search(split.path) or "categor" in own:
            add("category", url)
    scan.links["next"] = [u for u in (*first_next, *other_pages) if u != page_canonical]
    # a block holding the page's main heading is the page's own product, never a card
    scan.cards = {card for card in scan.cards if next(card.iter("h1"), None) is None}
    # a table row is a card only among others (a listing table), not in a table layout
    rows: dict[HtmlElement | None, int] = {}
    for card in scan.cards:
        if card.tag == "tr":
            rows[card.getparent()] = rows.get(card.getparent(), 0) + 1
    if rows:
        scan.cards = {c for c in scan.cards if c.tag != "tr" or rows[c.getparent()] > 1}
    # a link that only its card made a product's does not make the page a listing once that
    # card is dropped (offers in a layout table's one row, links in the product's own block)
    scan.main_product_links -= sum(1 for c in counted_by_card.values() if c not in scan.cards)
    if scan.main_product_links >= DEFAULT_LISTING_MIN_PRODUCT_LINKS:
        # links in a section the page titles as other products' ("Customers also bought")
        # are a product page's neighbours, as in a block classed "related"
        sections = neighbour_sections(root, next(root.iter("h1"), None), reviews=False)
        if sections:
            scan.main_product_links -= sum(1 for a in counted if inside_any(a, sections))
    return scan


def _context(el: HtmlElement | None, limit: int, memo: dict[tuple[HtmlElement, int], str]) -> str:
    """The "class id tag" of *el* and its ancestors, at most *limit* of them, below the body."""
    if el is None or limit == 0 or el.tag in ("body", "html"):
        return ""
    key = (el, limit)
    if key not in memo:
        outer = _context(el.getparent(), limit - 1, memo)
        # aria-label too: <nav aria-label="Pagination"> and "Breadcrumb" name their block
        own = f"{_classes(el)} {(el.get('aria-label') or '').lower()} {el.tag}"
        memo[key] = f"{own} {outer}" if outer else own
    return memo[key]


def _absolute(base: str, href: str | None, canonical: Callable[[str], str]) -> str | None:
    if not href:
        return None
    href = href.strip()
    if not href or href.lower().startswith(_SKIPPED_SCHEMES):
        return None
    try:
        url = join_url(base, href)
    except ValueError:
        return None
    if not url.lower().startswith(("http://", "https://", "file://")):
        return None
    return canonical(url)
