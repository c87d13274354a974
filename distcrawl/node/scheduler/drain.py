"""Drain detection: when the whole crawl has looked done for long enough that a node with
``DISTCRAWL_CLOSE_WHEN_DRAINED`` may stop."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from distcrawl.frontier.store import FrontierStore

__all__ = ["DrainWatch"]

logger = logging.getLogger(__name__)


class DrainWatch:
    """Tells when every shard, node and seed list has looked empty for ``drain_grace`` s (in
    revisit mode, also with no revisit due within ``revisit_grace`` s), once the crawl began."""

    def __init__(
        self,
        *,
        store: FrontierStore,
        node_id: str,
        drain_grace: float,
        revisit_grace: float | None = None,
    ) -> None:
        self.store = store
        self.node_id = node_id
        self.drain_grace = drain_grace
        self.revisit_grace = revisit_grace
        self._drained_since: float | None = None
        #: whether the frontier ever held a request (CLOSE_WHEN_DRAINED waits until it did)
        self._crawl_begun = False
        self._waiting_logged = False

    def crawl_begun(self) -> None:
        """The node took seeds: the crawl has begun."""
        self._crawl_begun = True

    async def check(self, *, busy: bool) -> bool:
        """Whether the crawl is drained; ``busy``: this node still holds work or writes."""
        if busy:
            self._drained_since = None
            return False
        if await self.drained():
            logger.info(
                "Frontier drained on every node for %.1fs: node %s closes",
                self.drain_grace,
                self.node_id,
            )
            return True
        return False

    async def drained(self) -> bool:
        """Whether every shard, node and seed list has looked empty for ``drain_grace`` s."""
        counts = await self.store.drained()
        if any(int(c) for c in counts):
            self._drained_since = None
            return False
        if self.revisit_grace is not None:
            revisits = await self.store.revisit_status(self.revisit_grace)
            if revisits["due_within_grace"] or revisits["due_queued"]:
                self._drained_since = None
                return False
        if not self._crawl_begun:
            # Nodes may start before the first seed: an empty frontier that never held a
            # request is a crawl not begun yet, not a drained one. Wait for work.
            self._crawl_begun = bool(await self.store.ever_used())
            if not self._crawl_begun:
                if not self._waiting_logged:
                    logger.info(
                        "Frontier empty and never seeded: node %s waits for the first seed (%s)",
                        self.node_id,
                        self.store.keys.start_urls,
                    )
                    self._waiting_logged = True
                return False
        now = time.monotonic()
        if self._drained_since is None:
            self._drained_since = now
            return False
        return now - self._drained_since >= self.drain_grace
