"""Prices and currencies: text or structured values to a :class:`~decimal.Decimal` and an ISO code.

Parsing is price-parser's (Zyte); this module only adds what it leaves to the caller: one
ISO 4217 code for a symbol such as ``€`` or ``US$``, and the rule that a structured-data
value (``"12.99"``, ``12.99``) always uses a dot as its decimal separator.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

from price_parser import Price
from price_parser._currencies import CURRENCIES

__all__ = [
    "DEFAULT_SYMBOL_CURRENCIES",
    "normalize_currency",
    "parse_price",
    "parse_structured_price",
]

#: symbols that several currencies share, resolved to the one a shop most likely means;
#: a page's own ISO code (priceCurrency, a profile's ``currency``) always wins over these
DEFAULT_SYMBOL_CURRENCIES: dict[str, str] = {
    "$": "USD",
    "US$": "USD",
    "USD$": "USD",
    "€": "EUR",
    "EURO": "EUR",
    "EUROS": "EUR",
    "£": "GBP",
    "¥": "JPY",
    "円": "JPY",
    "元": "CNY",
    "₹": "INR",
    "RS": "INR",
    "RS.": "INR",
    "C$": "CAD",
    "CA$": "CAD",
    "CAN$": "CAD",
    "A$": "AUD",
    "AU$": "AUD",
    "NZ$": "NZD",
    "HK$": "HKD",
    "S$": "SGD",
    "R$": "BRL",
    "MX$": "MXN",
    "₽": "RUB",
    "РУБ": "RUB",
    "РУБ.": "RUB",
    "ZŁ": "PLN",
    "KČ": "CZK",
    "FT": "HUF",
    "LEI": "RON",
    "₺": "TRY",
    "₩": "KRW",
    "₪": "ILS",
    "฿": "THB",
    "₫": "VND",
    "₱": "PHP",
    "₴": "UAH",
    "CHF": "CHF",
    "FR.": "CHF",
    "SFR.": "CHF",
    "KR": "SEK",
    "KR.": "DKK",
    "R": "ZAR",
}

_ISO_CODE = re.compile(r"^[A-Z]{3}$")
_CODE_TOKEN = re.compile(r"\b[A-Z]{3}\b")
_PLAIN_DECIMAL = re.compile(r"^[+]?\d+(?:\.\d+)?$")


def _symbols_with_one_currency() -> dict[str, str]:
    """Symbols price-parser knows that belong to exactly one currency."""
    owners: dict[str, set[str]] = {}
    for code, info in CURRENCIES.items():
        symbols = {info.get("s", ""), info.get("sn", ""), *info.get("sn2", [])}
        for symbol in symbols:
            if symbol:
                owners.setdefault(symbol.upper(), set()).add(code)
    return {symbol: codes.pop() for symbol, codes in owners.items() if len(codes) == 1}


_UNIQUE_SYMBOLS = _symbols_with_one_currency()


def normalize_currency(value: object) -> str | None:
    """ISO 4217 code for a code or symbol (``"eur"``, ``"€"``, ``"US$"``), else None."""
    if not isinstance(value, str):
        return None
    text = value.strip().upper()
    if not text:
        return None
    if _ISO_CODE.match(text) and text in CURRENCIES:
        return text
    if text in DEFAULT_SYMBOL_CURRENCIES:
        return DEFAULT_SYMBOL_CURRENCIES[text]
    if text in _UNIQUE_SYMBOLS:
        return _UNIQUE_SYMBOLS[text]
    # a code inside a longer label ("Currency: EUR"); never guess from arbitrary words
    for token in _CODE_TOKEN.findall(text):
        if token in CURRENCIES:
            return str(token)
    return None


def parse_price(
    text: object, currency_hint: str | None = None
) -> tuple[Decimal | None, str | None]:
    """Amount and ISO currency from visible price text such as ``"€12,99"`` or ``"1.299,00 kr"``.

    The decimal separator is guessed by price-parser; *currency_hint* (an ISO code or symbol
    found elsewhere on the page) is used when the text itself names no currency.
    """
    if isinstance(text, int | float | Decimal) and not isinstance(text, bool):
        return parse_structured_price(text), normalize_currency(currency_hint)
    if not isinstance(text, str) or not text.strip():
        return None, normalize_currency(currency_hint)
    try:
        price = Price.fromstring(text[:200], currency_hint=currency_hint)
    except Exception:  # price-parser has no documented exceptions; garbage must not escape
        return None, normalize_currency(currency_hint)
    currency = normalize_currency(price.currency) or normalize_currency(currency_hint)
    return _finite(price.amount), currency


def parse_structured_price(value: object) -> Decimal | None:
    """Amount from a structured-data value, where schema.org says ``.`` is the decimal mark.

    Plain numbers are taken as they are; anything else (``"1,299.00"``, ``"12,99 €"``) goes
    through price-parser's separator guess.
    """
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float | Decimal):
        text = str(value)
    elif isinstance(value, str):
        text = value.strip()
    else:
        return None
    if text.startswith("-"):
        return None  # price-parser drops the sign; a negative price is no price
    if _PLAIN_DECIMAL.match(text):
        try:
            return _finite(Decimal(text))
        except InvalidOperation:
            return None
    amount, _ = parse_price(text)
    return amount


def _finite(amount: Decimal | None) -> Decimal | None:
    if amount is None or not amount.is_finite() or amount < 0:
        return None
    return amount
