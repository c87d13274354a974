"""The entry point: one fetched page to its kind, canonical URL, links and product.

:func:`analyze` parses the HTML once and hands the tree to every reader; the product's fields
from the profile, structured data and heuristics are merged by :mod:`.merge`.

The page kind is the profile's ``[kinds]`` verdict when one matches; otherwise a page with
product data is a ``product``, one with product links in cards (or many, or paginated) a
``listing``, one with category links a ``category``, and anything else ``other``.
"""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

from lxml import etree, html
from parsel import Selector
from w3lib.encoding import html_to_unicode

from distcrawl.base.names import reasons

from .auction import prefer_current_bid
from .canonical import DEFAULT_TRACKING_PARAMS, canonicalize_url, join_url, same_site
from .codes import valid_code
from .heuristics import (
    HEURISTIC_FIELDS,
    HeuristicProduct,
    heuristic_product,
    outside_of,
    sku_from_url,
)
from .links import DEFAULT_LISTING_MIN_PRODUCT_LINKS, LINK_KINDS, LinkScan, scan_links
from .merge import (
    LIST_FIELDS,
    PRODUCT_FIELDS,
    merge_category_path,
    merge_fields,
    prefer_printed_code,
    read_profile_fields,
)
from .notation import AMBIGUOUS_PRICE
from .profile import SiteProfile
from .structured import extract_structured

if TYPE_CHECKING:
    from lxml.html import HtmlElement

__all__ = [
    "DEFAULT_LISTING_MIN_PRODUCT_LINKS",
    "DEFAULT_MAX_BODY_BYTES",
    "PAGE_KINDS",
    "PRODUCT_FIELDS",
    "PageAnalysis",
    "analyze",
]

#: page kinds, as the spider uses them for priorities
PAGE_KINDS: tuple[str, ...] = ("category", "listing", "product", "other")

#: fields the heuristics read anyway while deciding whether a page is a product page
_SIGNAL_FIELDS = frozenset(
    {"name", "price", "currency", "list_price", "sku", "gtin", AMBIGUOUS_PRICE}
)

#: bytes of a body that are read; the rest of a larger page is ignored (with an error)
DEFAULT_MAX_BODY_BYTES = 8 * 1024 * 1024

#: currency signs and codes: a page whose source has none of them shows no price
_CURRENCY_SIGNS = "$€£¥₹₽₸₴₺₩₫₪\u5143\u5186"
_PRICE_HINT = re.compile(
    r"\b(?:EUR|USD|GBP|CHF|CAD|AUD|JPY|SEK|NOK|DKK|PLN|CZK|TWD|CNY|RUB|INR|BRL|MXN|CLP"
    r"|ARS|HUF|RON|TRY|KRW|NZD|SGD|HKD|ZAR|KZT|UAH|ILS|THB|IDR|MYR|PHP|PKR|AED|SAR|kr|z\u0142|K\u010d|lei|\u0440\u0443\u0431)\b"
)
#: NUL and other C0 controls make lxml refuse or truncate a document
_CONTROL_CHARS = "".join(chr(c) for c in range(0x20) if chr(c) not in "\t\n\r")
_CONTROL_CHARS_RE = re.compile(f"[{re.escape(_CONTROL_CHARS)}]")
#: lower-cases what "canonical" is spelt with, as ``translate(@rel,'CANOIL','canoil')``
_CANONICAL_LETTERS = str.maketrans("CANOIL", "canoil")
#: one HTML parser per thread: lxml parsers must not be shared between threads
_parsers = threading.local()


