"""Label/value pairs of a product page: "SKU: 123", ``<dt>EAN</dt><dd>…</dd>``, spec tables.

Shops without structured data still print their product codes, brand and stock next to a
label, in a handful of shapes: ``dt``/``dd`` lists, two-cell table rows (``th``/``td`` or
``td``/``td``), a bold label inside an ``li``/``p`` (``<li><strong>Model</strong> X1</li>``),
a plain "Label: value" text, and ``data-sku``-like attributes. :func:`label_pairs` reads
them all in one pass over the tree and maps each known label (in several languages) to the
Product field it names.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from lxml.html import HtmlElement

__all__ = ["LabelValue", "field_for_label", "label_pairs"]

#: label words per field, most specific field first; compared with the label's lower-case
#: text stripped of ":", "#", "." and spaces at the ends
_LABELS: tuple[tuple[str, str], ...] = (
    ("gtin", r"gtin(?:-?(?:8|12|13|14))?|ean(?:-?13)?(?: code)?|upc(?: code)?|isbn(?:-?1[03])?"
             r"|barcode|jan"),
    ("mpn", r"mpn|manufacturer part(?: number| no)?|mfr\.? part(?: number| no)?"
            r"|part (?:number|no)|model(?: number| no| code)?|modell(?:nummer)?|mod[eè]le"
            r"|modelo|herstellernummer|item model number"),
    ("sku", r"sku|sku (?:number|code|no)|item (?:number|no|code|id)|item|product (?:code|number"
            r"|no|id)|article (?:number|no|code)|art(?:ikel)?[\s.-]*(?:nr|no)"
            r"|artikelnummer|artikel|bestellnummer|best[\s.-]*nr|asin|catalogue number"
            r"|cat(?:alog)? (?:number|no)|stock code|ebay item number|numéro d'article"
            r"|n° d'article|商品編號|商品编号|型番|品番"),
    # a shop's "reference" or "code" is its product code less surely than an SKU label
    ("ref", r"product ref(?:erence)?|ref(?:erence)?|r[ée]f(?:[ée]rence)?|r[ée]f[ée]rence produit"
            r"|code(?: produit| article)?|c[oó]digo|referencia|codice(?: articolo)?|šifra"
            r"|артикул|код(?: товара)?|style(?: number| no| code)?"),
    ("brand", r"brand|marke|marque|marca|merk|manufacturer|hersteller|fabricant|fabricante"
              r"|бренд|производитель|品牌"),
    ("availability", r"availability|stock|in stock|stock status|status|verf[üu]gbarkeit"
                     r"|lagerstatus|lieferbarkeit|disponibilit[ée]|disponibilidad|disponibilit[àa]"
                     r"|beschikbaarheid|наличие|庫存|库存"),
    ("price", r"price|our price|your price|sale price|now|now only|preis|prix|precio|prezzo"
              r"|prijs|cena|цена|售價|價格|特價|价格"),
)  # fmt: skip
_LABEL_RE = [(name, re.compile(f"(?:{pattern})")) for name, pattern in _LABELS]
#: a label is short; longer "labels" are sentences
_MAX_LABEL = 40
#: a value is short too (a code, a brand, a stock line)
_MAX_VALUE = 120
#: "Label: value" in one text: the label must be short and the colon present
_INLINE = re.compile(
    r"^\s*([^\W\d][^:\uff1a\n]{0,38}?)\s*[:\uff1a#]\s*(\S.{0,119}?)\s*$", re.DOTALL
)
#: attributes that carry a code on the element itself
_DATA_ATTRS = (
    ("sku", "data-sku"),
    ("sku", "data-product-sku"),
    ("sku", "data-product-code"),
    ("gtin", "data-ean"),
    ("gtin", "data-gtin"),
    ("mpn", "data-mpn"),
    ("brand", "data-brand"),
)
#: the elements that can hold a pair; the size checks are cheaper in Python on the few
#: found than in an XPath predicate
_PAIR_TAGS = ("dt", "tr", "li", "p", "div", "span", "td")
#: brackets a whole "Label: value" text may sit in: "〈商品編號\uff1aM67296549〉", "(SKU: 123)"
_BRACKETS = {"(": ")", "[": "]", "\u3008": "\u3009", "\u300a": "\u300b", "\u3010": "\u3011",
             "\uff08": "\uff09"}  # fmt: skip
_DATA_ATTR_NAMES = frozenset(attr for _, attr in _DATA_ATTRS)


@dataclass(frozen=True, slots=True)
class LabelValue:
    """One labelled value: the field it fills, the value, and where it was read."""

    field: str
    value: str
    label: str
    #: the shape it was read from: ``dt/dd``, ``th/td``, ``strong+text``, ``text``, ``@data-…``
    shape: str
    element: HtmlElement


def _clean(text: str | None) -> str:
    return " ".join((text or "").split())


def field_for_label(label: str) -> str | None:
    """The Product field a label names (``"Artikel-Nr.:"`` -> ``"sku"``), or None."""
    key = _clean(label).lower().strip(" :\uff1a#.\u2013*-").strip()
    if not key or len(key) > _MAX_LABEL:
        return None
    for name, pattern in _LABEL_RE:
        if pattern.fullmatch(key):
            return name
    return None


def _text(el: HtmlElement) -> str:
    return _clean(el.text_content())


def label_pairs(root: HtmlElement, skip: set[HtmlElement] | None = None) -> list[LabelValue]:
    """Every labelled value of the page (or of the block *root*), in document order
    (elements in *skip* left out)."""
    found: list[LabelValue] = []
    skip = skip or set()
    for el in root.iter(*_PAIR_TAGS):
        children = len(el)
        if children > 3 or el in skip:
            continue
        if el.attrib and _DATA_ATTR_NAMES.intersection(el.attrib):
            for name, attr in _DATA_ATTRS:
                value = _clean(el.get(attr))
                if value and len(value) <= _MAX_VALUE:
                    found.append(LabelValue(name, value, attr, f"@{attr}", el))
        tag = el.tag
        if tag == "dt":
            dd = el.getnext()
            if dd is not None and dd.tag == "dd":
                _add(found, _text(el), _text(dd), "dt/dd", dd)
            continue
        if tag == "tr":
            if children != 2:
                continue
            first, second = el[0], el[1]
            if first.tag in ("th", "td") and second.tag == "td":
                _add(found, _text(first), _text(second), f"{first.tag}/td", second)
            continue
        if children == 0 and not el.text:
            continue
        if tag in ("div", "span") and children == 3:
            continue
        # a bold/label child first, then the value as the rest of the element's text
        head = el[0] if children else None
        if (
            head is not None
            and head.tag in ("strong", "b", "span", "label", "em", "h3", "h4")
            and not (el.text or "").strip()
        ):
            label = _clean(head.text) if not len(head) else _text(head)
            if not label or len(label) > _MAX_LABEL + 2 or field_for_label(label) is None:
                continue
            full = _text(el)
            if len(full) > _MAX_LABEL + _MAX_VALUE or not full.startswith(label):
                continue
            rest = full[len(label) :].lstrip(":\uff1a# ")
            if rest:
                _add(found, label, rest, f"{head.tag}+text", el)
            elif (nxt := el.getnext()) is not None and isinstance(nxt.tag, str) and children == 1:
                _add(found, label, _text(nxt), f"{head.tag}+next", nxt)
            continue
        # "Label: value": only where a colon (or "#") is printed at all
        raw = el.text_content() if children else el.text
        if not raw or len(raw) > 400 or not (":" in raw or "#" in raw or "\uff1a" in raw):
            continue
        text = _clean(raw)
        if text and _BRACKETS.get(text[0]) == text[-1]:
            text = text[1:-1].strip()
        if len(text) <= _MAX_LABEL + _MAX_VALUE and (match := _INLINE.match(text)):
            _add(found, match[1], match[2], "text", el)
    # data attributes come last: they often hold every variant's code, not the page's
    found.sort(key=lambda pair: pair.shape.startswith("@"))
    return found


def _add(found: list[LabelValue], label: str, value: str, shape: str, el: HtmlElement) -> None:
    # "Item #: 123" splits at "#": the value starts after the colon
    value = value.lstrip(":\uff1a# ")
    if not value or len(value) > _MAX_VALUE:
        return
    name = field_for_label(label)
    if name is not None:
        found.append(LabelValue(name, value, label, shape, el))
