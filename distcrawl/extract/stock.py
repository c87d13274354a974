"""Availability sources of visible markup, and the rule that picks one when they disagree.

Shops print the stock in several places at once: a short line or badge by the price ("Out of
stock", "Only 3 left"), an element classed ``stock`` or ``availability``, a label/value row
("Availability: In stock"), a disabled buy button. Each is a :class:`StockSource`; when they
disagree, the one nearest (in the document tree) to the product's price and heading wins,
because that is the one a shopper reads as this product's. The others are reported as
overruled (``distcrawl extract --explain``).

The product's own block is the smallest element holding both its heading and its price: stock
lines and out-of-stock wording are looked for there only, never in the rest of the page (when
that block is the whole ``body``, stock lines only a few steps from the price or heading count,
and wording none).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ._xpath import xpath as _xpath
from .availability import MAX_STOCK_LINE, normalize_availability, out_of_stock_wording, stock_line
from .labels import LabelValue
from .markup import (
    NOT_LOOKED,
    HeuristicProduct,
    inside,
    is_chrome,
    page_button,
    page_pairs,
    text_of,
    value_of,
)

if TYPE_CHECKING:
    from lxml.html import HtmlElement

__all__ = [
    "StockSource",
    "block_wording",
    "describe",
    "is_hidden",
    "nearest",
    "notify_controls",
    "product_block",
    "read_availability",
    "stock_lines",
]

#: elements whose text is never the product's stock line: links, form controls, code
_NOT_A_LINE = frozenset(
    {"script", "style", "noscript", "template", "option", "select", "textarea", "a",
     "button", "label", "title", "head"}
)  # fmt: skip
#: a line inside a size or colour picker says the stock of one option, not the product's
_OPTION_BLOCK = re.compile(r"swatch|size|variant|option|dropdown|select")
_OPTION_ROLES = frozenset({"radio", "radiogroup", "option", "listbox", "menu", "menuitem"})
#: the label of a control that asks to be told when the product can be bought again
_NOTIFY = re.compile(
    r"notify me|(?:e-?mail|alert|tell|text) me when|let me know when"
    r"|back[ -]in[ -]stock (?:alert|notification|e-?mail)"
    r"|benachrichtig|verfügbarkeit anfragen|me prévenir|m'avertir|m'alerter|avísame|avisame"
    r"|avisarme|notificarme|avvisami|avvertimi|houd me op de hoogte|mail mij"
    r"|powiadom mnie|\u0443\u0432\u0435\u0434\u043e\u043c\u0438\u0442\u044c"
    r"|\u0441\u043e\u043e\u0431\u0449\u0438\u0442\u044c"
)
#: class words that hide an element until a script shows it
_HIDING_CLASSES = frozenset({"hidden", "hide", "d-none", "is-hidden", "invisible", "no-display"})
#: tree steps from the price or heading within which a stock line counts, when only the
#: whole page holds both (a flat page: heading, price and stock line siblings in ``body``)
_MAX_STEPS_IN_PAGE = 4
#: the text of the product's block searched for out-of-stock wording, at most
_MAX_BLOCK_TEXT = 20_000


@dataclass(frozen=True, slots=True)
class StockSource:
    """One place on the page that says the product's availability."""

    availability: str
    element: HtmlElement
    #: how ``--explain`` names it: "line <p> 'Out of stock'", "label dt/dd 'Stock': '3'", ...
    what: str


def _text(el: HtmlElement) -> str:
    return " ".join((el.text_content() or "").split())


def is_hidden(el: HtmlElement) -> bool:
    """*el* or an ancestor is hidden by a ``hidden`` attribute, an inline style or a class
    (aria-hidden is not it: shops set it on whole pages while a dialog is open)."""
    node: HtmlElement | None = el
    while node is not None:
        if node.get("hidden") is not None:
            return True
        style = node.get("style")
        if style and ("none" in style or "hidden" in style):
            compact = style.replace(" ", "").lower()
            if "display:none" in compact or "visibility:hidden" in compact:
                return True
        classes = node.get("class")
        if classes and not _HIDING_CLASSES.isdisjoint(classes.lower().split()):
            return True
        node = node.getparent()
    return False


def _in_option(el: HtmlElement, block: HtmlElement) -> bool:
    """*el* sits in one option of a picker (a size, a colour) inside *block*."""
    for node in (el, *el.iterancestors()):
        if node is block:
            return False
        if node.get("role") in _OPTION_ROLES or node.tag in ("fieldset", "select"):
            return True
        marks = f"{node.get('class') or ''} {node.get('id') or ''}".lower()
        if _OPTION_BLOCK.search(marks):
            return True
    return False


def _common_ancestor(a: HtmlElement, b: HtmlElement) -> HtmlElement | None:
    above = {a, *a.iterancestors()}
    for node in (b, *b.iterancestors()):
        if node in above:
            return node
    return None


