"""The merge of a product's fields from its sources, first source that has a value wins:

1. the site profile's ``[fields]`` (when a profile applies),
2. structured data: JSON-LD, microdata, RDFa, embedded script data, OpenGraph,
3. heuristics on visible markup.

``price``, ``currency``, ``list_price`` and ``price_ambiguous`` travel together: they come
from the source that gave the price (currency falls back to a later source, then to the
profile's ``currency``). An ``sku`` that is no code (:func:`.codes.code_flaw`) gives way to
the next source's. ``category_path`` prefers a profile, then a schema.org ``BreadcrumbList``,
then the product's own ``category``, then visible breadcrumbs. A structured ``sku`` the page
never shows gives way to the code it prints (:func:`prefer_printed_code`).
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from .availability import normalize_availability
from .canonical import canonicalize_url, join_url
from .codes import valid_code
from .heuristics import HeuristicProduct, labelled_code, printed_code
from .notation import AMBIGUOUS_PRICE
from .prices import normalize_currency, parse_price, parse_structured_price
from .profile import FIELD_NAMES, SiteProfile
from .schema import clean_category_path

if TYPE_CHECKING:
    from collections.abc import Callable

    from lxml.html import HtmlElement
    from parsel import Selector

__all__ = [
    "LIST_FIELDS",
    "PRODUCT_FIELDS",
    "merge_category_path",
    "merge_fields",
    "prefer_printed_code",
    "read_profile_fields",
]

#: Product fields ``analyze`` fills (the spider adds site, source_url and crawled_at)
PRODUCT_FIELDS: tuple[str, ...] = ("url", *FIELD_NAMES, "variants", AMBIGUOUS_PRICE)
#: fields merged together, from the source that gave the price
_PRICE_GROUP = ("price", "currency", "list_price", AMBIGUOUS_PRICE)
#: fields merged one by one; the rest are merged together (price) or apart (url, path)
_MERGED_ALONE = tuple(f for f in PRODUCT_FIELDS if f not in ("url", "category_path", *_PRICE_GROUP))
LIST_FIELDS = {"category_path", "image_urls", "variants"}
#: a shop's internal id rather than the code it prints: a database number, a hex digest, a UUID
_INTERNAL_ID = re.compile(
    r"\d{4,}|(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{12,}"
    r"|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
    re.IGNORECASE,
)
#: ancestors of a product's heading climbed for the block its code is printed in
_TITLE_BLOCK_DEPTH = 3

_PLAIN_NUMBER = re.compile(r"\s*\d+(?:\.\d+)?\s*")


def merge_fields(
    candidates: list[tuple[str, dict[str, Any]]], profile: SiteProfile | None
) -> tuple[dict[str, Any], dict[str, str]]:
    """Field-by-field merge, first candidate wins; price, currency, list price kept together."""
    product: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for name in _MERGED_ALONE:
        for source, fields in candidates:
            if fields.get(name) not in (None, "", []):
                if name == "sku" and valid_code(fields[name]) is None:
                    continue  # a price, a date, a phone number or a sentence: the next source
                product[name], sources[name] = fields[name], source
                break
    for source, fields in candidates:
        if fields.get("price") is not None or fields.get(AMBIGUOUS_PRICE):
            # a price whose notation the page leaves open stands for the price: no later
            # source's price is taken instead
            for name in _PRICE_GROUP:
                if fields.get(name) not in (None, ""):
                    product[name], sources[name] = fields[name], source
            break
    if "currency" not in product:
        for source, fields in candidates:
            if fields.get("currency"):
                product["currency"], sources["currency"] = fields["currency"], source
                break
    if "currency" not in product and profile and profile.currency:
        product["currency"], sources["currency"] = profile.currency, "profile"
    profile_list_price = (
        candidates[0][1].get("list_price") if candidates[0][0] == "profile" else None
    )
    if profile_list_price is not None:
        product["list_price"], sources["list_price"] = profile_list_price, "profile"
    return product, sources


def merge_category_path(
    product: dict[str, Any],
    sources: dict[str, str],
    breadcrumbs: list[tuple[str, str | None]],
    canonical_url: str,
    candidates: list[tuple[str, dict[str, Any]]],
) -> None:
    ordered = list(candidates)
    if breadcrumbs:
        last_url = breadcrumbs[-1][1]
        path = clean_category_path(
            [name for name, _ in breadcrumbs],
            product_name=product.get("name"),
            last_url_is_page=bool(last_url) and canonicalize_url(str(last_url)) == canonical_url,
        )
        at = 1 if ordered and ordered[0][0] == "profile" else 0
        ordered.insert(at, ("breadcrumb-list", {"category_path": path}))
    for source, fields in ordered:
        found = fields.get("category_path")
        if found:
            if source != "breadcrumb-list":
                found = clean_category_path(found, product_name=product.get("name"))
            if found:
                product["category_path"], sources["category_path"] = found, source
                return


def read_profile_fields(
    profile: SiteProfile, selector: Selector, url: str, errors: list[str]
) -> dict[str, Any]:
    """Product fields as the profile's ``[fields]`` read them, normalised like the others."""
    fields: dict[str, Any] = {}
    raw = {name: rule.values(selector) for name, rule in profile.fields.items()}
    currency_text = raw.get("currency", [None])[0] if raw.get("currency") else None
    hint = currency_text or profile.currency
    for name, values in raw.items():
        if not values:
            continue
        first = values[0]
        value: Any
        if name in ("price", "list_price"):
            value = _price(first, hint)
            if value is None:
                errors.append(f"profile field {name}: no price in {first[:80]!r}")
        elif name == "currency":
            value = normalize_currency(first) or parse_price(first)[1]
            if value is None:
                errors.append(f"profile field currency: no currency in {first[:80]!r}")
        elif name == "availability":
            value = normalize_availability(first)
            if value is None:
                errors.append(f"profile field availability: {first[:80]!r} not recognised")
        elif name == "description":
            value = " ".join(values)
        elif name == "category_path":
            value = values
        elif name == "image_urls":
            value = list(dict.fromkeys(join_url(url, v) for v in values))
        else:
            value = first
        if value not in (None, "", []):
            fields[name] = value
    if "price" in fields and "currency" not in fields:
        currency = parse_price(raw["price"][0], hint)[1]
        if currency:
            fields["currency"] = currency
    return fields


