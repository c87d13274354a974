"""The page's own product and what lies around it: sections titled as other products'
("Customers also bought", "Related products", "You may also like", "Frequently bought
together", "Sponsored") or as reviews, whose prices, codes and stock lines are never the
product's.

Shops name those sections for their shoppers, in a heading, whatever their class names say
(generated class names say nothing). A section is the titled heading's block and the blocks
after it up to the next heading; it never holds the page's main heading.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from lxml.html import HtmlElement

__all__ = [
    "OTHER_PRODUCTS_TITLE",
    "REVIEWS_TITLE",
    "inside_any",
    "neighbour_sections",
    "neighbour_title",
]

#: the title of a section of other products, in the usual languages (matched against the
#: lowered heading text)
OTHER_PRODUCTS_TITLE = re.compile(
    r"\b(?:related|similar|also (?:bought|viewed|like|purchased|liked|consider)"
    r"|(?:customers|people|others|shoppers) (?:who|also|went|bought|viewed)"
    r"|you (?:may|might|will|could) (?:also )?(?:like|love|be interested)"
    r"|more like this|more from|more items|recommend|recently viewed|frequently bought"
    r"|bought together|goes well with|complete the look|shop the look|sponsored"
    r"|how about these|alternatives?"
    # de, fr, es, it, pt, nl, pl
    r"|ähnliche|das könnte|auch gefallen|kauften auch|auch gekauft|zuletzt angesehen"
    r"|passend dazu|empfehlungen|similaires?|vous aimerez|pourriez aussi|ont aussi"
    r"|récemment consultés|produits associés|relacionad[oa]s|similares|te puede interesar"
    r"|también|recomendad[oa]s|correlat[ie]|simili|potrebbe interessar|consigliati"
    r"|semelhantes|também|gerelateerde|vergelijkbare|ook bekeken|podobne|polecane"
    r"|powiązane|również)\b"
)
#: the title of a section of reviews (or of questions about the product)
REVIEWS_TITLE = re.compile(
    r"\b(?:customer reviews?|reviews?|ratings?(?: (?:&|and) reviews?)?|questions and answers"
    r"|(?:kunden)?bewertung(?:en)?|avis|opiniones|reseñas|recensioni|avaliações"
    r"|beoordelingen|opinie)\b"
)
#: the first four letters of every word of the titles: a heading with none of them is no
#: title (a cheap test before the patterns)
_TITLE_PREFIXES = frozenset(
    word[:4]
    for pattern in (OTHER_PRODUCTS_TITLE, REVIEWS_TITLE)
    for word in re.findall(r"[^\W\d_]+", pattern.pattern)
    if len(word) >= 3
)
#: a title is short; longer headings are sentences (a product named "... Reviews Edition")
_MAX_TITLE = 80
#: heading elements whose text may title a section
_TITLE_TAGS = ("h2", "h3", "h4", "h5", "h6")
_HEADING_TAGS = frozenset({"h1", "h2", "h3", "h4", "h5", "h6"})
#: ancestors a title's wrapper may have (``div.title > h2``) before its section starts
_MAX_WRAPPERS = 4


def neighbour_title(text: str, *, reviews: bool = True) -> bool:
    """Whether *text* titles a section of other products (or, with *reviews*, of reviews)."""
    words = text.lower().split()
    if _TITLE_PREFIXES.isdisjoint([word[:4] for word in words]):
        return False  # no word of any title: most headings (a product's name) end here
    text = " ".join(words)
    if not 0 < len(text) <= _MAX_TITLE:
        return False
    return OTHER_PRODUCTS_TITLE.search(text) is not None or (
        reviews and REVIEWS_TITLE.search(text) is not None
    )


def neighbour_sections(
    root: HtmlElement, heading: HtmlElement | None, *, reviews: bool = True
) -> set[HtmlElement]:
    """The blocks of every section titled as other products' (or, with *reviews*, as
    reviews; see the module docstring), never one holding *heading* (the page's main
    heading)."""
    keep: set[HtmlElement] | None = None
    found: set[HtmlElement] = set()
    for title in root.iter(*_TITLE_TAGS):
        if found and (title in found or any(a in found for a in title.iterancestors())):
            continue
        # text_content() runs an XPath; a heading without child elements has only its .text
        text = title.text_content() if len(title) else title.text
        if not neighbour_title(text or "", reviews=reviews):
            continue
        if keep is None:
            keep = {heading, *heading.iterancestors()} if heading is not None else set()
        found.update(_section(title, keep))
    return found


def inside_any(el: HtmlElement, blocks: set[HtmlElement]) -> bool:
    """*el* is one of *blocks* or inside one."""
    return el in blocks or any(a in blocks for a in el.iterancestors())


def _section(title: HtmlElement, keep: set[HtmlElement]) -> list[HtmlElement]:
    """The blocks titled by *title*: its wrapper (the heading, or the ancestors that hold only
    its text) and the siblings after it up to the next one that holds a heading."""
    node = title
    text = len(" ".join((title.text_content() or "").split()))
    for _ in range(_MAX_WRAPPERS):
        parent = node.getparent()
        if parent is None or parent in keep or parent.tag in ("body", "html"):
            break
        if _next_element(node) is not None:
            break  # the section's blocks follow the title here
        if len(" ".join((parent.text_content() or "").split())) > text + 20:
            break  # the parent holds more than the title: the title's own section
        node = parent
    if node in keep:
        return []
    blocks = [node]
    for sibling in _after(node):
        if sibling in keep or _holds_heading(sibling):
            break
        blocks.append(sibling)
    return blocks


def _after(node: HtmlElement) -> list[HtmlElement]:
    """The element siblings after *node* (comments and processing instructions left out)."""
    return [s for s in node.itersiblings() if isinstance(s.tag, str)]


def _next_element(node: HtmlElement) -> HtmlElement | None:
    return next((s for s in node.itersiblings() if isinstance(s.tag, str)), None)


def _holds_heading(el: HtmlElement) -> bool:
    """*el* is a heading or holds one (the next section starts there)."""
    if el.tag in _HEADING_TAGS or el.get("role") == "heading":
        return True
    return next(el.iter("h1", "h2", "h3", "h4", "h5", "h6"), None) is not None
