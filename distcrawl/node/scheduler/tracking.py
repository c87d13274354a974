"""A node's local bookkeeping around the frontier: what the engine finished, which links it
already sent, and how each site answered since the last flush."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from distcrawl.base.names import stats as stat_keys
from distcrawl.frontier.batch import Feedback

if TYPE_CHECKING:
    from scrapy.statscollectors import StatsCollector

__all__ = [
    "DEFAULT_KNOWN_FINGERPRINTS",
    "PUBLISHED_SITES",
    "InProgress",
    "SiteActivity",
    "SiteFeedback",
    "StartedTally",
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


class StartedTally:
    """Leased requests handed to the engine since the stats last heard of them, counted here
    and added to the stats (``frontier/started``, ``scheduler/dequeued``,
    ``scheduler/dequeued/redis``) when those are read: at each heartbeat, which publishes them,
    and at the close. Scrapy's stats collector costs some 17,000 instructions a call (its
    ``__getattribute__`` and spider-argument check), three calls for every page."""

    __slots__ = ("count", "stats")

    def __init__(self, stats: StatsCollector) -> None:
        self.stats = stats
        self.count = 0

    def add_to_stats(self) -> None:
        n, self.count = self.count, 0
        if n:
            stats = self.stats
            stats.inc_value(stat_keys.STARTED, n)
            stats.inc_value(stat_keys.SCHEDULER_DEQUEUED, n)
            stats.inc_value(stat_keys.SCHEDULER_DEQUEUED_REDIS, n)


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
    Retry-After), slow (over the latency target, or timed out), when the newest throttled or
    slow one was sent, and the longest hold a Retry-After asked for. Sent with the next
    flush."""

    def __init__(self, latency_target: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.latency_target = latency_target
        self._clock = clock
        #: site -> [ok, throttled, slow, newest sending of a throttled or slow one, hold ms]
        self._counts: dict[str, list[Any]] = {}

    def _of(self, site: str) -> list[Any]:
        counts = self._counts.get(site)
        if counts is None:
            counts = self._counts[site] = [0, 0, 0, None, 0]
        return counts

    def record(
        self, site: str, status: int, has_retry_after: bool, latency: float, hold_ms: int = 0
    ) -> None:
        counts = self._of(site)
        if status == 429 or (status == 503 and has_retry_after):
            counts[1] += 1
        elif latency > self.latency_target:
            counts[2] += 1
        else:
            counts[0] += 1
            return
        self._sent(counts, self._clock() - latency)
        counts[4] = max(counts[4], hold_ms)

    def timed_out(self, site: str, seconds: float) -> None:
        """A download of ``site`` failed after ``seconds`` (a timeout): a slow answer."""
        counts = self._of(site)
        counts[2] += 1
        self._sent(counts, self._clock() - seconds)

    @staticmethod
    def _sent(counts: list[Any], at: float) -> None:
        if counts[3] is None or at > counts[3]:
            counts[3] = at

    def take(self) -> list[Feedback]:
        now = self._clock()
        taken = [
            Feedback(
                site,
                ok,
                thr,
                slow,
                0 if sent is None else max(0, round((now - sent) * 1000)),
                hold,
            )
            for site, (ok, thr, slow, sent, hold) in self._counts.items()
        ]
        self._counts = {}
        return taken

    def restore(self, feedback: list[Feedback]) -> None:
        """Put back what a failed flush could not send."""
        now = self._clock()
        for site, ok, throttled, slow, newest, hold in feedback:
            counts = self._of(site)
            counts[0] += ok
            counts[1] += throttled
            counts[2] += slow
            if throttled or slow:
                self._sent(counts, now - newest / 1000)
            counts[4] = max(counts[4], hold)
