"""The role of a printed price, from its neighbourhood: the product's current price, or a
"was" / list price, an instalment, a price per unit, a shipping fee, a saving or a bundle's
price.

A shop says which a price is in the words around it ("Was", "RRP", "4 x", "/mo", "per kg",
"+ shipping", "Save", "Buy all three"), by striking it through, and in its class names
(``old-price``, ``installment``, ``unit-price``). Only a price whose neighbourhood says none
of those is the current price.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lxml.html import HtmlElement

__all__ = [
    "BUNDLE",
    "CURRENT",
    "INSTALMENT",
    "ROLES",
    "SAVING",
    "SHIPPING",
    "UNIT",
    "WAS",
    "element_role",
    "mark_role",
    "priced_text",
    "text_node_role",
    "text_role",
]

CURRENT = "current"
WAS = "was"
INSTALMENT = "instalment"
UNIT = "unit"
SHIPPING = "shipping"
SAVING = "saving"
BUNDLE = "bundle"
#: every role a printed price can have; the product's price is the ``current`` one
ROLES: tuple[str, ...] = (CURRENT, WAS, INSTALMENT, UNIT, SHIPPING, SAVING, BUNDLE)


def _combine(
    head: str, patterns: tuple[tuple[str, str], ...], tail: str, *, hyphens: bool = False
) -> re.Pattern[str]:
    """One pattern of several roles' patterns, each in a group named after its role (which
    group matched says the role); with *hyphens*, a hyphen matches a run of them."""
    groups = []
    for role, pattern in patterns:
        if hyphens:
            pattern = pattern.replace("-?", "\0").replace("-", "-+").replace("\0", "-*")
        groups.append(f"(?P<{role}>{pattern})")
    return re.compile(head + "|".join(groups) + tail)


#: words right before an amount (after any other amount), lower case, per role; a currency
#: sign or code may stand between them and the amount ("Was US$", "RRP £")
_LABEL_BEFORE = _combine(
    "(?:",
    (
        (WAS, r"\b(?:was|were|before(?! tax)|list(?: price)?|rrp|msrp|srp|uvp|reg\.?"
              r"|regular(?: price)?|original(?: price)?|compare(?: at)?(?: price)?"
              r"|retail(?: price)?|old price|typical price|statt|bisher|vorher|früher|ehemals"
              r"|avant|au lieu de|prix barré|antes|precio anterior|invece di|van|przed"
              r"|poprzednio)"),
        (INSTALMENT, r"\bpayments? of|\binstal?lments? of|\bcuotas?(?: sin inter[ée]s)?(?: de)?"
                     r"|\bparcelas? de|\bmensualités? de|\braten? (?:à|a|von|zu)|\brate da"
                     r"|\bmonthly(?: payments?)?(?: of)?|\bper month|\bemi(?: from| of)?"),
        (UNIT, r"\bunit price|\bprice per \w+|\bper unit|\bgrundpreis|\bprix au \w+"
               r"|\bprecio por \w+|\bprezzo al \w+"),
        (SHIPPING, r"\bshipping|\bdelivery|\bpostage|\bp&p|\bversand(?:kosten)?|\blieferung"
                   r"|\blivraison|\benv[ií]o|\bspedizione|\bfrete|\bverzend(?:kosten)?"
                   r"|\bdostawa|\bdoprava|\borders? (?:over|above|from)|\bspend"),
        (SAVING, r"\bsave|\byou save|\bsaving|\bsparen|\bsie sparen|\béconomisez|\bahorra"
                 r"|\bahorro|\brisparmi\w*|\beconomi[sz]e|\bbespaar"),
        (BUNDLE, r"\bbundle(?: price)?|\bbuy (?:both|all(?: \w+)?|together)|\btotal price"
                 r"|\bprice for (?:both|all(?: \w+)?)|\bset price|\bcombo"),
    ),
    r")[^\d\w]*(?:[a-z]{1,3}\W*)?$",
)  # fmt: skip
#: an instalment's count ending the text before its amount ("10x de R$", "4 x $")
_COUNT_BEFORE = re.compile(r"\b\d{1,2}\s*[x\u00d7]\s*(?:de\s+)?[^\d\s]{0,4}\s*$")
#: a multi-buy offer's count before its amount ("2 for $10", "3 für 10 €")
_MULTI_BUY = re.compile(r"\b\d{1,2}\s*(?:for|für|pour|por|per)\s*[^\d\s]{0,4}\s*$")
#: words right after an amount, lower case, per role
_LABEL_AFTER = _combine(
    r"^[\s*()\[\],+]*(?:",
    (
        (INSTALMENT, r"/\s*(?:mo|mon|month|mth|mes|mês|monat|mois|mese|wk|week)\.?"
                     r"|per month|a month|p/m|pm|monthly|x\s*\d{1,2}|\u00d7\s*\d{1,2}"
                     r"|for \d{1,2} months|over \d{1,2} months|al mes|por mes|par mois"
                     r"|pro monat|im monat|al mese|monatlich"),
        (UNIT, r"/\s*(?:\d+\s*)?(?:kg|g|gr|lb|lbs|oz|fl\.? oz|l|ltr|litre|liter|ml|cl|dl|m|m2"
               r"|m²|m³|cm|mm|sq\.? ?ft|ft|count|ct|wash|load)\.?"
               r"|per (?:\d+\s*)?(?:kg|g|lb|oz|l|litre|liter|ml|m|m2|m²|count)"),
        (SHIPPING, r"shipping|delivery|postage|p&p|versand|livraison|env[ií]o|spedizione"
                   r"|frete|verzending"),
        (SAVING, r"off|discount|rabatt"),
    ),
    r")(?!\w)",
)  # fmt: skip
#: class and id words per role, in marks lowered with their words joined by single hyphens
#: ("price--old", "oldPrice" and "price_old" all read "price-old")
_MARKS = _combine(
    "",
    (
        (WAS, r"\b(?:(?:old|was|list|regular|compare(?:-at)?|original|before|former|previous"
              r"|retail|non-sale|crossed|normal)-?price|price-?(?:old|was|list|regular|compare"
              r"|original|before|former|previous|retail|non-sale|crossed)|rrp|msrp|uvp|srp"
              r"|strike|striked|strikethrough|struck|line-through|crossed-out)\b"),
        (INSTALMENT, r"\b(?:instal?l?ments?|monthly|financ(?:e|ing)|klarna|afterpay|affirm"
                     r"|clearpay|laybuy|sezzle|zip-pay|emi|parcel(?:a|as|amento)?|cuotas?"
                     r"|raten(?:kauf)?|bnpl|pay-later|per-month)\b"),
        (UNIT, r"\b(?:unit-price|price-per-unit|price-unit|per-unit|base-price|grundpreis|ppu"
               r"|price-per|unit-pricing|comparison-price)\b"),
        (SHIPPING, r"\b(?:shipping|delivery|postage|versand|freight)\b"),
        (SAVING, r"\b(?:you-save|save|saving|savings|amount-saved)\b"),
        (BUNDLE, r"\b(?:bundle|combo|fbt|frequently-bought)\b"),
    ),
    "",
    hyphens=True,
)  # fmt: skip
#: roles a wrapper's marks say for the one price inside it (a wrapper classed "delivery"
#: may hold the price beside the delivery date)
_WRAPPER_ROLES = frozenset({WAS, INSTALMENT, UNIT, SAVING})
#: distinct class and id values whose role is remembered (a shop's pages repeat them)
_CACHED_MARKS = 4096
#: class-word separators, read as hyphens, and the case change inside camelCase words
_SEPARATORS = str.maketrans({c: "-" for c in " \t\n_:./"})
_CAMEL = re.compile(r"(?<=[a-z])(?=[A-Z])")
#: an amount in a text (digits with their separators)
_AMOUNT = re.compile(r"\d(?:[\d.,'\u00a0\u202f ]*\d)?")
#: an amount with a currency sign or code beside it: the price among other numbers
_NUMBER = r"(\d(?:[\d.,'\u00a0\u202f ]*\d)?)"
_PRICED_AMOUNT = re.compile(
    r"(?:[$€£¥₹₽₩₺₪₫]|\b[A-Z]{3}\b|\b(?:Rs|R\$|kr|zł|Kč|lei)\.?)\s*"
    + _NUMBER
    + "|"
    + _NUMBER
    + r"\s*(?:[$€£¥₹₽₩₺₪₫]|\b[A-Z]{3}\b|(?:kr|zł|Kč|lei|\u0440\u0443\u0431)\b)"
)
#: a currency sign or code printed after an amount ("20,00 € HT", "12 EUR/kg")
_LEADING_CURRENCY = re.compile(
    r"^\s*(?:[$€£¥₹₽₩₺₪₫]|[A-Z]{3}\b|(?:kr|zł|Kč|lei|\u0440\u0443\u0431)\b\.?)"
)
#: struck-through tags, and the inline style that strikes a price through
_STRUCK_TAGS = frozenset({"del", "s", "strike"})
#: the text around a price read at most, before and after it (a label is short)
_BEFORE_CHARS = 60
_AFTER_CHARS = 40
#: elements that continue a line of text (the others start a block of their own)
_INLINE_LINE_TAGS = frozenset(
    {"span", "small", "sup", "sub", "em", "i", "b", "strong", "abbr", "a", "label", "s", "del",
     "strike", "ins", "u", "font", "bdi", "bdo", "mark", "data", "time", "var", "code", "q"}
)  # fmt: skip
#: elements whose text is no label of the price beside them
_SKIPPED_TAGS = frozenset({"script", "style", "noscript", "template", "svg", "img", "br"})
_HEADING_TAGS = frozenset({"h1", "h2", "h3", "h4", "h5", "h6"})
#: a label printed in a block of its own before the price is short ("Was", "RRP:")
_MAX_LABEL = 30
#: elements that continue a price's text when printed right after it, and their length
_INLINE_TAGS = frozenset({"span", "small", "sup", "sub", "em", "i", "b", "strong", "abbr"})
_MAX_INLINE_AFTER = 24
#: ancestors whose marks and tags say the role of the one price inside them
_MARK_DEPTH = 3


def text_role(before: str, after: str = "") -> str:
    """The role the words around an amount say: *before* it (after any other amount) and
    right *after* it; ``current`` when they say none."""
    return _text_role(before[-_BEFORE_CHARS:], after[:_AFTER_CHARS])


@lru_cache(maxsize=_CACHED_MARKS)
def _text_role(before: str, after: str) -> str:
    # a shop's pages repeat their labels ("Was $", "Now £"): their reading is remembered
    before = before.lower()
    after = _LEADING_CURRENCY.sub("", after).lower()
    if _COUNT_BEFORE.search(before):
        return INSTALMENT
    if _MULTI_BUY.search(before):
        return BUNDLE
    label = _AMOUNT.split(before)[-1]
    found = _LABEL_BEFORE.search(label) or _LABEL_AFTER.search(after)
    return found.lastgroup or CURRENT if found is not None else CURRENT


@lru_cache(maxsize=_CACHED_MARKS)
def mark_role(marks: str) -> str:
    """The role class and id words say (``old-price``, ``price--installment``), else
    ``current``."""
    if not marks.islower():
        marks = _CAMEL.sub("-", marks).lower()
    found = _MARKS.search(marks.translate(_SEPARATORS))
    return found.lastgroup or CURRENT if found is not None else CURRENT


def element_role(el: HtmlElement, own: str | None = None) -> tuple[str, str]:
    """The role of the price printed by *el* (whose text is *own*, when already read), and
    what said it: a struck-through tag, the marks of *el* or of the wrappers around this one
    price, the words before it in its line and right after it."""
    own = _squeeze(el.text_content() if own is None else own)
    marked = _marked_role(el, own)
    if marked is not None:
        return marked
    start, end = _amount_span(own)
    before = f"{_line_before(el)} {own[:start]}"
    after = f"{own[end:]} {el.tail or ''}".strip() or _inline_after(el)
    return text_role(before, after), f"words {before[-24:].strip()!r} … {after[:16]!r}"


def text_node_role(text: Any) -> tuple[str, str]:
    """:func:`element_role` of a price printed in a text node (an lxml smart string): the
    marks are its element's, the line the one it is part of."""
    own = _squeeze(str(text))
    parent = text.getparent()
    if parent is None:
        return text_role("", own), "words"
    holder = parent.getparent() if text.is_tail else parent
    if holder is not None and (marked := _marked_role(holder, own)) is not None:
        return marked
    start, end = _amount_span(own)
    if text.is_tail:
        # the element the text follows is part of its line: "<b>Was</b> $20"
        before = f"{_line_before(parent)} {_squeeze(parent.text_content() or '')} {own[:start]}"
        nxt = parent.getnext()
    else:
        before = f"{_line_before(parent)} {own[:start]}"
        nxt = parent[0] if len(parent) else None
    after = own[end:].strip()
    if not after and nxt is not None and nxt.tag in _INLINE_TAGS:
        after = _squeeze(nxt.text_content() or "")[:_MAX_INLINE_AFTER]
    return text_role(before, after), f"words {before[-24:].strip()!r} … {after[:16]!r}"


