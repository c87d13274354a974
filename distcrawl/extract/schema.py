"""schema.org nodes (from JSON-LD, microdata or RDFa, already as dicts) to product fields.

Every syntax ends up here in one shape, ``{"@type": "Product", "name": ..., "offers": ...}``,
so the rules live in one place:

* **offers**: a single ``Offer``, a list of them, or an ``AggregateOffer``. The product's
  ``price`` is the lowest offer price in the first offer's currency (what a shopper sees as
  "from"); an ``AggregateOffer`` contributes its ``lowPrice`` (its ``highPrice`` is
  dropped). ``availability`` is the best one across offers (in stock if any offer is).
* **list price**: a ``priceSpecification`` whose ``priceType`` is ``ListPrice``,
  ``StrikethroughPrice``, ``MSRP`` or ``SRP``; kept only when above the price.
* **ProductGroup**: ``hasVariant`` products become ``variants``; the group's price and
  availability come from its own offers, else from its variants.
* **category path**: a ``BreadcrumbList`` (sorted by ``position``), else the product's
  ``category`` text split on ``>``.
* **identifiers**: ``sku`` (a ProductGroup's ``productGroupID`` when it has no ``sku``),
  ``gtin`` from the first of ``gtin``/``gtin13``/``gtin14``/``gtin12``/``gtin8``/``isbn``
  that is a valid code (:mod:`.codes`), ``brand`` from ``brand`` (text or ``{"name"}``),
  else ``manufacturer``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from decimal import Decimal
from functools import lru_cache
from typing import Any
from urllib.parse import urlsplit

from .availability import normalize_availability
from .canonical import is_plain_absolute, join_url
from .codes import valid_gtin
from .notation import decimals_in_practice, grouped_amount
from .prices import normalize_currency, parse_structured_price

__all__ = [
    "PRODUCT_TYPES",
    "breadcrumb_names",
    "clean_category_path",
    "iter_nodes",
    "node_types",
    "product_fields",
    "text_value",
]

#: schema.org types read as a product
PRODUCT_TYPES: frozenset[str] = frozenset(
    {
        "Product",
        "ProductGroup",
        "IndividualProduct",
        "ProductModel",
        "SomeProducts",
        "Vehicle",
        "Car",
        "Book",
    }
)

#: first-crumb names that mean the shop's home page, never a category
HOME_WORDS: frozenset[str] = frozenset(
    {
        "home",
        "homepage",
        "home page",
        "start",
        "startseite",
        "accueil",
        "inicio",
        "shop",
        "store",
        "main",
        "index",
        "🏠",
    }
)

#: priceType values that mark the struck-through "was" price
_LIST_PRICE_TYPES = {"listprice", "strikethroughprice", "msrp", "srp", "regularprice"}

#: availability names from best to worst: a product is as available as its best offer
_AVAILABILITY_RANK = (
    "InStock",
    "LimitedAvailability",
    "OnlineOnly",
    "InStoreOnly",
    "PreOrder",
    "PreSale",
    "BackOrder",
    "MadeToOrder",
    "Reserved",
    "OutOfStock",
    "SoldOut",
    "Discontinued",
)

_SCHEMA_PREFIX = re.compile(r"^(?:https?://)?(?:www\.)?schema\.org/|^schema:", re.IGNORECASE)
_CATEGORY_SPLIT = re.compile("\\s*[>|\u203a\u00bb]\\s*|\\s+/\\s+")
_MAX_DEPTH = 12


def node_types(node: dict[str, Any]) -> set[str]:
    """The node's schema.org type names without any ``https://schema.org/`` prefix."""
    raw = node.get("@type", node.get("type"))
    values = raw if isinstance(raw, list) else [raw]
    return {_type_name(v) for v in values if isinstance(v, str)}


@lru_cache(maxsize=512)
def _type_name(value: str) -> str:
    return _SCHEMA_PREFIX.sub("", value).strip("/")


def iter_nodes(data: Any, depth: int = 0) -> Iterator[dict[str, Any]]:
    """Top-level nodes of one JSON-LD document: lists flattened, ``@graph`` members included,
    and a page node's ``mainEntity`` (a product an ``ItemPage`` is about)."""
    if depth > _MAX_DEPTH:
        return
    if isinstance(data, list):
        for item in data:
            yield from iter_nodes(item, depth + 1)
    elif isinstance(data, dict):
        if "@graph" in data:
            yield from iter_nodes(data["@graph"], depth + 1)
        if "@type" in data or "type" in data:
            yield data
            for key in ("mainEntity", "mainEntityOfPage"):
                if isinstance(data.get(key), dict | list):
                    yield from iter_nodes(data[key], depth + 1)


