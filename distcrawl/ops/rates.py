"""Rates of a crawl derived from successive snapshots: each node's pages, products and acks
per minute, and how fast the backlog grows or shrinks."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from distcrawl.base.rates import counters, prune
from distcrawl.ops.snapshot import Snapshot

__all__ = ["DEFAULT_RATE_WINDOW", "RateTracker", "backlog"]

#: seconds of node samples over which pages/min and products/min are averaged
DEFAULT_RATE_WINDOW = 60.0


def backlog(snapshot: Snapshot) -> int:
    """Requests not finished yet: queued, waiting for their site, parked, in flight, being
    seeded, and seeds waiting."""
    nodes = snapshot.nodes.values()
    return int(
        snapshot.queued
        + snapshot.waiting_total
        + snapshot.parked
        + snapshot.start_list
        + snapshot.seeds_returned
        + sum(n.leases + n.seeding for n in nodes)
    )


@dataclass
class RateTracker:
    """Remembers recent samples of every node's counters and of the backlog, to derive rates.

    A node's sample is timed by its own heartbeat (server clock), so samples taken between two
    heartbeats add nothing and a slow reader does not bend the rates.
    """

    window: float = DEFAULT_RATE_WINDOW
    _nodes: dict[str, deque[tuple[int, dict[str, float]]]] = field(default_factory=dict)
    _backlog: deque[tuple[int, int]] = field(default_factory=deque)

    def update(self, snapshot: Snapshot) -> None:
        window_ms = int(self.window * 1000)
        for name, node in snapshot.nodes.items():
            stamp = node.info_heartbeat_ms
            if stamp is None or not isinstance(node.info.get("stats"), dict):
                continue
            ring = self._nodes.setdefault(name, deque())
            sample = counters(node.stats)
            if ring and stamp <= ring[-1][0]:
                continue
            if ring and sample["pages"] < ring[-1][1]["pages"]:
                ring.clear()  # the node restarted under the same id: its counters began again
            ring.append((stamp, sample))
            prune(ring, stamp - window_ms)
        for gone in set(self._nodes) - set(snapshot.nodes):
            del self._nodes[gone]
        at = snapshot.at_ms
        if not self._backlog or at > self._backlog[-1][0]:
            self._backlog.append((at, backlog(snapshot)))
            prune(self._backlog, at - window_ms)

    def node_rates(self, name: str) -> dict[str, float] | None:
        """Per-minute rates of a node's counters, or None before two distinct samples."""
        ring = self._nodes.get(name)
        if not ring or len(ring) < 2:
            return None
        (t0, first), (t1, last) = ring[0], ring[-1]
        minutes = (t1 - t0) / 60_000
        return {k: (last[k] - first[k]) / minutes for k in last}

    def backlog_per_min(self) -> float | None:
        """How fast the backlog grows (> 0) or shrinks (< 0), per minute."""
        if len(self._backlog) < 2:
            return None
        (t0, first), (t1, last) = self._backlog[0], self._backlog[-1]
        return (last - first) / ((t1 - t0) / 60_000)