def _price(text: str, hint: str | None) -> Decimal | None:
    if _PLAIN_NUMBER.fullmatch(text):
        return parse_structured_price(text)
    return parse_price(text, hint)[0]


def prefer_printed_code(
    root: HtmlElement,
    cards: Callable[[], set[HtmlElement]],
    text: str,
    quoted: list[str],
    product: dict[str, Any],
    sources: dict[str, str],
    heuristic: HeuristicProduct,
) -> None:
    """The code the page shows as its product code over a structured-data ``sku`` that the
    page never shows: shops put internal ids (a catalogue key, a variant's id) in their
    markup and print the code their customers quote, in an element marked as a code, or,
    for an sku shaped like an internal id (a number, a hex digest, a UUID), beside a label
    under the product's title (SKU, item number, model ...)."""
    where = heuristic.where
    structured_sku = str(product["sku"])
    shown: bool | None = None
    printed = printed_code(root, cards, text, quoted)
    if printed is not None and printed[0] != structured_sku:
        code, el = printed
        if not (shown := _shows(root, structured_sku)):
            marked = "itemprop=sku" if el.get("itemprop") == "sku" else f"class={el.get('class')!r}"
            where["sku"] = (
                f"<{el.tag} {marked}> (overruled {sources['sku']} sku {structured_sku!r}:"
                " not shown on the page)"
            )
            product["sku"], sources["sku"] = code, "heuristics"
            return
    if printed is not None or shown or not _INTERNAL_ID.fullmatch(structured_sku):
        return
    heading = heuristic.heading if heuristic.heading is not None else next(root.iter("h1"), None)
    block = _title_block(heading) if heuristic.pairs is None else None
    if block is None and heuristic.pairs is None:
        return
    labelled = labelled_code(root, cards, heuristic, block)
    if labelled is None or labelled[0] == structured_sku or _shows(root, structured_sku):
        return
    code, pair = labelled
    where["sku"] = (
        f"label {pair.shape} {pair.label!r}: {pair.value[:60]!r} (overruled {sources['sku']}"
        f" sku {structured_sku!r}: not shown on the page)"
    )
    product["sku"], sources["sku"] = code, "heuristics"


def _title_block(heading: HtmlElement | None) -> HtmlElement | None:
    """The block a product's heading opens, where shops print its code under the title: the
    heading's parent, or the block above when the parent wraps the heading alone."""
    if heading is None:
        return None
    block = heading
    for _ in range(_TITLE_BLOCK_DEPTH):
        parent = block.getparent()
        if parent is None or parent.tag in ("body", "html"):
            break
        block = parent
        if len(block) > 2:
            break
    return None if block is heading else block


def _shows(root: HtmlElement, value: str) -> bool:
    """Whether a text of the page's body outside scripts and styles contains *value*."""
    found = root.xpath(
        "boolean(//body//text()[contains(., $v)][not(ancestor::script or ancestor::style)])",
        v=value,
    )
    return bool(found)