@dataclass
class PageAnalysis:
    """What one page is and holds, as the spider needs it."""

    #: the URL the page was fetched from
    url: str
    #: one of :data:`PAGE_KINDS`
    kind: str
    #: rel=canonical when on the same site, else the canonicalised fetch URL
    canonical_url: str
    #: Product fields (see :data:`PRODUCT_FIELDS`) when ``kind == "product"``, else None
    product: dict[str, Any] | None
    #: absolute canonical URLs per link kind, deduplicated, in page order
    links: dict[str, list[str]]
    #: human-readable reasons for anything that was skipped
    errors: list[str] = field(default_factory=list)
    #: which source gave each product field ("profile", "json-ld", "heuristics", ...)
    sources: dict[str, str] = field(default_factory=dict)
    #: per heuristic field, where on the page it was read (see :meth:`explain`)
    where: dict[str, str] = field(default_factory=dict)
    #: the limits that cut the analysis short ("too_many_bytes", "too_many_links",
    #: "parse_time"; see :func:`analyze`), and the ``<a>`` left unread
    cut: list[str] = field(default_factory=list)
    links_unread: int = 0

    def explain(self, profile: SiteProfile | None = None) -> dict[str, dict[str, str]]:
        """Per field: ``{"source": "structured data" | "profile" | "label" | "heuristic",
        "detail": the selector or text that gave it}`` (what ``extract --explain`` shows)."""
        return _explain(self.sources, self.where, profile)


def analyze(
    url: str,
    body: bytes | str,
    encoding: str | None = None,
    profile: SiteProfile | None = None,
    *,
    max_bytes: int = DEFAULT_MAX_BODY_BYTES,
    max_links: int = 0,
    max_seconds: float = 0.0,
) -> PageAnalysis:
    """Analyse one page; never raises, whatever *body* holds (then kind is ``"other"``).

    The work one page costs is bounded: the first ``max_bytes`` of the body are read, the
    first ``max_links`` ``<a>`` (0: all), and links only while the analysis has run less than
    ``max_seconds`` (0: no limit); :attr:`PageAnalysis.cut` names the limits that applied."""
    errors: list[str] = []
    limits = _Limits(max_bytes, max_links, time.monotonic() + max_seconds if max_seconds else None)
    try:
        return _analyze(url, body, encoding, profile, errors, limits)
    except Exception as exc:  # hostile input must cost one page, never the crawl
        errors.append(f"page analysis failed: {type(exc).__name__}: {str(exc)[:200]}")
        try:
            canonical = canonicalize_url(url)
        except Exception:
            canonical = str(url)
        return PageAnalysis(
            url=str(url),
            kind="other",
            canonical_url=canonical,
            product=None,
            links={k: [] for k in LINK_KINDS},
            errors=errors,
        )


@dataclass
class _Limits:
    """What one page may cost (see :func:`analyze`), and which limits applied."""

    max_bytes: int = DEFAULT_MAX_BODY_BYTES
    max_links: int = 0
    deadline: float | None = None
    cut: list[str] = field(default_factory=list)
    unread: int = 0


def _decode(
    body: bytes | str, encoding: str | None, errors: list[str], limits: _Limits | None = None
) -> str:
    max_bytes = limits.max_bytes if limits is not None else DEFAULT_MAX_BODY_BYTES
    if isinstance(body, str):
        text = body
    else:
        if len(body) > max_bytes:
            errors.append(f"body of {len(body)} bytes cut to {max_bytes}")
            if limits is not None:
                limits.cut.append(reasons.TOO_MANY_BYTES)
            body = body[:max_bytes]
        text = ""
        if encoding:
            try:
                text = body.decode(encoding, errors="replace")
            except LookupError:
                errors.append(f"unknown encoding {encoding!r}; detected from the page")
                encoding = None
        if not encoding:
            text = html_to_unicode(None, body)[1]
    # one substring check per control character is several times faster than a regex scan
    if any(c in text for c in _CONTROL_CHARS):
        text = _CONTROL_CHARS_RE.sub("", text)
    return text


def _parse(text: str) -> HtmlElement:
    """The tree of *text*, parsed the way ``parsel.Selector(text=text, type="html")`` does."""
    parser: html.HTMLParser | None = getattr(_parsers, "html", None)
    if parser is None:
        parser = _parsers.html = html.HTMLParser(recover=True, encoding="utf-8", huge_tree=True)
    body = text.strip().replace("\x00", "").encode("utf-8") or b"<html/>"
    root = etree.fromstring(body, parser=parser)
    if root is None:
        root = etree.fromstring(b"<html/>", parser=parser)
    return root


def _analyze(
    url: str,
    body: bytes | str,
    encoding: str | None,
    profile: SiteProfile | None,
    errors: list[str],
    limits: _Limits,
) -> PageAnalysis:
    page = _analyze_page(url, body, encoding, profile, errors, limits)
    page.cut = limits.cut
    page.links_unread = limits.unread
    return page


