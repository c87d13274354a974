"""A node's membership in the cluster: heartbeats, recovery of dead nodes, drain detection."""

from __future__ import annotations

import json
import logging
import os
import socket
import time
from typing import TYPE_CHECKING, Any

from distcrawl.base.rates import OwnRates

if TYPE_CHECKING:
    from scrapy.statscollectors import StatsCollector

    from distcrawl.frontier.store import FrontierStore

__all__ = ["Membership"]

logger = logging.getLogger(__name__)


class Membership:
    """Heart-beats every ``heartbeat_interval`` s, recovers nodes silent for
    ``heartbeat_timeout`` s, and tells when the whole cluster looked drained for
    ``drain_grace`` s."""

    def __init__(
        self,
        store: FrontierStore,
        node_id: str,
        stats: StatsCollector,
        *,
        heartbeat_interval: float,
        heartbeat_timeout: float,
        drain_grace: float,
    ) -> None:
        self.store = store
        self.node_id = node_id
        self.stats = stats
        self.heartbeat_interval = heartbeat_interval
        self.heartbeat_timeout = heartbeat_timeout
        self.drain_grace = drain_grace
        self._last_heartbeat = 0.0
        self._last_recovery = 0.0
        self._recover_after = 0.0  # monotonic time before which this node recovers nobody
        self._drained_since: float | None = None
        #: this node's rates, published with its heartbeat (one set of figures for all readers)
        self._own_rates = OwnRates()
        #: whether the frontier ever held a request (CLOSE_WHEN_DRAINED waits until it did)
        self._crawl_begun = False
        self._waiting_logged = False
        #: [revisit] revisit mode: drained also means no revisit falls due within this many s
        self.revisit_grace: float | None = None

    def crawl_begun(self) -> None:
        """The node took seeds: the crawl has begun."""
        self._crawl_begun = True

    def recover_after(self, when: float) -> None:
        """Recover nobody before ``when``: after an outage every heartbeat went stale, ours as
        well as the live nodes', and silence counts again only from the end of it."""
        self._recover_after = max(self._recover_after, when)

    async def tick(self, info: dict[str, Any]) -> bool:
        """Heart-beat and recover when due; returns whether dead nodes' work came back."""
        now = time.monotonic()
        if now - self._last_heartbeat >= self.heartbeat_interval:
            await self.heartbeat(info)
        due = now - self._last_recovery >= max(1.0, self.heartbeat_timeout / 4)
        if due and now >= self._recover_after:
            return await self.recover()
        return False

    async def heartbeat(self, info: dict[str, Any]) -> None:
        stats = {
            k: v
            for k, v in self.stats.get_stats().items()
            if isinstance(v, (int, float)) and not isinstance(v, bool)
        }
        payload = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            **info,
            "stats": stats,
            "rates": self._own_rates.update(int(time.monotonic() * 1000), stats),
        }
        await self.store.heartbeat(self.node_id, json.dumps(payload, default=str))
        self._last_heartbeat = time.monotonic()

    async def recover(self) -> bool:
        self._last_recovery = time.monotonic()
        nodes, reqs = await self.store.recover(self.node_id, int(self.heartbeat_timeout * 1000))
        if not nodes:
            return False
        logger.warning(
            "Recovered %d requests from dead node(s) %s (no heartbeat for %.0fs)",
            reqs,
            ", ".join(nodes),
            self.heartbeat_timeout,
        )
        self.stats.inc_value("frontier/recovered", int(reqs))
        self.store.views.poke()
        return True

    def not_drained(self) -> None:
        self._drained_since = None

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
