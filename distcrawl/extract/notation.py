"""A shop's notation of amounts, decided from the whole page, not from one string.

"229.990" is 229.99 in dinars (three decimals) and 229,990 in pesos (none); "1.299" is
1,299 on a German page and open on an English one. Most printed prices say their own
reading ("12,99", "1.299,00", "1,299.00"); only an amount with a single separator followed
by exactly three digits ("1.299", "24,990") does not. For those, in this order:

1. the currency's decimals in practice: none (CLP, COP, JPY, KRW, IDR, HUF, ...) make the
   separator a thousands separator, three (KWD, BHD, OMR, JOD, TND, ...) a decimal mark;
2. the page's other prices that say their decimal mark ("12,99 €" on the same page): a
   separator that is not it groups thousands;
3. the page's language (``<html lang>``, ``og:locale``, ``content-language``): a dot on a
   page in a language that writes decimal commas groups thousands, and the other way round.

An amount none of them decides is *ambiguous*: stored with a flag (``price_ambiguous``, the
amount as printed) and no price, rather than guessed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING

from .prices import normalize_currency, parse_price

if TYPE_CHECKING:
    from lxml.html import HtmlElement

__all__ = [
    "AMBIGUOUS",
    "AMBIGUOUS_PRICE",
    "NO_DECIMALS",
    "THREE_DECIMALS",
    "Notation",
    "decimals_in_practice",
    "grouped_amount",
]

#: the product field of a price whose notation the page leaves open: the price as printed
#: (the product's ``price`` is then empty)
AMBIGUOUS_PRICE = "price_ambiguous"
#: what :meth:`Notation.read` says of an amount the page leaves open
AMBIGUOUS = "ambiguous"
#: currencies whose prices are printed without decimals, in practice (whatever ISO 4217's
#: minor unit says: Indonesian and Hungarian shops print none either)
NO_DECIMALS: frozenset[str] = frozenset(
    {"BIF", "CLP", "COP", "DJF", "GNF", "HUF", "IDR", "IQD", "IRR", "ISK", "JPY", "KMF",
     "KRW", "LAK", "MMK", "PYG", "RWF", "UGX", "VND", "VUV", "XAF", "XOF", "XPF", "KHR"}
)  # fmt: skip
#: currencies with three decimals (a "fils" or "millime" is a thousandth)
THREE_DECIMALS: frozenset[str] = frozenset({"BHD", "JOD", "KWD", "LYD", "OMR", "TND"})
#: languages whose decimal mark is a comma (the first subtag of a language tag)
_COMMA_LANGUAGES = frozenset(
    {"az", "be", "bg", "bs", "ca", "cs", "da", "de", "el", "et", "eu", "fi", "fo", "fr",
     "gl", "hr", "hu", "hy", "id", "is", "it", "ka", "kk", "ky", "lt", "lv", "mk", "nb", "nl",
     "nn", "no", "pl", "pt", "ro", "ru", "sk", "sl", "sq", "sr", "sv", "tr", "uk", "uz", "vi"}
)  # fmt: skip
#: languages whose decimal mark is a dot
_DOT_LANGUAGES = frozenset(
    {"en", "ja", "zh", "ko", "th", "he", "hi", "ms", "tl", "fil", "ga", "mt", "bn", "ta",
     "te", "ur", "my", "km", "lo", "si", "ne", "mn"}
)  # fmt: skip
#: regions whose Spanish writes a decimal dot (Mexico, Central America, the US, ...; the
#: others write a comma)
_DOT_SPANISH = frozenset({"mx", "us", "gt", "hn", "ni", "sv", "pa", "do", "pr", "pe", "cu"})
#: an amount whose one separator is followed by exactly three digits: "1.299", "24,990"
_GROUPED = re.compile(r"(?<![\d.,])(\d{1,3})([.,])(\d{3})(?![\d.,])")
#: an amount that says its decimal mark: "1.299,00", "1,299.00", "12,99", "12.5"
_SAYS_DECIMAL = re.compile(
    r"(?<![\d.,])\d{1,3}(?:([.,\u00a0 '])\d{3})*([.,])\d{1,2}(?![\d])"
    r"|(?<![\d.,])\d+([.,])\d{1,2}(?![\d.,])"
)
#: a price in the page's text: an amount beside a currency sign or code
_SIGN = r"(?:[$€£¥₹₽₩₺₪₫]|\b(?:[A-Z]{3}|kr|zł|Kč|Ft|lei|Rs|\u0440\u0443\u0431)\b\.?)"
_SIGNED_AMOUNT = re.compile(f"{_SIGN}\\s?\\d[\\d.,]*\\d|\\d[\\d.,]*\\d\\s?{_SIGN}")
#: the page's source read for its other prices, at most
_MAX_SOURCE = 400_000


def decimals_in_practice(currency: str | None) -> int | None:
    """0 or 3 for a currency printed with no or three decimals; None for the others."""
    if currency in NO_DECIMALS:
        return 0
    if currency in THREE_DECIMALS:
        return 3
    return None


def grouped_amount(text: str) -> re.Match[str] | None:
    """The amount of *text* that does not say its reading ("1.299", "24,990"), if any."""
    return _GROUPED.search(text)


@dataclass
class Notation:
    """What one page says of its notation; the language and the other prices are looked up
    only when an amount needs them."""

    root: HtmlElement | None = None
    #: the page's source, where its other prices are read
    source: str = ""
    _language: tuple[str, str] | None = field(default=None, repr=False)
    _decimal: str | None = field(default=None, repr=False)
    _looked: bool = field(default=False, repr=False)

    def read(self, text: str, hint: str | None = None) -> tuple[Decimal | None, str | None, str]:
        """(amount, currency, why) of a printed price. The amount is None with a *why* of
        ``"ambiguous"`` when nothing on the page decides an amount like "1.299"."""
        amount, currency = parse_price(text, hint)
        grouped = grouped_amount(text) if amount is not None else None
        if grouped is None:
            return amount, currency, ""
        separator = grouped.group(2)
        decimal, why = self.decimal_mark(currency, separator)
        if decimal is None:
            return None, currency, AMBIGUOUS
        whole, part = grouped.group(1), grouped.group(3)
        value = f"{whole}.{part}" if decimal == separator else f"{whole}{part}"
        try:
            return Decimal(value), currency, why
        except InvalidOperation:  # pragma: no cover - the pattern holds digits only
            return None, currency, AMBIGUOUS

    def decimal_mark(self, currency: str | None, separator: str) -> tuple[str | None, str]:
        """The decimal mark an amount with *separator* before three digits has on this page,
        and what said it; None when nothing does."""
        places = decimals_in_practice(normalize_currency(currency))
        if places == 0:
            return _other(separator), f"{currency} is printed without decimals"
        if places == 3:
            return separator, f"{currency} has three decimals"
        decimal = self.page_decimal()
        if decimal is not None and decimal != separator:
            return decimal, f"the page's other prices write {decimal!r} as their decimal mark"
        language, region = self.language()
        if language == "es":
            decimal = "." if region in _DOT_SPANISH else ","
        elif language in _COMMA_LANGUAGES:
            decimal = ","
        elif language in _DOT_LANGUAGES:
            decimal = "."
        else:
            return None, ""
        if decimal != separator:
            return decimal, f"the page's language ({language}) writes {decimal!r} as decimal mark"
        return None, ""

    def page_decimal(self) -> str | None:
        """The decimal mark the page's prices say, when they agree; None otherwise."""
        if not self._looked:
            self._looked = True
            votes = {".": 0, ",": 0}
            for printed in _SIGNED_AMOUNT.findall(self.source[:_MAX_SOURCE]):
                match = _SAYS_DECIMAL.search(printed)
                if match is not None:
                    mark = match.group(2) or match.group(3)
                    if mark in votes:
                        votes[mark] += 1
            if votes["."] != votes[","]:
                self._decimal = "." if votes["."] > votes[","] else ","
                if min(votes.values()) * 4 > max(votes.values()):
                    self._decimal = None  # the page's prices disagree
        return self._decimal

    def language(self) -> tuple[str, str]:
        """The page's language and region subtags, lower case ("" when it names none)."""
        if self._language is None:
            tag = ""
            if self.root is not None:
                tag = str(self.root.get("lang") or self.root.get("xml:lang") or "")
                if not tag:
                    for meta in self.root.iter("meta"):
                        name = (meta.get("property") or meta.get("http-equiv") or "").lower()
                        if name in ("og:locale", "content-language") and meta.get("content"):
                            tag = str(meta.get("content"))
                            break
            parts = re.split(r"[-_]", tag.strip().lower(), maxsplit=1)
            self._language = (parts[0], parts[1][:2] if len(parts) > 1 else "")
        return self._language


def _other(separator: str) -> str:
    return "," if separator == "." else "."
