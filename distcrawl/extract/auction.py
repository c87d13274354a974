"""An auction's price: the bid it stands at once bids are placed, not the starting price that
its structured data may give."""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from ._xpath import xpath as _xpath
from .prices import parse_price

if TYPE_CHECKING:
    from lxml.html import HtmlElement

__all__ = ["CurrentBid", "current_bid", "prefer_current_bid"]

#: words of a bid count in the page's lower-cased source: a count is looked for only there
BID_WORDS = ("bid", "gebot", "enchère", "puja")
#: an element that is a bid count and nothing else: "2 bids", "[ 47 bids ]", "3 Gebote"
_BID_COUNT = re.compile(
    r"^[\[(]?\s*(\d+)\s*(?:bids?|gebote?|enchères?|pujas?)\s*[\])]?$", re.IGNORECASE
)
#: the label of an auction's starting price ("Starting bid: £115.00", "Mindestgebot")
_STARTING = re.compile(
    r"(?:starting|opening|start)\s*(?:price|bid)|startpreis|startgebot|mindestgebot"
    r"|prix de départ|mise à prix|enchère de départ|precio de salida|puja inicial",
    re.IGNORECASE,
)
#: a price with a currency sign or code in it (an amount alone may be a count or a date)
_PRICE_TEXT = re.compile(
    r"[$€£¥₹₽]\s*\d|\d\s*[$€£¥₹₽]|\b(?:EUR|USD|GBP|CHF|CAD|AUD)\s*\d|\d\s*(?:EUR|USD|GBP)\b"
)
#: texts with a bid count's word or a starting-price label's (upper-case letters too)
_WORDED_TEXTS = _xpath(
    "//body//text()[contains(.,'bid') or contains(.,'Bid') or contains(.,'BID')"
    " or contains(.,'ebot') or contains(.,'EBOT') or contains(.,'nchère') or contains(.,'NCHÈRE')"
    " or contains(.,'uja') or contains(.,'UJA') or contains(.,'tart') or contains(.,'TART')"
    " or contains(.,'pening') or contains(.,'PENING') or contains(.,'départ')"
    " or contains(.,'à prix') or contains(.,'salida')][not(ancestor::script or ancestor::style)]"
)
_TEXTS = _xpath(".//text()[not(ancestor::script or ancestor::style)]")
#: ancestors of a bid count searched for the bid beside it, nearest first
_BID_BLOCK_DEPTH = 3
#: ancestors of a starting-price label searched for its amount
_LABEL_BLOCK_DEPTH = 2


@dataclass
class CurrentBid:
    """The bid an auction stands at and where the page shows it."""

    amount: Decimal
    bids: int
    shown: str


def prefer_current_bid(
    root: HtmlElement,
    lowered: str,
    product: dict[str, Any],
    sources: dict[str, str],
    where: dict[str, str],
) -> None:
    """An auction's current bid over a structured price that the page labels as the
    starting price: once bids are placed, the item no longer goes for that."""
    price = product.get("price")
    if not isinstance(price, Decimal):
        return
    bid = current_bid(root, lowered, price, product.get("currency"))
    if bid is None:
        return
    where["price"] = (
        f"the bid {bid.shown!r} beside a count of {bid.bids} bids (overruled {sources['price']}"
        f" price {price}: the starting price)"
    )
    product["price"], sources["price"] = bid.amount, "heuristics"


def current_bid(
    root: HtmlElement, lowered: str, price: Decimal, currency: str | None
) -> CurrentBid | None:
    """The bid shown beside a count of one or more bids, when *price* (the structured one)
    is the amount the page labels as the starting price; None on any other page. *lowered*
    is the page's source in lower case."""
    if not any(word in lowered for word in BID_WORDS):
        return None
    texts = _WORDED_TEXTS(root)
    if not _labelled_starting(texts, price, currency):
        return None
    for text in texts:
        count = _holder(text)
        if count is None:
            continue
        match = _BID_COUNT.match(" ".join(count.text_content().split()))
        if match is None or int(match.group(1)) < 1:
            continue
        block = count
        for _ in range(_BID_BLOCK_DEPTH):
            block = block.getparent()
            if block is None:
                break
            if (bid := _bid_in(block, count, currency)) is not None:
                if bid[0] <= price:
                    break  # a bid at or under the starting price: not the auction's bid
                return CurrentBid(bid[0], int(match.group(1)), bid[1])
    return None


def _labelled_starting(texts: list[Any], price: Decimal, currency: str | None) -> bool:
    """Whether one of *texts* is a starting-price label whose amount is *price*."""
    for text in texts:
        if not _STARTING.search(text):
            continue
        block = _holder(text)
        for _ in range(_LABEL_BLOCK_DEPTH):
            if block is None:
                break
            after = _STARTING.split(" ".join(block.text_content().split()), maxsplit=1)[-1]
            if _PRICE_TEXT.search(after):
                return parse_price(after, currency)[0] == price
            block = block.getparent()
    return False


def _bid_in(
    block: HtmlElement, count: HtmlElement, currency: str | None
) -> tuple[Decimal, str] | None:
    """The first price in *block* outside the *count* element and outside any element
    labelled as the starting price."""
    for text in _TEXTS(block):
        holder = _holder(text)
        if holder is None or holder is count or count in holder.iterancestors():
            continue
        if not _PRICE_TEXT.search(text) or _STARTING.search(holder.text_content()):
            continue
        amount = parse_price(str(text), currency)[0]
        if amount is not None:
            return amount, " ".join(str(text).split())
    return None


def _holder(text: Any) -> HtmlElement | None:
    """The element a text node (an lxml smart string) is part of."""
    parent = text.getparent()
    return parent.getparent() if parent is not None and text.is_tail else parent
