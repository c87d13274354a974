"""Structured product data of a page: JSON-LD, microdata, RDFa, OpenGraph and script data.

Each syntax is read by extruct and only when the page carries its marker (a cheap substring
check), so a plain page costs nothing here. Each syntax yields at most one *candidate*
product; :mod:`distcrawl.extract.page` merges candidates field by field in the order of
:data:`SOURCES`. A broken block is skipped with a reason in ``errors``, never raised.

Embedded script data is read in one common shape only: a script that assigns a JSON
object to a variable whose name contains ``product`` (``window.__PRODUCT__ = {...};``,
``var productData = {...}``), or a ``<script type="application/json">`` whose ``id``
contains ``product``. Other state stores need a profile field with a ``pattern``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import extruct
import jstyleson

from .availability import normalize_availability
from .canonical import canonicalize_url, join_url
from .codes import valid_gtin
from .prices import normalize_currency, parse_price, parse_structured_price
from .schema import (
    PRODUCT_TYPES,
    breadcrumb_names,
    iter_nodes,
    node_types,
    product_fields,
    text_value,
)

if TYPE_CHECKING:
    from lxml.html import HtmlElement

__all__ = ["SOURCES", "StructuredData", "extract_structured"]

#: candidate sources from first to last in precedence (the profile and heuristics wrap these)
SOURCES: tuple[str, ...] = ("json-ld", "microdata", "rdfa", "script", "opengraph")

#: more top-level products than this, none of them this page, means a listing's item list
DEFAULT_MAX_PRODUCTS_ON_PRODUCT_PAGE = 2

#: script bodies larger than this are not searched for embedded product data
DEFAULT_MAX_SCRIPT_CHARS = 2_000_000

_CATEGORY_SPLIT = re.compile("\\s*[>/|\u203a\u00bb]\\s*")
_COMMENT_LINE = re.compile(r"^\s*(//.*|<!--.*-->)", re.MULTILINE)
_PRODUCT_ASSIGNMENT = re.compile(
    r"(?:window\.|var\s+|let\s+|const\s+|\b)([\w$.]*product[\w$]*)\s*=\s*(?=\{)", re.IGNORECASE
)
# built once: json.loads(..., strict=False) and JSONDecoder() build a new decoder per call
_LENIENT_JSON = json.JSONDecoder(strict=False)
_JSON = json.JSONDecoder()


@dataclass
class StructuredData:
    """What the structured data of one page says."""

    #: (source, product fields) in precedence order, at most one per source
    candidates: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    #: (name, url) crumbs of the first BreadcrumbList found in any syntax
    breadcrumbs: list[tuple[str, str | None]] = field(default_factory=list)
    #: top-level product nodes seen across syntaxes (many of them mark a listing)
    product_nodes: int = 0
    #: the bodies of the page's JSON-LD scripts, as in its source
    json_ld_bodies: list[str] = field(default_factory=list)
    #: the page's source in lower case, where markers of a syntax or a kind of page are looked for
    lowered: str = ""


def extract_structured(
    root: HtmlElement,
    text: str,
    url: str,
    canonical_url: str,
    errors: list[str],
    linked_products: Collection[str] = (),
) -> StructuredData:
    """Read every structured syntax the page has; *text* is the decoded page for markers.

    A product node whose URL is one of *linked_products* (the page's links to product
    pages) describes a card for another page, so it is never this page's product.
    """
    data = StructuredData(lowered=text.lower())
    lowered = data.lowered
    page_urls = {canonicalize_url(url), canonical_url}
    linked = frozenset(linked_products) - page_urls
    syntaxes: list[tuple[str, list[dict[str, Any]]]] = []
    if "ld+json" in lowered:
        syntaxes.append(("json-ld", _json_ld_nodes(root, errors, data.json_ld_bodies)))
    if "itemscope" in lowered:
        syntaxes.append(("microdata", _extruct_nodes(root, url, "microdata", errors)))
    if "typeof=" in lowered or "vocab=" in lowered:
        syntaxes.append(("rdfa", _rdfa_nodes(text, url, errors)))
    for source, nodes in syntaxes:
        _add_candidate(data, source, nodes, url, page_urls, linked)
    if "product" in lowered and "<script" in lowered:
        script = _script_product(root, url, errors)
        if script:
            data.candidates.append(("script", script))
    if "og:" in lowered or "product:" in lowered:
        og = _opengraph_product(root, url, errors)
        if og:
            data.candidates.append(("opengraph", og))
    return data


def _add_candidate(
    data: StructuredData,
    source: str,
    nodes: list[dict[str, Any]],
    url: str,
    page_urls: set[str],
    linked: frozenset[str],
) -> None:
    products = [n for n in nodes if node_types(n) & PRODUCT_TYPES]
    data.product_nodes += len(products)
    if not data.breadcrumbs:
        # a page node may hold its BreadcrumbList inline (``"breadcrumb": {...}``)
        nested = [n["breadcrumb"] for n in nodes if isinstance(n.get("breadcrumb"), dict)]
        for node in (*nodes, *nested):
            if "BreadcrumbList" in node_types(node):
                data.breadcrumbs = breadcrumb_names(node)
                break
    main = _main_product(products, url, page_urls, linked)
    if main is not None:
        fields = product_fields(main, url)
        if fields:
            data.candidates.append((source, fields))


def _main_product(
    products: list[dict[str, Any]], url: str, page_urls: set[str], linked: frozenset[str]
) -> dict[str, Any] | None:
    """The product this page is about: the one whose URL is the page, else one of a few
    products that are not cards linking to other product pages."""
    unlinked = []
    for node in products:
        node_url = text_value(node.get("url")) or text_value(node.get("@id"))
        target = canonicalize_url(join_url(url, node_url)) if node_url else None
        if target in page_urls:
            return node
        if target not in linked:
            unlinked.append(node)
    if len(products) > DEFAULT_MAX_PRODUCTS_ON_PRODUCT_PAGE:
        return None
    products = unlinked
    if not products:
        return None
    with_offers = [n for n in products if n.get("offers") or n.get("hasVariant")]
    return (with_offers or products)[0]


def _json_ld_nodes(root: HtmlElement, errors: list[str], bodies: list[str]) -> list[dict[str, Any]]:
    """Nodes of every JSON-LD block, each block parsed on its own so one bad block costs
    only itself; ``@id`` references between nodes are resolved. The blocks' texts are added
    to *bodies*."""
    documents: list[Any] = []
    for script in root.iter("script"):
        if "ld+json" not in (script.get("type") or "").lower():
            continue
        body = (script.text or "").strip()
        if not body:
            continue
        bodies.append(body)
        try:
            documents.append(_LENIENT_JSON.decode(body))
        except (ValueError, RecursionError):
            try:  # extruct's own fallback: comments and trailing commas
                documents.append(jstyleson.loads(_COMMENT_LINE.sub("", body), strict=False))
            except Exception as exc:
                errors.append(f"malformed JSON-LD block skipped: {_short(exc)}")
    nodes = [node for document in documents for node in iter_nodes(document)]
    return _resolve_references(nodes)


def _extruct_nodes(
    root: HtmlElement, url: str, syntax: str, errors: list[str]
) -> list[dict[str, Any]]:
    try:
        found = extruct.extract(root, base_url=url, syntaxes=[syntax], uniform=True)
    except Exception as exc:
        errors.append(f"{syntax} skipped: {_short(exc)}")
        return []
    return [node for node in found.get(syntax, []) if isinstance(node, dict)]


def _rdfa_nodes(text: str, url: str, errors: list[str]) -> list[dict[str, Any]]:
    """RDFa as extruct gives it (expanded JSON-LD) reshaped into schema.org nodes."""
    try:
        found = extruct.extract(text, base_url=url, syntaxes=["rdfa"])
    except Exception as exc:
        errors.append(f"rdfa skipped: {_short(exc)}")
        return []
    nodes = []
    for raw in found.get("rdfa", []):
        if not isinstance(raw, dict) or "@type" not in raw:
            continue
        node: dict[str, Any] = {"@type": raw["@type"]}
        if "@id" in raw:
            node["@id"] = raw["@id"]
        for key, values in raw.items():
            if key.startswith("@"):
                continue
            name = re.sub(r"^https?://(?:www\.)?schema\.org/", "", key)
            plain = [_rdfa_value(v) for v in values] if isinstance(values, list) else [values]
            node[name] = plain[0] if len(plain) == 1 else plain
        nodes.append(node)
    return _resolve_references(nodes)


def _rdfa_value(value: Any) -> Any:
    if isinstance(value, dict):
        if "@value" in value:
            return value["@value"]
        if set(value) == {"@id"}:
            return {"@id": value["@id"]}
    return value


def _resolve_references(nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Inline ``{"@id": ...}`` references to other nodes; drop nodes others reference, so a
    variant or an offer never reads as a top-level product."""
    by_id = {n["@id"]: n for n in nodes if isinstance(n.get("@id"), str) and len(n) > 1}
    if not by_id:
        return nodes
    referenced: set[str] = set()

    def resolve(value: Any, depth: int) -> Any:
        if depth > 8:
            return value
        if isinstance(value, list):
            return [resolve(v, depth + 1) for v in value]
        if isinstance(value, dict):
            ref = value.get("@id")
            if set(value) == {"@id"} and isinstance(ref, str) and ref in by_id:
                referenced.add(ref)
                return resolve(by_id[ref], depth + 1)
            return {k: resolve(v, depth + 1) for k, v in value.items()}
        return value

    resolved = [resolve(n, 0) for n in nodes]
    return [r for r, n in zip(resolved, nodes, strict=True) if n.get("@id") not in referenced]


