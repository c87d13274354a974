"""Product codes: a GTIN is stored only when it is one, digits and check digit.

GTIN-8, GTIN-12 (UPC-A), GTIN-13 (EAN, ISBN-13) and GTIN-14 share one check digit rule
(weights 3 and 1 from the right); an ISBN-10 has its own (weights 10 down to 1, mod 11, ``X``
for 10). A value is read as a GTIN only when the whole of it is the code: digits, with at most
spaces or hyphens between groups ("978-3-16-148410-0", "4 006381 333931"). The digits of any
other text are never strung together into one: "bfd5e1701c862ac3" is no GTIN, whatever its
label says, and stays the shop's own code as printed.
"""

from __future__ import annotations

import re

__all__ = ["gtin_kind", "valid_gtin"]

#: the whole value: digit groups with single spaces or hyphens between them (ISBN-10: X last)
_GROUPED = re.compile(r"\d+(?:[ -]?\d+)*(?:[ -]?[Xx])?")
#: GTIN kinds by length (13 digits starting 978/979 are ISBN-13)
_GTIN_LENGTHS = {8: "GTIN-8", 12: "GTIN-12", 13: "GTIN-13", 14: "GTIN-14"}


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
