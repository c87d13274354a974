"""Availability: schema.org URLs, plain words and common variants to one ItemAvailability name.

Exact schema.org values (``https://schema.org/SoldOut``, ``schema:InStock``, ``instock``)
keep their own name; free text is mapped to the main ones, negative phrases first so that
"not available" never reads as "available". "Only 3 left", "Low stock" and the like say the
product is in stock (a shop that means schema.org's ``LimitedAvailability`` says that name).
:func:`stock_line` tells a line that says only the stock ("Out of stock", "Only 3 left")
from any text that merely contains such words.
"""

from __future__ import annotations

import re
from functools import lru_cache

__all__ = [
    "MAX_STOCK_LINE",
    "SCHEMA_AVAILABILITY",
    "normalize_availability",
    "out_of_stock_wording",
    "stock_line",
]

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

#: free-text patterns in the order they are tried; the first match wins. They are lower
#: case and matched against the lowered text: a case-blind search of these alternations
#: costs the regex engine several times more
_PHRASES: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (name, re.compile(pattern))
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
            r"|ausverkauft|nicht (?:verf[üu]gbar|lieferbar|auf lager|vorr[äa]tig)|vergriffen"
            r"|[ée]puis[ée]|rupture|indisponible|non disponible|agotado|no disponible"
            r"|sin (?:stock|existencias)|esaurito|non disponibile|uitverkocht"
            r"|niet (?:op voorraad|leverbaar|beschikbaar)|brak w magazynie|niedost[ęe]pny"
            r"|нет в наличии|распродано|缺貨|售完|在庫切れ|品切れ|売り切れ",
        ),
        (
            # few left: the shop sells it now (schema.org's LimitedAvailability only when the
            # shop says that name itself)
            "InStock",
            r"\bonly \d+ (?:left|in stock|available)|few left|low[\s_-]?stock|limited"
            r"|last (?:items?|pieces?|one)|nur noch \d+|almost gone",
        ),
        ("OnlineOnly", r"online only"),
        (
            "InStock",
            r"in[\s_-]?stock|available|ready to ship|ships? (?:today|tomorrow|now|in \d)"
            r"|add to (?:cart|basket|bag)|auf lager|lieferbar|verf[üu]gbar|vorr[äa]tig|en stock"
            r"|disponible|disponibile|en existencia|in magazzino|op voorraad|leverbaar"
            r"|dost[ęe]pny|w magazynie|в наличии|有貨|現貨|在庫あり|\d+ (?:left|in stock)",
        ),
    )
)

#: the group of the phrases that say few are left, read as in stock
_FEW_LEFT = "FewLeft"
#: per availability, the phrases a shop prints as a whole line or badge about stock, in the
#: usual languages (lower case: the line is lowered before it is matched)
_STOCK_PHRASES: tuple[tuple[str, str], ...] = (
    (
        "OutOfStock",
        r"(?:currently |temporarily |sadly )?(?:out[ -]of[ -]stock|sold[ -]out|unavailable"
        r"|not available|not in stock|no stock|none left)(?: online| in store)?"
        r"|ausverkauft|vergriffen|(?:derzeit |zurzeit |momentan )?nicht (?:verf[üu]gbar"
        r"|lieferbar|auf lager|vorr[äa]tig)|(?:en |temporairement en )?rupture(?: de stock)?"
        r"|[ée]puis[ée]|(?:temporairement )?indisponible|(?:produit )?non disponible|agotado"
        r"|sin (?:stock|existencias)|no disponible|esaurito|non disponibile|uitverkocht"
        r"|niet (?:op voorraad|leverbaar|beschikbaar)|brak w magazynie|niedost[ęe]pny"
        r"|wyprzedany|нет в наличии|распродано|缺貨|售完|已售完|在庫切れ|品切れ|売り切れ",
    ),
    (
        "InStock",
        r"in[ -]stock(?: online| now)?|available(?: now| online)?|ready to ship"
        r"|ships? (?:today|tomorrow|now)|(?:sofort )?(?:auf lager|lieferbar|verf[üu]gbar"
        r"|vorr[äa]tig)|en stock|disponible(?: en stock)?|en existencia|disponibile"
        r"|in magazzino|op voorraad|leverbaar|dost[ęe]pny|w magazynie|(?:есть )?в наличии"
        r"|有貨|現貨|在庫あり",
    ),
    (
        _FEW_LEFT,
        r"only \d+ left(?: in stock)?|\d+ left(?: in stock)?|few left|low stock|limited stock"
        r"|almost gone|nur noch \d+(?: (?:st[üu]ck|auf lager|verf[üu]gbar|vorr[äa]tig))?"
        r"|plus que \d+(?: en stock)?",
    ),
    ("PreOrder", r"pre[ -]?order(?: now)?|available (?:for|on) pre[ -]?order|vorbestellbar"
                 r"|pr[ée][ -]?commande"),
    ("BackOrder", r"back[ -]?order(?:ed)?|on back[ -]?order"),
    ("Discontinued", r"discontinued|no longer available"),
)  # fmt: skip
#: a count instead of the phrase: "(22 available)", "3 in stock", "0 left"
_STOCK_COUNT = (
    r"\(?\s*(?P<count>\d+)\s*(?:available|in stock|left|disponibles?|en stock|auf lager"
    r"|verf[üu]gbar)\s*\)?"
)
#: a count beside the phrase, which says the availability: "In stock (3 items)"
_COUNT_BESIDE = (
    r"\(?\s*\d+\s*(?:available|in stock|left|items?|units?|pcs|st[üu]ck|disponibles?"
    r"|en stock|auf lager|verf[üu]gbar)\s*\)?"
)


