"""Product codes: a GTIN is stored only when it is one, digits and check digit; an SKU only
when it can be a code at all.

GTIN-8, GTIN-12 (UPC-A), GTIN-13 (EAN, ISBN-13) and GTIN-14 share one check digit rule
(weights 3 and 1 from the right); an ISBN-10 has its own (weights 10 down to 1, mod 11, ``X``
for 10). A value is read as a GTIN only when the whole of it is the code: digits, with at most
spaces or hyphens between groups ("978-3-16-148410-0", "4 006381 333931"). The digits of any
other text are never strung together into one: "bfd5e1701c862ac3" is no GTIN, whatever its
label says, and stays the shop's own code as printed.

An SKU (:func:`valid_code`) is never a price ("US$11.99"), a date, a phone number, a web or
mail address, a placeholder ("N/A", "null") or running text.
"""

from __future__ import annotations

import re
from functools import lru_cache

__all__ = ["code_flaw", "gtin_kind", "valid_code", "valid_gtin"]

#: the whole value: digit groups with single spaces or hyphens between them (ISBN-10: X last)
_GROUPED = re.compile(r"\d+(?:[ -]?\d+)*(?:[ -]?[Xx])?")
#: GTIN kinds by length (13 digits starting 978/979 are ISBN-13)
_GTIN_LENGTHS = {8: "GTIN-8", 12: "GTIN-12", 13: "GTIN-13", 14: "GTIN-14"}


#: a currency sign anywhere, or a currency code beside an amount: a price, not a code
_PRICE = re.compile(
    r"[$€£¥₹₽₩₺₪₫¢]|\b(?:USD|EUR|GBP|CHF|JPY|CAD|AUD|SEK|NOK|DKK|PLN|CZK|INR|BRL|MXN|RUB)\s?\d"
    r"|\d\s?(?:USD|EUR|GBP|CHF|JPY|CAD|AUD|SEK|NOK|DKK|PLN|CZK|INR|BRL|MXN|RUB)\b"
)
#: a date: 2021-03-04, 04/03/2021, 4.3.21, 2021/03/04 (day, month and year in range)
_DATE = re.compile(
    r"(?:19|20)\d\d[-/.](?:0?[1-9]|1[0-2])[-/.](?:0?[1-9]|[12]\d|3[01])(?:[T ].*)?"
    r"|(?:0?[1-9]|[12]\d|3[01])[-/.](?:0?[1-9]|1[0-2])[-/.](?:(?:19|20)\d\d|\d\d)"
    r"|(?:0?[1-9]|1[0-2])/(?:0?[1-9]|[12]\d|3[01])/(?:19|20)\d\d"
)
#: a month's name beside a day or year, or a clock time: running text about a date
_DATE_WORDS = re.compile(
    r"\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?\s+\d|\b\d{1,2}:\d\d\b",
    re.IGNORECASE,
)
#: a phone number: an international prefix, or an area code in brackets
_PHONE = re.compile(r"\+\d[\d\s().-]{6,}\d|\(\d{2,5}\)\s?\d[\d\s-]{4,}\d")
#: a web or mail address
_ADDRESS = re.compile(r"://|^www\.|@\w+\.", re.IGNORECASE)
#: what shops print where they have no code
_PLACEHOLDERS = frozenset(
    {"n/a", "na", "n.a.", "none", "null", "undefined", "nil", "-", "--", "—", "0", "tbd",
     "tba", "unknown", "not available", "not applicable", "keine angabe", "sku", "code"}
)  # fmt: skip
#: one token of letters, digits and separators, starting with a letter or digit (no currency
#: sign, no space, no "@" or "://"), no longer than a code
_TOKEN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_./-]{0,63}")
#: codes whose reading is remembered (a page's code is read by several sources in turn)
_CACHED_CODES = 1024
#: a code is one token or a few; more words are a sentence
_MAX_CODE_WORDS = 3
_MAX_CODE_LENGTH = 64


def code_flaw(value: object) -> str | None:
    """Why *value* cannot be a product code ("a price", "a date", ...), or None when it can."""
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str):
        return "no text"
    return _text_flaw(value)


@lru_cache(maxsize=_CACHED_CODES)
def _text_flaw(value: str) -> str | None:
    text = " ".join(value.split())
    if not text or text.lower() in _PLACEHOLDERS:
        return "a placeholder"
    if _TOKEN.fullmatch(text):
        # one token of letters, digits and - _ . /: most codes; only a date can hide in it
        return "a date" if _DATE.fullmatch(text) else None
    if _PRICE.search(text):
        return "a price"
    if _DATE.fullmatch(text) or _DATE_WORDS.search(text):
        return "a date"
    if _PHONE.fullmatch(text):
        return "a phone number"
    if _ADDRESS.search(text):
        return "an address"
    if len(text) > _MAX_CODE_LENGTH or len(text.split()) > _MAX_CODE_WORDS:
        return "running text"
    if not any(c.isalnum() for c in text):
        return "no letter or digit"
    if " " in text and not any(c.isdigit() for c in text):
        return "running text"
    return None


def valid_code(value: object) -> str | None:
    """*value* as a product code (white space squeezed) when it can be one, else None."""
    if code_flaw(value) is not None:
        return None
    text = str(value)
    return text if _TOKEN.fullmatch(text) else " ".join(text.split())


def _gtin_check_ok(digits: str) -> bool:
    """The GS1 check digit: weights 3, 1, 3, ... from the digit before the check digit."""
    total = sum(int(d) * (3 if i % 2 == 0 else 1) for i, d in enumerate(reversed(digits[:-1])))
    return (10 - total % 10) % 10 == int(digits[-1])


def _isbn10_check_ok(code: str) -> bool:
    """ISBN-10: the sum of each digit times 10, 9, ..., 1 (``X`` is 10) is a multiple of 11."""
    values = [10 if c in "Xx" else int(c) for c in code]
    return sum(v * w for v, w in zip(values, range(10, 0, -1), strict=True)) % 11 == 0


def gtin_kind(value: object) -> str | None:
    """``"GTIN-13"``, ``"ISBN-13"``, ``"ISBN-10"``, ... when *value* is a valid code, else None."""
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str):
        return None
    text = value.strip()
    if not text or len(text) > 24 or not _GROUPED.fullmatch(text):
        return None
    code = text.replace(" ", "").replace("-", "")
    if code.isdigit() and not code.strip("0"):
        return None  # "0000000000000": a placeholder, not a product's code
    if len(code) == 10 and code[:9].isdigit():
        return "ISBN-10" if _isbn10_check_ok(code) else None
    kind = _GTIN_LENGTHS.get(len(code))
    if kind is None or not code.isdigit() or not _gtin_check_ok(code):
        return None
    if kind == "GTIN-13" and code.startswith(("978", "979")):
        return "ISBN-13"
    return kind


def valid_gtin(value: object) -> str | None:
    """The code of *value* without its group separators when it is a valid GTIN-8/12/13/14
    or ISBN-10/13 (``"978-3-16-148410-0"`` -> ``"9783161484100"``), else None."""
    if gtin_kind(value) is None:
        return None
    return str(value).strip().replace(" ", "").replace("-", "").upper()