def _analyze_page(
    url: str,
    body: bytes | str,
    encoding: str | None,
    profile: SiteProfile | None,
    errors: list[str],
    limits: _Limits,
) -> PageAnalysis:
    text = _decode(body, encoding, errors, limits)
    tracking = (
        DEFAULT_TRACKING_PARAMS | frozenset(profile.strip_params)
        if profile
        else DEFAULT_TRACKING_PARAMS
    )
    canonical = partial(canonicalize_url, tracking_params=tracking)
    root = _parse(text or "<html></html>")
    if root is None or not hasattr(root, "iter"):
        errors.append("no HTML document found")
        return PageAnalysis(url, "other", canonical(url), None, {k: [] for k in LINK_KINDS}, errors)
    canonical_url = canonical(url)
    canonical_links = (
        link
        for link in root.iter("link")
        if "canonical" in (link.get("rel") or "").translate(_CANONICAL_LETTERS)
    )
    for href in [link.get("href") for link in canonical_links if link.get("href")][:1]:
        target = join_url(url, str(href).strip())
        if same_site(url, target):
            canonical_url = canonical(target)
        else:
            errors.append(f"rel=canonical to another site ignored: {target[:200]}")

    scan = scan_links(root, url, canonical, max_links=limits.max_links, deadline=limits.deadline)
    if scan.cut:
        limits.cut.append(scan.cut)
        limits.unread = scan.unread
        errors.append(f"links cut ({scan.cut}): {scan.unread} left unread")
    links = scan.links
    structured = extract_structured(root, text, url, canonical_url, errors, links["product"])
    profile_fields: dict[str, Any] = {}
    kind = None
    if profile:
        # profile rules are parsel selectors; the other readers work on the lxml tree
        selector = Selector(root=root, type="html")
        for link_kind in LINK_KINDS:
            hrefs = profile.link_values(selector, link_kind)
            if hrefs is not None:
                links[link_kind] = _absolute_links(url, hrefs, canonical)
        profile_fields = read_profile_fields(profile, selector, url, errors)
        kind = profile.kind(selector)
    # a profile's price (a name can come from anywhere) marks a product page too
    has_product_data = "price" in profile_fields or any(
        "name" in fields or "price" in fields for _, fields in structured.candidates
    )
    known = {
        name
        for _, fields in structured.candidates
        for name, value in fields.items()
        if name != "sku" or valid_code(value) is not None
    }
    known.update(profile_fields)
    if structured.breadcrumbs:
        known.add("category_path")
    wanted = HEURISTIC_FIELDS - known
    heuristic = HeuristicProduct()
    if scan.cut and kind is None and not has_product_data:
        # more links than a page may cost: not a product page, and the heuristics would read
        # the whole (huge) tree again
        kind = "listing" if scan.main_product_links else "category" if links["category"] else None
    if kind is None and not has_product_data:
        # the kind is open: read the product-page signals first, the rest only for a product
        few_links = scan.main_product_links < DEFAULT_LISTING_MIN_PRODUCT_LINKS
        heuristic = heuristic_product(
            root,
            url,
            scan.cards,
            wanted & _SIGNAL_FIELDS,
            few_links=few_links,
            priced=lambda: _has_price_hint(text),
            page_text=text,
        )
        wanted -= _SIGNAL_FIELDS
    if kind is None:
        kind = _decide_kind(has_product_data, heuristic, scan, structured.product_nodes)
    if kind != "product":
        return PageAnalysis(url, kind, canonical_url, None, links, errors)
    if wanted:
        more = heuristic_product(
            root,
            url,
            scan.cards,
            wanted,
            signals=False,
            pairs=heuristic.pairs,
            page_text=text,
            earlier=heuristic,
        )
        heuristic.fields.update(more.fields)
        heuristic.where.update(more.where)

    candidates: list[tuple[str, dict[str, Any]]] = []
    if profile_fields:
        candidates.append(("profile", profile_fields))
    candidates.extend(structured.candidates)
    candidates.append(("heuristics", heuristic.fields))
    product, sources = merge_fields(candidates, profile)
    merge_category_path(product, sources, structured.breadcrumbs, canonical_url, candidates)
    product["url"] = canonical_url
    if sources.get("sku") not in (None, "profile", "heuristics"):
        quoted = structured.json_ld_bodies
        outside = partial(outside_of, root, scan.cards, heuristic)
        prefer_printed_code(root, outside, text, quoted, product, sources, heuristic)
    if sources.get("price") not in (None, "profile", "heuristics"):
        prefer_current_bid(root, structured.lowered, product, sources, heuristic.where)
    if not product.get("sku") and (from_url := sku_from_url(canonical_url)):
        product["sku"], sources["sku"] = from_url, "url"
    if not product.get("availability") and (
        product.get("price") is not None or product.get(AMBIGUOUS_PRICE)
    ):
        # offered at a price, with no word anywhere of it being unavailable: for sale
        product["availability"], sources["availability"] = "InStock", "default"
    result = {
        name: product.get(name, [] if name in LIST_FIELDS else None) for name in PRODUCT_FIELDS
    }
    if result["name"] is None:
        errors.append("product page without a product name")
    where = heuristic.where
    return PageAnalysis(url, kind, canonical_url, result, links, errors, sources, where)