#: a whole short text that says the stock and nothing else (icons and punctuation aside);
#: the group that matched names the availability
def _spaced(pattern: str) -> str:
    """*pattern* with its spaces matching any run of white space (a line as printed)."""
    return pattern.replace("[ -]", "(?:\\s+|-)").replace(" ", r"\s+")


_STOCK_LINE = re.compile(
    r"[^\w(]*(?:(?:"
    + "|".join(f"(?P<{name}>{_spaced(pattern)})" for name, pattern in _STOCK_PHRASES)
    + r")(?:\s*[-\u2013,:]?\s*"
    + _COUNT_BESIDE
    + ")?|"
    + _STOCK_COUNT
    + r")[\s.!]*"
)
#: texts longer than this are sentences, not a stock line
MAX_STOCK_LINE = 60
#: words that say the product cannot be bought now, wherever they sit in the product's block
#: ("unavailable" alone is not: "the in-store check is temporarily unavailable")
_OUT_OF_STOCK_WORDING = re.compile(
    r"\b(?:out[ -]of[ -]stock|sold[ -]out|ausverkauft|nicht (?:auf lager|vorr[äa]tig)|vergriffen"
    r"|rupture de stock|[ée]puis[ée]|agotado|sin stock|esaurito|uitverkocht|niet op voorraad"
    r"|brak w magazynie|нет в наличии)\b|缺貨|在庫切れ|品切れ|売り切れ",
    re.IGNORECASE,
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
    if len(value) > _CACHED_TEXT_LENGTH:
        return _text_availability(value)
    return _cached_text_availability(value)


#: distinct short texts whose reading is remembered: a shop's pages repeat their template's
#: texts ("In stock", "Add to basket"), and the phrase search is the costly part
_CACHED_TEXTS = 8192
#: texts longer than this are read each time (the cache's memory stays small)
_CACHED_TEXT_LENGTH = 1000


def _text_availability(value: str) -> str | None:
    text = " ".join(value.split())[:300]
    if not text:
        return None
    bare = _SCHEMA_PREFIX.sub("", text).strip().strip("/")
    # only a bare token is a schema.org name: "SoldOut" stays SoldOut, "Sold out" is text
    exact = SCHEMA_AVAILABILITY.get(bare.lower())
    if exact is not None:
        return exact
    lowered = text.lower()
    for name, pattern in _PHRASES:
        if pattern.search(lowered):
            return name
    return None


_cached_text_availability = lru_cache(maxsize=_CACHED_TEXTS)(_text_availability)


def stock_line(text: str) -> str | None:
    """The availability a short line or badge says when that is all it says ("Out of stock",
    "Only 3 left!", "In stock (22 available)", "Ausverkauft"), else None ("Available in 3
    colours" is a sentence about something else)."""
    if len(text) > _CACHED_TEXT_LENGTH:
        text = text.strip()
        if len(text) > 4 * MAX_STOCK_LINE:
            return None  # longer than any line, however indented
    return _stock_line(text)


@lru_cache(maxsize=_CACHED_TEXTS)
def _stock_line(text: str) -> str | None:
    text = text.strip()
    if len(text) > MAX_STOCK_LINE:
        if len(text) > 4 * MAX_STOCK_LINE:
            return None
        text = " ".join(text.split())  # a line indented by its markup is still short
        if len(text) > MAX_STOCK_LINE:
            return None
    if not text:
        return None
    match = _STOCK_LINE.fullmatch(text.lower())
    if match is None:
        return None
    if match.lastgroup == "count":  # a count alone: "(3 available)", "0 left"
        return "OutOfStock" if int(match["count"]) == 0 else "InStock"
    return "InStock" if match.lastgroup == _FEW_LEFT else match.lastgroup


def out_of_stock_wording(text: str) -> str | None:
    """The first words of *text* that say the product cannot be bought now, or None."""
    match = _OUT_OF_STOCK_WORDING.search(text)
    return match.group(0) if match else None