def line_context(el: HtmlElement, own: str | None = None) -> tuple[str, str]:
    """The text before the amount *el* prints (the one beside a currency, else the first) in
    its line, and the text right after it: the rest of its own text and its tail, else a
    short inline element printed right after it ("$19<small>/mo</small>")."""
    own = _squeeze(el.text_content() if own is None else own)
    start, end = _amount_span(own)
    before = f"{_line_before(el)} {own[:start]}".strip()
    after = f"{own[end:]} {el.tail or ''}".strip() or _inline_after(el)
    return before[-_BEFORE_CHARS:], after[:_AFTER_CHARS]


def _marked_role(el: HtmlElement, own: str) -> tuple[str, str] | None:
    """The role a struck-through tag or the marks of *el* or of its wrappers say, when the
    wrappers hold this one price (a wrapper holding more prices is a box of several)."""
    node: HtmlElement | None = el
    chain: list[HtmlElement] = []
    for depth in range(_MARK_DEPTH + 1):
        if node is None or node.tag in ("body", "html"):
            return None
        if depth:
            chain.append(node)
        attrib = node.attrib
        style = attrib.get("style")
        struck = node.tag in _STRUCK_TAGS or (style is not None and "line-through" in style)
        marks = ""
        if "class" in attrib or "id" in attrib:
            marks = f"{attrib.get('class') or ''} {attrib.get('id') or ''}".strip()
        role = WAS if struck else mark_role(marks) if marks else CURRENT
        if role != CURRENT:
            if depth == 0:
                return role, f"struck through (<{node.tag}>)" if struck else f"class {marks!r}"
            # the wrappers' texts are read only now: few prices sit in a marked wrapper
            texts = [_squeeze(a.text_content() or "") for a in chain]
            if any(_AMOUNT.search(x, _second_start(x)) is not None for x in texts):
                return None  # a box of several prices: its marks are not this price's
            # a wrapper of the price alone is marked for it; one that says more, only as a
            # box of a was, instalment, unit or saving price ("price-and-delivery")
            if struck or texts[-1] == own or role in _WRAPPER_ROLES:
                return role, f"struck through (<{node.tag}>)" if struck else f"class {marks!r}"
        node = node.getparent()
    return None


