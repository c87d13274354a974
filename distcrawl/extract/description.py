"""The product's description from the block a shop titles "Description", "Overview", ...

A shop without structured data prints its description under a title: a heading ("Product
Description", "About this item", "Beschreibung") followed by paragraphs, or a tab ("<a
href="#tab-description">Description</a>") whose panel holds them. :func:`titled_description`
finds the first such heading outside site chrome (else the first bold title or tab) and reads
the text after it up to the next heading.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from ._xpath import xpath as _xpath

if TYPE_CHECKING:
    from lxml.html import HtmlElement

__all__ = ["DESCRIPTION_WORDS", "MAX_DESCRIPTION", "is_title", "titled_description"]

#: a title that announces the product's description, compared with the title's lower-case text
_TITLE = re.compile(
    r"(?:(?:the |full |product |item |detailed )?description|product overview|overview"
    r"|about (?:this|the) (?:item|product|book)|description (?:du|de l'|de la) (?:produit|article)"
    r"|descriptif|(?:produkt|artikel)?beschreibung|descripci[óo]n(?: del producto)?"
    r"|descri[çc][ãa]o(?: do produto)?|descrizione(?: del prodotto)?|(?:product)?omschrijving"
    r"|beschrijving|opis(?: produktu)?|описание(?: товара)?|商品描述|商品說明|商品説明|商品详情"
    r"|商品詳細|產品描述|产品描述)"
)
#: words one of which the page's source holds when it has such a title (cheap to check first)
DESCRIPTION_WORDS: tuple[str, ...] = (
    "escri", "ESCRI", "verview", "VERVIEW", "bout th", "BOUT TH", "eschreibung", "mschrijving",
    "eschrijving", "pis", "писание", "ПИСАНИЕ", "描述", "說明", "説明", "详情", "詳細",
)  # fmt: skip
#: characters of a description kept at most
MAX_DESCRIPTION = 10_000
#: a title is short
_MAX_TITLE = 40
_HEADINGS = frozenset({"h1", "h2", "h3", "h4", "h5", "h6"})
#: where titles are looked for: headings first, then a bold line of its own or a tab that
#: names a panel
_HEADING_TAGS = ("h2", "h3", "h4", "h5", "h6", "summary", "legend")
_OTHER_TITLES_XPATH = "//strong | //b | //a[starts-with(@href,'#')] | //@aria-controls/parent::*"
_TEXT_XPATH = ".//text()[not(ancestor::script or ancestor::style or ancestor::noscript)]"
#: how many levels a title may sit inside the element whose next siblings hold the text
_MAX_CLIMB = 3


def _clean(text: str) -> str:
    return " ".join(text.split())


def _text(el: HtmlElement) -> str:
    return _clean(" ".join(str(t) for t in _xpath(_TEXT_XPATH, smart_strings=False)(el)))


def is_title(text: str) -> bool:
    """*text* titles a description block ("Product Description:", "About this item")."""
    if len(text) > 4 * _MAX_TITLE:
        return False
    key = _clean(text).lower().strip(" :\uff1a.-\u2013")
    return 0 < len(key) <= _MAX_TITLE and _TITLE.fullmatch(key) is not None


def _starts_section(el: HtmlElement) -> bool:
    """*el* is a heading, or opens with one: the next section of the page."""
    if el.tag in _HEADINGS:
        return True
    first = next(iter(el), None)
    return first is not None and isinstance(first.tag, str) and first.tag in _HEADINGS


def _after(title: HtmlElement) -> str:
    """The text after *title* up to the next heading, climbing out of the title's wrappers
    ("<div class="sub-header"><h2>Description</h2></div><p>...</p>")."""
    node = title
    for _ in range(_MAX_CLIMB + 1):
        parts = [_clean(node.tail or "")]
        for sibling in node.itersiblings():
            if not isinstance(sibling.tag, str):
                parts.append(_clean(sibling.tail or ""))
                continue
            if _starts_section(sibling):
                break
            parts.append(_text(sibling))
            parts.append(_clean(sibling.tail or ""))
            if sum(map(len, parts)) > MAX_DESCRIPTION:
                break
        text = " ".join(p for p in parts if p).lstrip(":\uff1a -\u2013")
        if text:
            return text[:MAX_DESCRIPTION]
        parent = node.getparent()
        if parent is None or parent.tag in ("body", "html"):
            return ""
        node = parent
    return ""


def _panel(root: HtmlElement, tab: HtmlElement) -> str:
    """The text of the panel a tab names (``href="#id"`` or ``aria-controls="id"``)."""
    target = tab.get("aria-controls") or (tab.get("href") or "").lstrip("#")
    if not target:
        return ""
    panels = _xpath("//*[@id=$id]")(root, id=target)
    if not panels or panels[0] is tab:
        return ""
    panel = panels[0]
    first = next(iter(panel), None)
    if first is not None and isinstance(first.tag, str) and is_title(_text(first)):
        return _after(first)  # the panel repeats its title
    return _text(panel)[:MAX_DESCRIPTION]


def _titles(root: HtmlElement) -> Iterator[HtmlElement]:
    """Elements that may title a block: headings (a cheap walk), then the costlier rest."""
    yield from root.iter(*_HEADING_TAGS)
    yield from _xpath(_OTHER_TITLES_XPATH)(root)


def titled_description(
    root: HtmlElement, skip: Callable[[HtmlElement], bool]
) -> tuple[str, HtmlElement] | None:
    """(description, its title element) of the first titled description block that *skip*
    does not rule out (site chrome, other products' cards), or None."""
    for el in _titles(root):
        if len(el) > 2:
            continue
        raw = el.text_content()  # a title is short and holds no script: no need to sort
        if not is_title(raw):
            continue
        title = _clean(raw)
        if el.tag in ("strong", "b"):
            parent = el.getparent()
            if parent is None or not _text(parent).startswith(title):
                continue  # bold words inside a sentence, not a title
        if skip(el):
            continue
        is_tab = el.tag == "a" or el.get("aria-controls") is not None
        text = _panel(root, el) if is_tab else _after(el)
        if text:
            return text, el
    return None