def product_block(heading: HtmlElement | None, price: HtmlElement | None) -> HtmlElement | None:
    """The smallest element holding the product's heading and its price (the heading's parent
    when there is no price); the page's ``body`` when only it holds both."""
    if heading is None:
        return None
    block = _common_ancestor(heading, price) if price is not None else heading.getparent()
    if block is not None and block.tag == "html":
        block = next(iter(block.iter("body")), None)
    return block


def _texts(block: HtmlElement) -> Iterator[tuple[str, HtmlElement]]:
    """(text, the element it is part of) of every text of *block*, in document order (a walk
    of the tree is cheaper than an XPath for text nodes and their parents)."""
    for el in block.iter():
        if el.text and isinstance(el.tag, str):
            yield el.text, el
        if el.tail and el is not block:
            parent = el.getparent()
            if parent is not None:
                yield el.tail, parent


def stock_lines(
    block: HtmlElement,
    skip: Callable[[HtmlElement], bool],
    anchors: Iterable[HtmlElement | None] = (),
) -> list[StockSource]:
    """Elements of *block* whose whole text is a stock line ("Sold out", "(3 available)"), in
    document order, leaving out those *skip* says are not the product's and those in a size or
    colour picker. When the block is the whole page, only lines close to one of the *anchors*
    (the price, the heading) count."""
    near = [_distances(a) for a in anchors if a is not None] if block.tag == "body" else []
    found: list[StockSource] = []
    seen: set[HtmlElement] = set()
    for text, holder in _texts(block):
        # a line of several elements has a text node that is a stock line by itself ("In
        # stock" of "In stock <span>(3 available)</span>"): the rest are not looked at
        if stock_line(text) is None or holder in seen or holder.tag in _NOT_A_LINE:
            continue
        seen.add(holder)
        line = _text(holder) if len(holder) <= 3 else ""
        said = stock_line(line)
        if said is None:
            line = " ".join(text.split())
            said = stock_line(line)
        if said is None or _in_option(holder, block) or skip(holder):
            continue
        if near and min(_distance(holder, m) for m in near) > _MAX_STEPS_IN_PAGE:
            continue
        found.append(StockSource(said, holder, f"line <{holder.tag}> {line!r}"))
    return found


def notify_controls(
    block: HtmlElement,
    skip: Callable[[HtmlElement], bool],
    anchors: Iterable[HtmlElement | None] = (),
) -> list[StockSource]:
    """The product's "Notify me when available" / "Email me when back in stock" controls in
    *block*: a shop offers them in place of a buy button, for a product it cannot sell now.
    When the block is the whole page, only controls close to one of the *anchors* count."""
    near = [_distances(a) for a in anchors if a is not None] if block.tag == "body" else []
    found: list[StockSource] = []
    for control in block.iter("button", "a", "input"):
        if control.tag == "input" and control.get("type") not in ("submit", "button"):
            continue
        label = " ".join(
            (control.text_content() or control.get("value") or control.get("aria-label") or "")
            .lower()
            .split()
        )
        if not label or len(label) > MAX_STOCK_LINE or not _NOTIFY.search(label):
            continue
        if skip(control) or _in_option(control, block):
            continue
        if near and min(_distance(control, m) for m in near) > _MAX_STEPS_IN_PAGE:
            continue
        found.append(
            StockSource("OutOfStock", control, f"notify-me control <{control.tag}> {label!r}")
        )
    return found


def block_wording(block: HtmlElement, skip: Callable[[HtmlElement], bool]) -> str | None:
    """Out-of-stock words anywhere in the text of *block* (never the whole page's), leaving
    out scripts, hidden elements, size or colour pickers and what *skip* rules out."""
    if block.tag == "body":
        return None
    parts = _xpath(".//text()[not(ancestor::script or ancestor::style)]", smart_strings=False)(
        block
    )
    if out_of_stock_wording(" ".join(" ".join(str(p) for p in parts).split())) is None:
        return None  # the common case, told by one search
    kept = [
        text
        for text, holder in _texts(block)
        if holder.tag not in ("script", "style")
        and not is_hidden(holder)
        and not _in_option(holder, block)
        and not skip(holder)
    ]
    return out_of_stock_wording(" ".join(" ".join(kept).split())[:_MAX_BLOCK_TEXT])


def _distances(anchor: HtmlElement) -> dict[HtmlElement, int]:
    return {node: steps for steps, node in enumerate((anchor, *anchor.iterancestors()))}


def _distance(el: HtmlElement, anchor: dict[HtmlElement, int]) -> int:
    for steps, node in enumerate((el, *el.iterancestors())):
        up = anchor.get(node)
        if up is not None:
            return steps + up
    return 10_000


def nearest(
    sources: list[StockSource], anchors: Iterable[HtmlElement | None]
) -> tuple[StockSource, list[StockSource]] | None:
    """The visible source nearest the *anchors* (the price and the heading: tree steps to
    each, summed; the first in *sources* on a tie), and the visible sources that say
    otherwise; None when every source is hidden."""
    chosen = sources[0]
    if all(s.availability == chosen.availability for s in sources):
        # they agree: whether the others are hidden changes nothing
        if not is_hidden(chosen.element):
            return chosen, []
        sources = sources[1:]
    sources = [s for s in sources if not is_hidden(s.element)]
    if not sources:
        return None
    chosen = sources[0]
    maps = [_distances(a) for a in anchors if a is not None]
    if maps:
        chosen = min(sources, key=lambda s: sum(_distance(s.element, m) for m in maps))
    overruled = [s for s in sources if s.availability != chosen.availability]
    return chosen, overruled


