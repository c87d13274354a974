"""A node's membership in the cluster: its heartbeats, the recovery of dead nodes' leases, and
its leaving at a clean stop."""

from __future__ import annotations

import json
import logging
import os
import socket
import time
from typing import TYPE_CHECKING, Any

from distcrawl.base.names import stats as stat_keys
from distcrawl.base.rates import OwnRates
from distcrawl.node.scheduler.tracking import PUBLISHED_SITES, SiteActivity, StartedTally

if TYPE_CHECKING:
    from collections.abc import Callable

    from scrapy.statscollectors import StatsCollector

    from distcrawl.frontier.store import FrontierStore
    from distcrawl.node.observe.buffer import Observations

__all__ = ["Membership"]

logger = logging.getLogger(__name__)


def _journal(stats: StatsCollector) -> dict[str, str]:
    """The node's journal directory, when its pipeline keeps one."""
    path = stats.get_value(stat_keys.JOURNAL_PATH)
    return {"journal": path} if isinstance(path, str) else {}


#: seconds between two heartbeats at least, when one goes early because the node's
#: observations are due (a fast node sends its products in chunks, not a beat per chunk)
EARLY_BEAT_SPACING = 0.25


class Membership:
    """Heart-beats every ``heartbeat_interval`` s and recovers nodes silent for
    ``heartbeat_timeout`` s. With ``observations``, each heartbeat carries what the node
    observed since the last one (one ``observe`` call in the same round trip), and one goes
    early, ``early_spacing`` s after the last at least, once they are
    :attr:`~distcrawl.node.observe.buffer.Observations.due`; ``on_recovered`` hears of the
    nodes this one recovered."""

    def __init__(
        self,
        *,
        store: FrontierStore,
        node_id: str,
        stats: StatsCollector,
        heartbeat_interval: float,
        heartbeat_timeout: float,
        sites: SiteActivity | None = None,
        started: StartedTally | None = None,
        observations: Observations | None = None,
        on_recovered: Callable[[list[str], int], None] | None = None,
        early_spacing: float = EARLY_BEAT_SPACING,
    ) -> None:
        self.store = store
        self.observations = observations
        self.early_spacing = early_spacing
        self.on_recovered = on_recovered
        self.node_id = node_id
        self.stats = stats
        self.heartbeat_interval = heartbeat_interval
        self.heartbeat_timeout = heartbeat_timeout
        self._last_heartbeat = time.monotonic()
        self._last_recovery = 0.0
        self._recover_after = 0.0  # monotonic time before which this node recovers nobody
        #: this node's rates, published with its heartbeat (one set of figures for all readers)
        self._own_rates = OwnRates()
        #: pages per site since the last heartbeat (its busiest sites are published)
        self._sites = sites or SiteActivity()
        #: requests handed to the engine not yet in the stats: added before they are published
        self._started = started

    def recover_after(self, when: float) -> None:
        """Recover nobody before ``when``: after an outage every heartbeat went stale, ours as
        well as the live nodes', and silence counts again only from the end of it."""
        self._recover_after = max(self._recover_after, when)

    async def tick(self, info: dict[str, Any]) -> bool:
        """Heart-beat and recover when due; returns whether dead nodes' work came back."""
        now = time.monotonic()
        since = now - self._last_heartbeat
        early = self.observations is not None and self.observations.due
        if since >= self.heartbeat_interval or (early and since >= self.early_spacing):
            # this node's beats came this far apart (its first: since it began)
            gap = since
            await self.heartbeat(info)
            late = max(self.heartbeat_timeout / 2, 2 * self.heartbeat_interval)
            if time.monotonic() - now > self.heartbeat_timeout / 2 or gap > late:
                # the heartbeat waited on a Redis that stood still, or this node's own beats
                # were held up (slow replies, a stalled loop): so may everyone's have been
                self.recover_after(time.monotonic() + self.heartbeat_timeout)
        now = time.monotonic()
        due = now - self._last_recovery >= max(1.0, self.heartbeat_timeout / 4)
        if due and now >= self._recover_after:
            return await self.recover()
        return False

    async def heartbeat(self, info: dict[str, Any]) -> None:
        if self._started is not None:
            self._started.add_to_stats()
        stats = {
            k: v
            for k, v in self.stats.get_stats().items()
            if isinstance(v, (int, float)) and not isinstance(v, bool)
        }
        own = self._own_rates
        rates = own.update(int(time.monotonic() * 1000), stats, self._sites.take())
        payload = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            **_journal(self.stats),
            **info,
            "stats": stats,
            "rates": rates,
            # the busiest sites over the same window as the rates
            "sites": own.sites(PUBLISHED_SITES),
        }
        info_json = json.dumps(payload, default=str)
        observations = self.observations
        taken = observations.take() if observations is not None else None
        if taken is None:
            await self.store.heartbeat(self.node_id, info_json)
        else:
            assert observations is not None
            try:
                _, observed = await self.store.heartbeat_observed(
                    self.node_id, info_json, taken.delta, observations.limits
                )
            except BaseException:
                observations.restore(taken)
                raise
            observations.answered(taken, observed)
        self._last_heartbeat = time.monotonic()

    async def leave(self, info: dict[str, Any], *, reason: str, unstarted: int) -> None:
        """A clean stop: a last heartbeat (the last stats, e.g. products left in the pipeline's
        journal, stay readable in ``status`` once the node is gone), then every lease of the
        node, ``unstarted`` of them never started, goes back to the queue."""
        await self.heartbeat(info)
        moved = await self.store.release(self.node_id)
        logger.info(
            "Node %s closing (%s): returned %d requests to the frontier (%d prefetched, "
            "never started)",
            self.node_id,
            reason,
            moved,
            unstarted,
        )
        self.stats.inc_value(stat_keys.RETURNED, int(moved))

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
        self.stats.inc_value(stat_keys.RECOVERED, int(reqs))
        self.store.views.poke()
        if self.on_recovered is not None:
            self.on_recovered(list(nodes), int(reqs))
        return True
