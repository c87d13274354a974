"""Solo mode: a node alone in a crawl it began hands what it finds to Scrapy at once, from its
memory, and writes it as its own leases; every other node makes the crawl shared before its
first push or lease (the handshake: :mod:`distcrawl.frontier.protocol.solo`).

Why it cannot fetch a URL twice: while a node holds ``solo`` no other node or tool has written
a fingerprint since the crawl began (each shares the crawl first, and the solo node writes
what it holds before it shares it), so the shared dupefilter holds only fingerprints this node
sent, all of them in its memory of sent fingerprints as long as that memory has not forgotten
any. A request that memory does not know is certainly new.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from distcrawl.frontier.store import FrontierStore

__all__ = ["SoloMode"]

logger = logging.getLogger(__name__)

#: states: the node must share the crawl before it writes; it is solo; it stops handing out
#: requests from memory and shares the crawl once it wrote them all; the crawl is shared
_JOINING, _SOLO, _LEAVING, _SHARED = "joining", "solo", "leaving", "shared"


class SoloMode:
    """One node's side of the handshake, driven by the I/O loop (``gate`` before each round
    trip's writes, ``after_flush`` after it) and asked by the scheduler (``solo``).

    A solo node hands out requests from memory only within half a heartbeat timeout of its
    last round trip that found it still solo: a node that stood still longer (frozen, or its
    loop starved) may have been presumed dead meanwhile, and another node may have shared the
    crawl over it.
    """

    def __init__(
        self,
        *,
        store: FrontierStore,
        node_id: str,
        heartbeat_timeout: float,
    ) -> None:
        self.store = store
        self.node_id = node_id
        self.window = heartbeat_timeout / 2
        self.state = _JOINING
        self._valid_until = 0.0
        self._waiting_for = ""

    @property
    def solo(self) -> bool:
        """Whether the node may hand a request it found to Scrapy from memory now."""
        return self.state == _SOLO and time.monotonic() < self._valid_until

    @property
    def blocked(self) -> bool:
        """Whether the node waits for the solo node to share the crawl (it writes nothing)."""
        return self.state == _JOINING

    async def open(self, *, eligible: bool) -> None:
        """At the node's open, once it is a member: an ``eligible`` node (see the scheduler)
        becomes solo if the crawl never held a request and nobody claimed or shared it."""
        if not eligible or self.state != _JOINING:
            return
        began = time.monotonic()
        if await self.store.ever_used() or not await self.store.claim_solo(self.node_id):
            return
        self.state = _SOLO
        self._valid_until = began + self.window
        logger.info(
            "Node %s is alone in a crawl it began (solo mode): Scrapy gets what it finds at "
            "once, each request written to the frontier as the node's own lease; a node that "
            "joins ends solo mode",
            self.node_id,
        )

    def leave(self, why: str) -> None:
        """Stop handing out requests from memory at once; the crawl is shared once the node
        wrote every request it handed out (``after_flush``)."""
        if self.state != _SOLO:
            return
        self.state = _LEAVING
        logger.info("Node %s ends solo mode (%s)", self.node_id, why)

    async def gate(self) -> bool:
        """Before a round trip's writes: whether the node may write now. A solo node reads
        whether it still is and whether another node asked it to share the crawl; a node
        that is not solo yet makes the crawl shared, or waits for the solo node to."""
        state = self.state
        if state == _SOLO:
            began = time.monotonic()
            found = await self.store.solo_state()
            if found.holder != self.node_id:
                self.leave("the crawl is shared already")
            elif found.end_asked:
                self.leave("another node joins the crawl")
            else:
                self._valid_until = began + self.window
            return True
        if state != _JOINING:
            return True
        got = await self.store.share(self.node_id)
        if got.shared:
            self.state = _SHARED
            if got.took_over and got.holder != self.node_id:
                logger.warning(
                    "Node %s shares the crawl: its solo node %s is no live member any more "
                    "(its leases, its own included, are recovered like any)",
                    self.node_id,
                    got.holder,
                )
            elif self._waiting_for:
                logger.info("Node %s: the crawl is shared, the node starts", self.node_id)
            return True
        if got.holder != self._waiting_for:
            self._waiting_for = got.holder
            logger.info(
                "Node %s waits for node %s to end solo mode (it writes what it holds first) "
                "before it pushes or leases anything",
                self.node_id,
                got.holder,
            )
        return False

    async def after_flush(self, *, own_pending: bool) -> None:
        """After a round trip: a leaving node whose own requests are all written shares the
        crawl (and drops the request to end solo mode)."""
        if self.state == _LEAVING and not own_pending:
            await self.store.end_solo()
            self.state = _SHARED
            logger.info(
                "Node %s wrote every request it handed out from memory: the crawl is shared",
                self.node_id,
            )