def _opengraph_product(root: HtmlElement, url: str, errors: list[str]) -> dict[str, Any]:
    """Fields from OpenGraph ``og:`` and ``product:`` tags, when they describe a product."""
    try:
        found = extruct.extract(
            root, base_url=url, syntaxes=["opengraph"], uniform=True, with_og_array=True
        )
    except Exception as exc:
        errors.append(f"opengraph skipped: {_short(exc)}")
        return {}
    props: dict[str, Any] = {}
    for node in found.get("opengraph", []):
        props.update(node)
    og_type = str(props.get("@type", "")).lower()
    if "product" not in og_type and not any(k.startswith("product:") for k in props):
        return {}

    def first(*keys: str) -> str | None:
        for key in keys:
            value = text_value(props.get(key))
            if value:
                return value
        return None

    fields: dict[str, Any] = {}
    for name, keys in (
        ("name", ("og:title",)),
        ("description", ("og:description",)),
        ("brand", ("product:brand", "og:brand")),
        ("sku", ("product:retailer_item_id", "product:sku", "og:sku")),
        ("gtin", ("product:gtin", "product:ean", "product:upc", "product:isbn")),
    ):
        value = first(*keys)
        if value and name == "gtin":
            value = valid_gtin(value)
        if value:
            fields[name] = value
    sale = parse_structured_price(first("product:sale_price:amount"))
    price = sale or parse_structured_price(first("product:price:amount", "og:price:amount"))
    currency = normalize_currency(
        first("product:sale_price:currency", "product:price:currency", "og:price:currency")
    )
    if price is not None:
        fields["price"] = price
        original = parse_structured_price(first("product:original_price:amount"))
        if original is None and sale is not None:
            original = parse_structured_price(first("product:price:amount"))
        if original is not None and original > price:
            fields["list_price"] = original
    if currency:
        fields["currency"] = currency
    availability = normalize_availability(first("product:availability", "og:availability"))
    if availability:
        fields["availability"] = availability
    images = props.get("og:image")
    image_list = images if isinstance(images, list) else [images] if images else []
    if image_list:
        fields["image_urls"] = list(dict.fromkeys(str(i) for i in image_list if i))
    category = first("product:category")
    if category:
        fields["category_path"] = [c.strip() for c in _CATEGORY_SPLIT.split(category) if c]
    return fields


