"""Availability: schema.org URLs, plain words and common variants to one ItemAvailability name.

Exact schema.org values (``https://schema.org/SoldOut``, ``schema:InStock``, ``instock``)
keep their own name; free text is mapped to the main ones, negative phrases first so that
"not available" never reads as "available".
"""

from __future__ import annotations

import re

__all__ = ["SCHEMA_AVAILABILITY", "normalize_availability"]

#: every schema.org ItemAvailability name, keyed by its lower-case form
SCHEMA_AVAILABILITY: dict[str, str] = {
    name.lower(): name
    for name in (
        "InStock",
        "OutOfStock",
        "PreOrder",
        "PreSale",
        "BackOrder",
        "Discontinued",
        "LimitedAvailability",
        "SoldOut",
        "InStoreOnly",
        "OnlineOnly",
        "MadeToOrder",
        "Reserved",
    )
}

#: free-text patterns in the order they are tried; the first match wins
_PHRASES: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (name, re.compile(pattern, re.IGNORECASE))
    for name, pattern in (
        ("Discontinued", r"discontinued|no longer (?:available|sold|produced)|end of life"),
        ("PreOrder", r"pre[\s_-]?order|pre[\s_-]?sale|vorbestell|pr[ée][\s_-]?commande|reserva"),
        ("BackOrder", r"back[\s_-]?order|on order|nachbestell"),
        ("MadeToOrder", r"made[\s_-]to[\s_-]order|built to order"),
        ("InStoreOnly", r"in[\s_-]store only|only in store"),
        (
            "OutOfStock",
            r"out[\s_-]?of[\s_-]?stock|sold[\s_-]?out|unavailable|not available|not in stock"
            r"|no stock|none left|(?<![\d.,])\b0 (?:in stock|left|available)|currently not"
            r"|ausverkauft|nicht (?:verf[üu]gbar|lieferbar|auf lager)|vergriffen"
            r"|[ée]puis[ée]|rupture|indisponible|agotado|esaurito|non disponibile",
        ),
        (
            "LimitedAvailability",
            r"\bonly \d+ (?:left|in stock|available)|few left|low[\s_-]?stock|limited"
            r"|last (?:items?|pieces?|one)|nur noch \d+|almost gone",
        ),
        ("OnlineOnly", r"online only"),
        (
            "InStock",
            r"in[\s_-]?stock|available|ready to ship|ships? (?:today|tomorrow|now|in \d)"
            r"|add to (?:cart|basket|bag)|auf lager|lieferbar|verf[üu]gbar|en stock"
            r"|disponible|disponibile|\d+ (?:left|in stock)",
        ),
    )
)

_SCHEMA_PREFIX = re.compile(r"^(?:https?://)?(?:www\.)?schema\.org/|^schema:", re.IGNORECASE)


def normalize_availability(value: object) -> str | None:
    """schema.org ItemAvailability name (``InStock``, ``OutOfStock``, ...) for *value*, or None.

    Accepts schema.org URLs, bare names in any case, booleans (an "in stock" flag in
    embedded script data) and visible text such as "Only 3 left!" or "Ausverkauft".
    """
    if isinstance(value, bool):
        return "InStock" if value else "OutOfStock"
    if isinstance(value, list) and value:
        return normalize_availability(value[0])
    if not isinstance(value, str):
        return None
    text = " ".join(value.split())[:300]
    if not text:
        return None
    bare = _SCHEMA_PREFIX.sub("", text).strip().strip("/")
    # only a bare token is a schema.org name: "SoldOut" stays SoldOut, "Sold out" is text
    exact = SCHEMA_AVAILABILITY.get(bare.lower())
    if exact is not None:
        return exact
    for name, pattern in _PHRASES:
        if pattern.search(text):
            return name
    return None
