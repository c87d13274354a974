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

__all__ = ["NEIGHBOUR_TITLE", "neighbour_sections", "neighbour_title"]

#: the title of a section of other products or of reviews, in the usual languages (matched
#: against the lowered heading text)
NEIGHBOUR_TITLE = re.compile(
    r"\b(?:related|similar|also (?:bought|viewed|like|purchased|liked|consider)"
    r"|(?:customers|people|others|shoppers) (?:who|also|went|bought|viewed)"
    r"|you (?:may|might|will|could) (?:also )?(?:like|love|be interested)"
    r"|more like this|more from|more items|recommend|recently viewed|frequently bought"
    r"|bought together|goes well with|complete the look|shop the look|sponsored"
    r"|how about these|customer reviews?|reviews?|ratings?(?: (?:&|and) reviews?)?"
    r"|questions and answers|alternatives?"
    # de, fr, es, it, pt, nl, pl
    r"|ähnliche|das könnte|auch gefallen|kauften auch|auch gekauft|zuletzt angesehen"
    r"|passend dazu|empfehlungen|(?:kunden)?bewertung(?:en)?|similaires?|vous aimerez"
    r"|pourriez aussi|ont aussi|récemment consultés|produits associés|avis"
    r"|relacionad[oa]s|similares|te puede interesar|también|opiniones|reseñas"
    r"|recomendad[oa]s|correlat[ie]|simili|potrebbe interessar|recensioni|consigliati"
    r"|semelhantes|avaliações|também|gerelateerde|vergelijkbare|beoordelingen"
    r"|ook bekeken|podobne|polecane|opinie|powiązane|również)\b"
)
#: a title is short; longer headings are sentences (a product named "... Reviews Edition")
_MAX_TITLE = 80
#: heading elements whose text may title a section
_TITLE_TAGS = ("h2", "h3", "h4", "h5", "h6")
_HEADING_TAGS = frozenset({"h1", "h2", "h3", "h4", "h5", "h6"})
#: ancestors a title's wrapper may have (``div.title > h2``) before its section starts
_MAX_WRAPPERS = 4


def neighbour_title(text: str) -> bool:
    """Whether *text* titles a section of other products or of reviews."""
    text = " ".join(text.split()).lower()
    return 0 < len(text) <= _MAX_TITLE and NEIGHBOUR_TITLE.search(text) is not None


def neighbour_sections(root: HtmlElement, heading: HtmlElement | None) -> set[HtmlElement]:
    """The blocks of every section titled as other products' or as reviews (see the module
    docstring), never one holding *heading* (the page's main heading)."""
    keep = set(heading.iterancestors()) | {heading} if heading is not None else set()
    found: set[HtmlElement] = set()
    for title in root.iter(*_TITLE_TAGS):
        if title in found or any(a in found for a in title.iterancestors()):
            continue
        if not neighbour_title(title.text_content() or ""):
            continue
        found.update(_section(title, keep))
    return found


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