def _line_before(el: HtmlElement) -> str:
    """The text printed before *el* in its line: the inline elements and texts before it,
    up to a block (a short label in a block just before it counts: "<div>Was</div>"), in
    *el* and up to two of its ancestors."""
    parts: list[str] = []
    size = 0
    node = el
    for _ in range(3):
        sibling = node.getprevious()
        while sibling is not None and size < _BEFORE_CHARS:
            tail = sibling.tail or ""
            parts.append(tail)
            size += len(tail.strip())
            tag = sibling.tag
            if isinstance(tag, str) and tag not in _SKIPPED_TAGS:
                if tag in _HEADING_TAGS:
                    return _joined(parts)  # a heading is no label of the price after it
                text = sibling.text_content() if len(sibling) else sibling.text
                text = _squeeze(text or "")
                if tag not in _INLINE_LINE_TAGS:
                    if len(text) <= _MAX_LABEL:
                        parts.append(text)  # a label in a block of its own
                    return _joined(parts)
                parts.append(text)
                size += len(text)
            sibling = sibling.getprevious()
        parent = node.getparent()
        if size >= _BEFORE_CHARS or parent is None or parent.tag in ("body", "html"):
            break
        parts.append(parent.text or "")
        size += len((parent.text or "").strip())
        if parent.tag not in _INLINE_LINE_TAGS and size:
            break  # the line starts in this block
        node = parent
    return _joined(parts)


