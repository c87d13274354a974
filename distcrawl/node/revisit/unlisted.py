"""[revisit] Products that vanished from every listing: marked gone without their page saying so.

A shop often keeps a discontinued product's page up (``200``) and only drops it from its
listings. In revisit mode a listing page's revisit state carries the product links it showed
(``k``: the sorted canonical URLs, zlib-compressed, base64: 8 to 20 bytes per link, in the
listing's own entry, so no key grows per product). At each visit of a listing the scheduler
compares: a product the listing linked last time and no longer does is *unlisted* from now on
(``HSETNX {spider}:unlisted url ms``); every product a listing links (a 304 links what it
linked last time) is listed again (``HDEL``). The hash holds only products that some listing
dropped and none has linked since.

A product unlisted for longer than ``DISTCRAWL_UNLISTED_GRACE`` (default: twice the longest
listing wait, ``2 * listing interval * max(backoff cap, 1)``, so that the other listings, where
a product that moved from page 1 to page 2 shows up again, are all visited in between) is gone:
every node reads the hash every tenth of the grace (2 to 60 s; the hash is read whole, so it
is meant for thousands of unlisted products, not millions), and a visit of that product's
page, whatever it answers, becomes a ``gone`` revisit (``gone_at`` set in MongoDB, the page on
the slow schedule of gone pages). A listing that links it again removes it from the hash:
its next visit stores it as a product again, which clears ``gone_at``.

Cost: the ``k`` state of listing pages (8 to 20 bytes per product link) and ~100 bytes per
unlisted product while it stays unlisted. Off unless revisit mode revisits listing pages;
``DISTCRAWL_UNLISTED=0`` turns it off.
"""

from __future__ import annotations

import base64
import logging
import time
import zlib
from collections.abc import Iterable
from typing import Any

__all__ = ["LISTED_META", "UNLISTED_META", "UnlistedWatch", "decode_links", "encode_links"]

logger = logging.getLogger(__name__)

#: request meta key: the canonical product URLs a listing page links (set by the spider)
LISTED_META = "distcrawl_listed"
#: request meta key: set on a product page's request when its product is unlisted (gone)
UNLISTED_META = "distcrawl_unlisted"
#: seconds between two reads of the unlisted hash by one node: a tenth of the grace, within
#: these bounds
REFRESH_S = (2.0, 60.0)


def encode_links(urls: Iterable[str]) -> str:
    """The compact form of a set of URLs (sorted, newline-joined, zlib, base64)."""
    text = "\n".join(sorted(set(urls))).encode("utf-8", "surrogateescape")
    return base64.b64encode(zlib.compress(text, 9)).decode("ascii")


def decode_links(value: Any) -> set[str] | None:
    """The URLs of :func:`encode_links`' output; None when *value* is not such a string."""
    if not isinstance(value, str):
        return None
    try:
        text = zlib.decompress(base64.b64decode(value, validate=True))
    except (ValueError, zlib.error):
        return None
    return {u for u in text.decode("utf-8", "surrogateescape").split("\n") if u}


class UnlistedWatch:
    """One node's side of the unlisted hash: the listing visits it still has to write, and the
    products it knows to be gone for want of a listing."""

    def __init__(self, key: str, grace_s: float) -> None:
        self.key = key
        self.grace_s = grace_s
        self.refresh_s = min(REFRESH_S[1], max(REFRESH_S[0], grace_s / 10))
        self._dropped: set[str] = set()
        self._listed: set[str] = set()
        self._next_refresh = 0.0
        #: products unlisted for longer than the grace: a visit of their page marks them gone
        self.gone: frozenset[str] = frozenset()

    def visited(self, links: set[str], before: set[str] | None) -> int:
        """A listing visit that links ``links`` and linked ``before`` last time; returns how
        many products it dropped."""
        dropped = before - links if before else set()
        self._listed |= links
        self._listed -= dropped
        self._dropped -= links
        self._dropped |= dropped
        return len(dropped)

    def pending(self) -> bool:
        return bool(self._dropped or self._listed)

    async def tick(self, client: Any, now: float | None = None) -> None:
        """Write what listing visits found, and now and then read which products are gone
        (``now``: unix seconds on the shared clock, Redis'). On an error the writes stay for
        the next tick."""
        now = time.time() if now is None else now
        if self._dropped or self._listed:
            dropped, listed = self._dropped, self._listed
            self._dropped, self._listed = set(), set()
            try:
                pipe = client.pipeline(transaction=False)
                if listed:
                    pipe.hdel(self.key, *sorted(listed))
                for url in sorted(dropped):
                    pipe.hsetnx(self.key, url, int(now * 1000))
                await pipe.execute()
            except BaseException:
                self._dropped |= dropped - self._listed
                self._listed |= listed - self._dropped
                raise
        if now >= self._next_refresh:
            self._next_refresh = now + self.refresh_s
            found = await client.hgetall(self.key)
            limit = (now - self.grace_s) * 1000
            gone = set()
            for url, since in found.items():
                try:
                    if int(since) <= limit:
                        gone.add(url.decode("utf-8", "surrogateescape"))
                except ValueError:
                    continue
            if gone - self.gone:
                logger.info(
                    "%d products are in no listing for %.0fs: gone at their next visit",
                    len(gone - self.gone),
                    self.grace_s,
                )
            self.gone = frozenset(gone)