# -- embedded script data ---------------------------------------------------------------

#: key names seen in embedded product objects, per Product field, most specific first
_SCRIPT_KEYS: dict[str, tuple[str, ...]] = {
    "name": ("name", "title", "productname", "product_name"),
    "price": (
        "saleprice",
        "sale_price",
        "currentprice",
        "current_price",
        "finalprice",
        "final_price",
        "price",
        "amount",
    ),
    "list_price": (
        "listprice",
        "list_price",
        "regularprice",
        "regular_price",
        "originalprice",
        "original_price",
        "compareatprice",
        "compare_at_price",
        "wasprice",
        "was_price",
        "msrp",
    ),
    "currency": ("currency", "currencycode", "currency_code", "pricecurrency"),
    "sku": ("sku", "skuid", "sku_id", "itemnumber", "articlenumber"),
    "gtin": ("gtin", "gtin13", "gtin12", "gtin14", "gtin8", "ean", "upc", "barcode"),
    "brand": ("brand", "brandname", "brand_name", "manufacturer", "vendor"),
    "availability": (
        "availability",
        "stockstatus",
        "stock_status",
        "instock",
        "in_stock",
        "available",
        "stock",
    ),
    "description": ("description", "shortdescription", "short_description"),
    "image_urls": ("images", "image", "imageurl", "image_url", "imageurls", "media", "photos"),
    "category_path": ("breadcrumbs", "categorypath", "category_path", "categories", "category"),
}