def _joined(parts: list[str]) -> str:
    """The texts collected walking back from a price, in reading order."""
    return _squeeze(" ".join(reversed(parts)))[-_BEFORE_CHARS:]


def _squeeze(text: str) -> str:
    return " ".join(text.split())


def _second_start(text: str) -> int:
    """Where a second amount of *text* could start: after its first one (or its end)."""
    first = _AMOUNT.search(text)
    return first.end() if first is not None else len(text)


def around(text: str, at: int, own: str) -> tuple[str, str]:
    """The text of *text* before and after the amount of *own*, which starts at *at*."""
    start, end = _amount_span(own)
    return text[max(0, at + start - _BEFORE_CHARS) : at + start], text[at + end :][:_AFTER_CHARS]


def priced_text(text: str) -> str:
    """*text*, or only its amount beside a currency (with the currency) when it prints other
    numbers too: "In stock 3 pcs 12,99 €" -> "12,99 €" (a parser would read the first)."""
    if len(_AMOUNT.findall(text)) < 2 or (priced := _PRICED_AMOUNT.search(text)) is None:
        return text
    return priced.group(0)


def _amount_span(own: str) -> tuple[int, int]:
    """Where in *own* its price's amount is: the one beside a currency, else the first."""
    priced = _PRICED_AMOUNT.search(own)
    if priced is not None:
        group = 1 if priced.group(1) else 2
        return priced.start(group), priced.end(group)
    if (amount := _AMOUNT.search(own)) is not None:
        return amount.start(), amount.end()
    return 0, len(own)


def _inline_after(el: HtmlElement) -> str:
    """The text of a short, shown inline element right after *el* ("<small>/mo</small>")."""
    sibling = el.getnext()
    if sibling is None or sibling.tag not in _INLINE_TAGS:
        return ""
    style = (sibling.get("style") or "").replace(" ", "")
    if "display:none" in style or sibling.get("hidden") is not None:
        return ""
    text = " ".join((sibling.text_content() or "").split())
    return text if len(text) <= _MAX_INLINE_AFTER else ""