def text_value(value: Any, depth: int = 0) -> str | None:
    """A plain string from a schema.org value (string, number, ``{"name"}``, ``{"@value"}``,
    or the first of a list); whitespace collapsed."""
    if depth > _MAX_DEPTH or value is None:
        return None
    if isinstance(value, str):  # most values are
        return " ".join(str(value).split()) or None
    if isinstance(value, list):
        for item in value:
            text = text_value(item, depth + 1)
            if text:
                return text
        return None
    if isinstance(value, dict):
        for key in ("name", "@value", "value", "text", "@id", "url"):
            if key in value:
                text = text_value(value[key], depth + 1)
                if text:
                    return text
        return None
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float | Decimal | str):
        text = " ".join(str(value).split())
        return text or None
    return None


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    return value if isinstance(value, list) else [value]


def _urls(value: Any, base_url: str, depth: int = 0) -> list[str]:
    out: list[str] = []
    if depth > _MAX_DEPTH:
        return out
    for item in _as_list(value):
        if isinstance(item, dict):
            for key in ("contentUrl", "url", "@id"):
                if key in item:
                    out.extend(_urls(item[key], base_url, depth + 1))
                    break
        elif isinstance(item, str) and item.strip():
            url = join_url(base_url, item.strip())
            if (
                is_plain_absolute(url)  # an http(s) URL, without parsing it again
                or urlsplit(url).scheme in ("http", "https", "file", "data")
                or not base_url
            ):
                out.append(url)
    return list(dict.fromkeys(out))


def _offer_prices(offer: dict[str, Any]) -> tuple[Decimal | None, Decimal | None, str | None]:
    """(price, list price, currency) of one offer, reading its priceSpecification too."""
    currency = normalize_currency(text_value(offer.get("priceCurrency")))
    price = _structured_amount(_scalar(offer.get("price")), currency)
    if price is None and "AggregateOffer" in node_types(offer):
        price = parse_structured_price(_scalar(offer.get("lowPrice")))
    list_price = None
    for spec in _as_list(offer.get("priceSpecification")):
        if not isinstance(spec, dict):
            continue
        amount = parse_structured_price(_scalar(spec.get("price")))
        spec_currency = normalize_currency(text_value(spec.get("priceCurrency")))
        kind = _SCHEMA_PREFIX.sub("", text_value(spec.get("priceType")) or "").lower()
        if kind in _LIST_PRICE_TYPES:
            list_price = list_price or amount
        elif price is None:
            price = amount
        currency = currency or spec_currency
    return price, list_price, currency


def _structured_amount(value: Any, currency: str | None) -> Decimal | None:
    """A structured price: a dot is its decimal mark (schema.org), except in a string that
    groups thousands in a currency printed without decimals ("24.990" pesos is 24990)."""
    if (
        isinstance(value, str)
        and decimals_in_practice(currency) == 0
        and (grouped := grouped_amount(value.strip())) is not None
        and grouped.group(0) == value.strip()
        and grouped.group(2) == "."
    ):
        return Decimal(grouped.group(1) + grouped.group(3))
    return parse_structured_price(value)


def _scalar(value: Any) -> Any:
    if isinstance(value, list):
        return value[0] if value else None
    if isinstance(value, dict):
        return value.get("@value", value.get("value"))
    return value


def _flatten_offers(value: Any, depth: int = 0) -> list[dict[str, Any]]:
    offers: list[dict[str, Any]] = []
    if depth > 3:
        return offers
    for offer in _as_list(value):
        if not isinstance(offer, dict):
            continue
        offers.append(offer)
        if "AggregateOffer" in node_types(offer) and "offers" in offer:
            offers.extend(_flatten_offers(offer["offers"], depth + 1))
    return offers


def best_availability(values: list[str | None]) -> str | None:
    """The most available of several availability names (in stock if any offer is)."""
    known = [v for v in values if v]
    if not known:
        return None
    return min(known, key=lambda v: _AVAILABILITY_RANK.index(v) if v in _AVAILABILITY_RANK else 99)


