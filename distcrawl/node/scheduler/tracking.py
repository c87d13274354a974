"""A node's local bookkeeping around the frontier: what the engine finished, which links it
already sent, and how each site answered since the last flush."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from distcrawl.frontier.batch import Feedback

__all__ = [
    "DEFAULT_KNOWN_FINGERPRINTS",
    "PUBLISHED_SITES",
    "InProgress",
    "SiteActivity",
    "SiteFeedback",
]

#: the busiest sites a node names in its heartbeat (the status' busiest sites come from them)
PUBLISHED_SITES = 10
#: fingerprints a node remembers having sent, to skip links the dupefilter would refuse
DEFAULT_KNOWN_FINGERPRINTS = 200_000


class InProgress(set[Any]):
    """The engine's set of requests in progress, telling the scheduler when one leaves it.

    The engine removes a request from this set only after its download, its callback and
    every item pipeline call are finished (or it was dropped), which is the moment its outcome
    is durable: the one place every terminal path goes through.
    """

    def __init__(self, items: set[Any], on_done: Callable[[Any], None]) -> None:
        super().__init__(items)
        self._on_done = on_done

    def remove(self, request: Any) -> None:
        super().remove(request)
        self._on_done(request)


class SiteActivity:
    """Pages this node received per site since its last heartbeat (counted as Scrapy counts
    ``response_received_count``), for the site rates it publishes: the cluster's status ranks
    the busiest sites from what the nodes publish, with no per-site key read to find them."""

    def __init__(self) -> None:
        self._counts: dict[str, int] = {}

    def record(self, site: str) -> None:
        self._counts[site] = self._counts.get(site, 0) + 1

    def take(self) -> dict[str, int]:
        """The pages per site since the last call."""
        taken, self._counts = self._counts, {}
        return taken


class SiteFeedback:
    """How each site answered since the last flush: ok, throttled (429, or 503 with
    Retry-After), slow (over the latency target). Sent with the next flush."""

    def __init__(self, latency_target: float) -> None:
        self.latency_target = latency_target
        self._counts: dict[str, list[int]] = {}

    def record(self, site: str, status: int, has_retry_after: bool, latency: float) -> None:
        counts = self._counts.setdefault(site, [0, 0, 0])
        if status == 429 or (status == 503 and has_retry_after):
            counts[1] += 1
        elif latency > self.latency_target:
            counts[2] += 1
        else:
            counts[0] += 1

    def take(self) -> list[Feedback]:
        taken = [Feedback(site, ok, thr, slow) for site, (ok, thr, slow) in self._counts.items()]
        self._counts = {}
        return taken

    def restore(self, feedback: list[Feedback]) -> None:
        """Put back what a failed flush could not send."""
        for site, ok, throttled, slow in feedback:
            counts = self._counts.setdefault(site, [0, 0, 0])
            counts[0] += ok
            counts[1] += throttled
            counts[2] += slow