def describe(chosen: StockSource, overruled: list[StockSource], *, anchored: bool) -> str:
    """``--explain``'s words: the source used and those it overruled."""
    where = chosen.what
    if overruled:
        why = "nearest the price and heading" if anchored else "found first"
        others = "; ".join(f"{s.what}: {s.availability}" for s in overruled[:3])
        more = f" and {len(overruled) - 3} more" if len(overruled) > 3 else ""
        where += f" ({why}; overruled: {others}{more})"
    return where


#: elements classed "stock" or "availability" weighed at most (the first ones in the page)
_MAX_STOCK_ELEMENTS = 20


def read_availability(
    root: HtmlElement,
    cards: set[HtmlElement],
    result: HeuristicProduct,
    heading: HtmlElement | None,
) -> None:
    """Availability from every place the page prints it; the nearest the price and heading
    wins (:mod:`.stock`). Page-wide labels and the buy button count when they were read for
    another field anyway or when the product's own block has no stock line or element. With
    none of them, out-of-stock wording in the product's block, else an enabled buy button,
    says it."""
    price_at = result.found_in.get("price")
    price_el = price_at.element if isinstance(price_at, LabelValue) else price_at
    sources: list[StockSource] = []
    for el in _xpath(
        "(//@itemprop[.='availability'] | //@class[contains(.,'stock')"
        " or contains(.,'availability') or contains(.,'inventory')]"
        " | //@id[contains(.,'availability')])/parent::*"
    )(root)[:_MAX_STOCK_ELEMENTS]:
        if el.tag in ("script", "style", "link") or is_chrome(el, cards):
            continue
        availability = normalize_availability(value_of(el)) or normalize_availability(text_of(el))
        if availability:
            label = text_of(el)[:40] or value_of(el)[:40]
            sources.append(
                StockSource(availability, el, f"<{el.tag} class={el.get('class')!r}> {label!r}")
            )
    block = product_block(heading, price_el)
    if block is not None:
        skip = lambda el: is_chrome(el, cards)  # noqa: E731
        sources.extend(stock_lines(block, skip, (price_el, heading)))
        sources.extend(notify_controls(block, skip, (price_el, heading)))

    # labels anywhere on the page and the buy button weigh in when another reader looked
    # them up anyway, or when the product's own block says nothing of its stock: a stock line
    # or element in that block is seldom farther from the price than they are
    def in_block() -> bool:
        return block is not None and any(inside(s.element, block) for s in sources)

    if result.pairs is not None or not in_block():
        for pair in page_pairs(root, cards, result, "availability"):
            if pair.field == "availability" and (found := normalize_availability(pair.value)):
                what = f"label {pair.shape} {pair.label!r}: {pair.value!r}"
                sources.append(StockSource(found, pair.element, what))
    looked_up = result.button is not NOT_LOOKED
    button = page_button(root, cards, result) if looked_up or not in_block() else None
    if button is not None and button.tag == "form":
        # a buy form is as usable as its submit control
        inner = _xpath(".//button | .//input[@type='submit']")(button)
        button = inner[0] if inner else button
    enabled: StockSource | None = None
    if button is not None:
        disabled = (
            button.get("disabled") is not None
            or "disabled" in (button.get("class") or "").lower().split()
        )
        label = text_of(button) or str(button.get("value") or "")
        said = normalize_availability(label)
        state = "disabled" if disabled else "enabled"
        what = f"{state} buy button <{button.tag}> {label[:40]!r}"
        if said is not None and said != "InStock":
            sources.append(StockSource(said, button, what))
        elif disabled:
            sources.append(StockSource("OutOfStock", button, what))
        else:
            # a button that takes orders says little: shops often leave it on a sold-out page
            enabled = StockSource("InStock", button, what)
    anchors = (price_el, heading)
    picked = nearest(sources, anchors) if sources else None
    if picked is not None:
        chosen, overruled = picked
        anchored = any(a is not None for a in anchors)
        result.fields["availability"] = chosen.availability
        result.found_in["availability"] = chosen.element
        result.where["availability"] = describe(chosen, overruled, anchored=anchored)
        return
    wording = block_wording(block, lambda el: is_chrome(el, cards)) if block is not None else None
    if wording is not None:
        result.fields["availability"] = "OutOfStock"
        result.where["availability"] = f"out-of-stock wording in the product's block: {wording!r}"
    elif enabled is not None:
        result.fields["availability"] = "InStock"
        result.found_in["availability"] = enabled.element
        result.where["availability"] = enabled.what
    elif block is not None:
        # no field: what the page's default (a price: in stock) rests on, for --explain
        result.where["availability"] = "no out-of-stock wording in the product's block"