def _script_product(root: HtmlElement, url: str, errors: list[str]) -> dict[str, Any]:
    for script in root.iter("script"):
        kind = (script.get("type") or "").lower()
        body = script.text or ""
        if "ld+json" in kind or not body or len(body) > DEFAULT_MAX_SCRIPT_CHARS:
            continue
        objects: list[Any] = []
        if "json" in kind:
            if "product" in (script.get("id") or "").lower():
                try:
                    objects.append(json.loads(body))
                except (ValueError, RecursionError) as exc:
                    errors.append(f"embedded product JSON skipped: {_short(exc)}")
        elif "product" in body.lower():
            for match in _PRODUCT_ASSIGNMENT.finditer(body):
                try:
                    objects.append(_JSON.raw_decode(body, match.end())[0])
                except (ValueError, RecursionError):
                    errors.append(
                        f"embedded {match.group(1)} is not JSON; a profile field with a "
                        "pattern can read it"
                    )
        for obj in objects:
            found = _find_product_object(obj)
            if found is not None:
                if node_types(found) & PRODUCT_TYPES:
                    return product_fields(found, url)
                return _script_fields(found, url)
    return {}


def _find_product_object(obj: Any, depth: int = 0) -> dict[str, Any] | None:
    """The object itself when it looks like a product, else its ``product`` key, else the
    first such object one or two levels down."""
    if not isinstance(obj, dict) or depth > 2:
        return None
    keys = {k.lower() for k in obj if isinstance(k, str)}
    if node_types(obj) & PRODUCT_TYPES or (
        keys & {"name", "title", "productname"} and keys & {"price", "offers", "sku", "saleprice"}
    ):
        return obj
    for key, value in obj.items():
        if isinstance(key, str) and key.lower() == "product":
            found = _find_product_object(value, depth + 1)
            if found is not None:
                return found
    for value in obj.values():
        found = _find_product_object(value, depth + 1)
        if found is not None:
            return found
    return None


def _script_fields(obj: dict[str, Any], url: str) -> dict[str, Any]:
    lowered = {k.lower(): v for k, v in obj.items() if isinstance(k, str)}

    def first(name: str) -> Any:
        for key in _SCRIPT_KEYS[name]:
            if lowered.get(key) not in (None, "", []):
                return lowered[key]
        return None

    fields: dict[str, Any] = {}
    # a product sold in one variant only (a shop platform's "Default Title") has its codes
    # there; of several variants none is the product's own
    variants = lowered.get("variants")
    only = variants[0] if isinstance(variants, list) and len(variants) == 1 else None
    single = (
        {k.lower(): v for k, v in only.items() if isinstance(k, str)}
        if isinstance(only, dict)
        else {}
    )
    for name in ("name", "sku", "gtin", "brand", "description"):
        value = text_value(first(name))
        if not value and name in ("sku", "gtin"):
            value = next((text_value(single[k]) for k in _SCRIPT_KEYS[name] if single.get(k)), None)
        if value and name == "gtin":
            value = valid_gtin(value)
        if value:
            fields[name] = value
    raw_price = first("price")
    currency_hint = text_value(first("currency"))
    if isinstance(raw_price, dict):  # {"amount": "12.99", "currency": "EUR"}
        currency_hint = currency_hint or text_value(
            raw_price.get("currency") or raw_price.get("currencyCode")
        )
        raw_price = raw_price.get("amount") or raw_price.get("value")
    price, currency = _script_price(raw_price, currency_hint)
    if price is not None:
        fields["price"] = price
        list_price, _ = _script_price(first("list_price"), currency_hint)
        if list_price is not None and list_price > price:
            fields["list_price"] = list_price
    if currency:
        fields["currency"] = currency
    availability = normalize_availability(first("availability"))
    if availability:
        fields["availability"] = availability
    images = first("image_urls")
    image_list = images if isinstance(images, list) else [images]
    urls = [
        text_value(i.get("url") or i.get("src")) if isinstance(i, dict) else text_value(i)
        for i in image_list
    ]
    if any(urls):
        fields["image_urls"] = list(dict.fromkeys(join_url(url, u) for u in urls if u))
    category = first("category_path")
    if isinstance(category, str):
        category = _CATEGORY_SPLIT.split(category)
    if isinstance(category, list):
        names = [text_value(c) for c in category]
        fields["category_path"] = [n for n in names if n]
    return fields


def _script_price(value: Any, currency_hint: str | None) -> tuple[Any, str | None]:
    if isinstance(value, str) and not re.fullmatch(r"\s*[\d.]+\s*", value):
        return parse_price(value, currency_hint)
    return parse_structured_price(value), normalize_currency(currency_hint)


def _short(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {str(exc)[:120]}"