def _price_from_offers(offers: list[dict[str, Any]]) -> dict[str, Any]:
    """Lowest price (in the first priced offer's currency), its list price, best availability."""
    priced: list[tuple[Decimal, Decimal | None, str | None]] = []
    for offer in offers:
        price, list_price, currency = _offer_prices(offer)
        if price is not None:
            priced.append((price, list_price, currency))
    fields: dict[str, Any] = {}
    if priced:
        main_currency = priced[0][2]
        same = [p for p in priced if p[2] == main_currency or p[2] is None]
        price, list_price, currency = min(same, key=lambda p: p[0])
        fields.update(price=price, currency=currency or main_currency)
        if list_price is not None and list_price > price:
            fields["list_price"] = list_price
    else:
        currencies = [normalize_currency(text_value(o.get("priceCurrency"))) for o in offers]
        if any(currencies):
            fields["currency"] = next(c for c in currencies if c)
    availability = best_availability(
        [normalize_availability(text_value(o.get("availability"))) for o in offers]
    )
    if availability:
        fields["availability"] = availability
    return fields


def product_fields(node: dict[str, Any], base_url: str, depth: int = 0) -> dict[str, Any]:
    """Product fields (Product item names) from one schema.org Product/ProductGroup node."""
    fields: dict[str, Any] = {}
    for name, keys in (
        ("name", ("name",)),
        ("sku", ("sku", "productGroupID")),
        ("gtin", ("gtin", "gtin13", "gtin14", "gtin12", "gtin8", "isbn")),
        ("brand", ("brand", "manufacturer")),
        ("description", ("description",)),
    ):
        for key in keys:
            value = text_value(node.get(key))
            if value and name == "sku" and len(value.split()) > 2:
                continue  # "OPTIPLEX 9010 TOWER": a model's name, not a code
            if value and name == "gtin":
                value = valid_gtin(value)  # a wrong check digit: no GTIN, never "fixed"
            if value:
                fields[name] = value
                break
    images = _urls(node.get("image"), base_url)
    if images:
        fields["image_urls"] = images
    category = text_value(node.get("category"))
    if category:
        path = clean_category_path(_CATEGORY_SPLIT.split(category))
        if path:
            fields["category_path"] = path
    offers = _flatten_offers(node.get("offers"))
    fields.update(_price_from_offers(offers))
    variants = []
    if depth == 0:
        for variant in _as_list(node.get("hasVariant")):
            if isinstance(variant, dict):
                variants.append(product_fields(variant, base_url, depth + 1))
    if variants:
        fields["variants"] = [
            {key: v.get(key) for key in ("sku", "name", "price", "currency", "availability")}
            for v in variants
        ]
        if "price" not in fields:
            fields.update(_price_from_variants(variants))
        if "availability" not in fields:
            availability = best_availability([v.get("availability") for v in variants])
            if availability:
                fields["availability"] = availability
        if "image_urls" not in fields:
            images = [url for v in variants for url in v.get("image_urls", [])]
            if images:
                fields["image_urls"] = list(dict.fromkeys(images))
    return fields


def _price_from_variants(variants: list[dict[str, Any]]) -> dict[str, Any]:
    priced = [v for v in variants if v.get("price") is not None]
    if not priced:
        return {}
    currency = priced[0].get("currency")
    cheapest = min((v for v in priced if v.get("currency") == currency), key=lambda v: v["price"])
    fields = {"price": cheapest["price"], "currency": currency}
    if cheapest.get("list_price") is not None:
        fields["list_price"] = cheapest["list_price"]
    return fields


def breadcrumb_names(node: dict[str, Any]) -> list[tuple[str, str | None]]:
    """(name, url) of each crumb of a BreadcrumbList node, in ``position`` order."""
    crumbs: list[tuple[float, int, str, str | None]] = []
    for index, element in enumerate(_as_list(node.get("itemListElement"))):
        if not isinstance(element, dict):
            continue
        item = element.get("item")
        name = text_value(element.get("name")) or (
            text_value(item.get("name")) if isinstance(item, dict) else None
        )
        url = text_value(item.get("@id") or item.get("url")) if isinstance(item, dict) else None
        if url is None and isinstance(item, str):
            url = item
        try:
            position = float(text_value(element.get("position")) or index)
        except ValueError:
            position = float(index)
        if name:
            crumbs.append((position, index, name, url))
    crumbs.sort(key=lambda c: (c[0], c[1]))
    return [(name, url) for _, _, name, url in crumbs]


def clean_category_path(
    names: list[str], *, product_name: str | None = None, last_url_is_page: bool = False
) -> list[str]:
    """Crumb names without the leading home crumb and without the product itself."""
    path = [" ".join(n.split()) for n in names]
    path = [n for n in path if n]
    if path and path[0].lower().strip(" /") in HOME_WORDS:
        path = path[1:]
    if path and (last_url_is_page or (product_name and path[-1] == " ".join(product_name.split()))):
        path = path[:-1]
    return path