#: what each value of ``PageAnalysis.sources`` is, in the words of ``extract --explain``
_SOURCE_KINDS = {
    "profile": "profile",
    "heuristics": "heuristic",
    "default": "heuristic",
    "url": "heuristic",
}


def _explain(
    sources: dict[str, str], where: dict[str, str], profile: SiteProfile | None
) -> dict[str, dict[str, str]]:
    """Per field: the kind of source (structured data, profile, label, heuristic) and the
    selector or text that gave it."""
    out: dict[str, dict[str, str]] = {}
    for name, source in sources.items():
        kind = _SOURCE_KINDS.get(source, "structured data")
        if source == "profile" and profile is not None and name in profile.fields:
            detail = " | ".join(rule.source for rule in profile.fields[name].rules)
        elif source == "profile":
            detail = f"the profile's currency = {profile.currency!r}" if profile else "profile"
        elif source == "heuristics":
            detail = where.get(name, "visible markup")
            if detail.startswith("label "):
                kind, detail = "label", detail[len("label ") :]
        elif source == "default":
            checked = where.get(name) or "no availability printed where it was looked for"
            detail = f"a price and {checked}: InStock"
        elif source == "url":
            detail = "the number ending the URL path (no code printed on the page)"
        else:
            detail = f"{source} (the page's own product)"
        out[name] = {"source": kind, "detail": detail}
    return out


def _has_price_hint(text: str) -> bool:
    """A currency sign or code anywhere in the source (substring checks first: cheap)."""
    return any(sign in text for sign in _CURRENCY_SIGNS) or _PRICE_HINT.search(text) is not None


def _decide_kind(
    has_product_data: bool, heuristic: HeuristicProduct, scan: LinkScan, product_nodes: int
) -> str:
    """The page kind without a profile verdict (see the module docstring)."""
    fields = heuristic.fields
    few_links = scan.main_product_links < DEFAULT_LISTING_MIN_PRODUCT_LINKS
    # a product page shows its own name with a price or a product code, and buy controls or
    # product markup outside other products' cards (related products make links many)
    looks_like_product = "name" in fields and (
        (heuristic.priced() and (heuristic.strong or few_links))
        or (heuristic.strong and "sku" in fields)
    )
    if has_product_data or looks_like_product:
        return "product"
    many_links = scan.main_product_links >= DEFAULT_LISTING_MIN_PRODUCT_LINKS
    some_links = scan.main_product_links > 0 and (bool(scan.cards) or scan.paginated)
    if many_links or some_links or product_nodes > 2:
        return "listing"
    if scan.links["category"]:
        return "category"
    return "other"


def _absolute_links(url: str, hrefs: list[str], canonical: partial[str]) -> list[str]:
    out: dict[str, None] = {}
    for href in hrefs:
        if href.lower().startswith(("javascript:", "mailto:", "tel:", "#", "data:")):
            continue
        try:
            absolute = join_url(url, href)
        except ValueError:
            continue
        if absolute.lower().startswith(("http://", "https://", "file://")):
            out[canonical(absolute)] = None
    return list(out)
