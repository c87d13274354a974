"""Checks of a finished crawl against the demo shop's ground truth and its request log."""

from __future__ import annotations

from collections import defaultdict
from decimal import Decimal
from itertools import pairwise
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from distcrawl.demo import bootstrap, crowded, templates
from distcrawl.ops.deadletters import read_record, reason_of

if TYPE_CHECKING:
    from collections.abc import Mapping

    from distcrawl.demo.catalog import Catalog, Product

__all__ = [
    "CHECKED_FIELDS",
    "account_dead_letters",
    "attempts_by_path",
    "check_fields",
    "check_store",
    "expected_fields",
    "retry_gap_violations",
]

#: the product fields a demo crawl compares with the catalog (``fields_wrong``)
CHECKED_FIELDS = (
    "name",
    "price",
    "currency",
    "list_price",
    "sku",
    "availability",
    "description",
)
#: variants that print the description as an untitled paragraph: nothing says it is one, so
#: it is not compared there
UNTITLED_DESCRIPTION = frozenset({"specs", "text"})


def expected_fields(product: Product, variant: str = "jsonld") -> dict[str, Any]:
    """What a crawl must store for *product* from the pages of *variant*."""
    if variant == bootstrap.VARIANT:
        want = bootstrap.truth(product)
    elif variant in crowded.VARIANTS:
        want = crowded.truth(product)
    else:
        was = templates.list_price(product) if variant == "text" else None
        want = {
            "name": product.name,
            "price": product.price,
            "currency": product.currency,
            "list_price": Decimal(was) if was else None,
            "sku": product.sku,
            "availability": product.availability,
            "description": product.description,
        }
    want["price"] = Decimal(want["price"])
    want.setdefault("list_price", None)  # no was price on the page
    if variant in UNTITLED_DESCRIPTION:
        del want["description"]
    return want


def check_store(collection: Any, expected: set[str]) -> dict[str, Any]:
    """Compare the products stored in a MongoDB collection with the shop's ground truth."""
    urls = [doc["url"] for doc in collection.find({}, {"url": 1, "_id": 0})]
    stored = set(urls)
    return {
        "expected": len(expected),
        "stored": len(stored & expected),
        "documents": len(urls),
        "duplicates": len(urls) - len(stored),
        "missing": len(expected - stored),
        "lost": len(expected - stored),
        "unexpected": len(stored - expected),
        "missing_sample": sorted(expected - stored)[:5],
        "unexpected_sample": sorted(stored - expected)[:5],
    }


def _bare(url: str) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))


def account_dead_letters(
    missing: set[str], records: list[bytes | str], expected: set[str]
) -> dict[str, Any]:
    """Tell the *missing* products (expected, not stored) apart: dead-lettered (the site failed
    them on every try; an operator can re-queue them), behind a dead-lettered category or
    listing page (never found), and truly lost (none of those: a bug).

    *records* are the crawl's dead letters (JSON values of ``{catalog}:dead``). Returns
    ``dead_letters``, ``dead_letter_reasons``, ``dead_lettered``, ``behind_dead_letters`` and
    ``lost``.
    """
    letters = [read_record(raw) for raw in records]
    reasons: dict[str, int] = defaultdict(int)
    for letter in letters:
        reasons[reason_of(letter)] += 1
    dead_urls = {_bare(str(letter.get("url", ""))) for letter in letters}
    product_urls = {_bare(u) for u in expected}
    dead_products = {u for u in missing if _bare(u) in dead_urls}
    other_pages = dead_urls - product_urls
    not_dead = len(missing) - len(dead_products)
    behind = not_dead if other_pages else 0
    return {
        "dead_letters": len(letters),
        "dead_letter_reasons": dict(sorted(reasons.items())),
        "dead_lettered": len(dead_products),
        "behind_dead_letters": behind,
        "lost": not_dead - behind,
    }


def check_fields(
    collection: Any,
    catalog: Catalog,
    base_url: str,
    variant: str = "jsonld",
    absent: Mapping[str, set[str]] | None = None,
) -> dict[str, Any]:
    """Stored products' name, price, currency, list price, SKU, availability and description
    against what the shop's pages of *variant* show (:func:`expected_fields`); *absent*:
    product URL -> fields its page no longer showed (an incident: they must be stored without
    them).

    ``fields_wrong`` counts (product, field) pairs that differ; products not stored are
    ``missing`` in :func:`check_store`, not wrong here. ``fields_absent`` lists, by field,
    the products stored without a field as *absent* says they must be.
    """
    truth = {base_url.rstrip("/") + p.path: p for p in catalog.products()}
    wrong: dict[str, int] = dict.fromkeys(CHECKED_FIELDS, 0)
    sample: list[dict[str, Any]] = []
    found_absent: dict[str, list[str]] = {}
    for doc in collection.find({}, {"_id": 0, "url": 1, **dict.fromkeys(CHECKED_FIELDS, 1)}):
        product = truth.get(doc.get("url"))
        if product is None:
            continue
        gone = (absent or {}).get(doc["url"], set())
        for name, want in expected_fields(product, variant).items():
            if name in gone:
                want = None
            got = doc.get(name)
            if name in gone and got is None:
                found_absent.setdefault(name, []).append(doc["url"])
            if hasattr(got, "to_decimal"):
                got = got.to_decimal()
            if got != want:
                wrong[name] += 1
                if len(sample) < 5:
                    sample.append(
                        {"url": doc["url"], "field": name, "got": str(got), "want": str(want)}
                    )
    return {
        "fields_wrong": sum(wrong.values()),
        "fields_wrong_by_field": wrong,
        "fields_wrong_sample": sample,
        "fields_absent": found_absent,
    }


def attempts_by_path(log: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """The shop's request log grouped by path, each in time order."""
    grouped: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for entry in sorted(log, key=lambda e: e["t"]):
        grouped[entry["path"]].append(entry)
    return grouped


def retry_gap_violations(
    log: list[dict[str, Any]], *, base: float, cap: float, retry_statuses: frozenset[int]
) -> list[dict[str, Any]]:
    """Retries that came sooner than the backoff allows: after the n-th failed attempt at a
    URL the next one must wait at least ``min(cap, base * 2**(n-1))`` seconds (Retry-After,
    when honoured, only makes it longer)."""
    bad = []
    for path, attempts in attempts_by_path(log).items():
        for failures, (prev, nxt) in enumerate(pairwise(attempts), start=1):
            if prev["status"] not in retry_statuses:
                break
            minimum = min(cap, base * 2 ** (failures - 1))
            gap = nxt["t"] - prev["t"]
            if gap < minimum:
                bad.append({"path": path, "attempt": failures + 1, "gap": gap, "minimum": minimum})
    return bad
