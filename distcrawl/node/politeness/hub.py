"""A node's politeness beside its scheduler, one per crawler: what each site's robots.txt asks
(:mod:`.robots`), the server budgets (:mod:`.servers`), the holds the node learnt from its own
answers (Retry-After), the sites that time out, and the leases it gives back to the frontier
unstarted. The scheduler's gate, the robots.txt middleware and the politeness middleware all
reach it through :meth:`Politeness.of`."""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any
from weakref import WeakKeyDictionary

from scrapy.utils.httpobj import urlparse_cached

from distcrawl.base.config import SETTINGS
from distcrawl.base.names import reasons
from distcrawl.base.names import stats as stat_keys
from distcrawl.base.names.status import RETRY_AFTER_HOLD
from distcrawl.frontier import connection
from distcrawl.frontier.protocol.servers import ServerLimits
from distcrawl.node import signals as dc_signals
from distcrawl.node.politeness.robots import RobotsRules
from distcrawl.node.politeness.servers import ServerBudget

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler

    from distcrawl.frontier.batch import Lease, SiteBudget
    from distcrawl.frontier.store import FrontierStore
    from distcrawl.node.scheduler.tracking import SiteFeedback

__all__ = ["SLOW_FOR", "Politeness"]

logger = logging.getLogger(__name__)

#: seconds a site that timed out counts as slow on the node: it never takes more than its
#: share of the node's download slots, even when no other site waits
SLOW_FOR = 60.0

_BY_CRAWLER: WeakKeyDictionary[Crawler, Politeness] = WeakKeyDictionary()


class Politeness:
    """What a node knows and does for the politeness of its sites; see the module.

    Settings: those of :class:`RobotsRules` and :class:`ServerBudget`, ``RETRY_AFTER_MAX``,
    ``ROBOTSTXT_OBEY``.
    """

    def __init__(self, crawler: Crawler) -> None:
        s = crawler.settings

        def get(name: str) -> Any:
            return SETTINGS.value(s, name)

        assert crawler.stats is not None
        self.stats = crawler.stats
        server: dict[str, Any] = get("DISTCRAWL_SERVER_LIMITS")
        self.signals = crawler.signals
        self.obey_robots: bool = get("ROBOTSTXT_OBEY")
        self.retry_after_max: float = get("RETRY_AFTER_MAX")
        self.robots = RobotsRules(
            max_delay=get("DISTCRAWL_MAX_CRAWL_DELAY"),
            over_max=get("DISTCRAWL_CRAWL_DELAY_OVER_MAX"),
            hold_max=get("DISTCRAWL_ROBOTS_HOLD_MAX"),
            backoff=(
                get("RETRY_BACKOFF_BASE"),
                get("RETRY_BACKOFF_MAX"),
                get("RETRY_BACKOFF_JITTER"),
            ),
            ttl=get("DISTCRAWL_ROBOTS_TTL"),
            stats=self.stats,
            signals=self.signals,
        )
        self.servers = ServerBudget(
            limits=ServerLimits(
                int(server.get("concurrency", 0)),
                float(server.get("rate", 0.0)),
                get("DISTCRAWL_SITE_BURST"),
            ),
            dns_ttl=get("DISTCRAWL_DNS_TTL"),
            heartbeat_timeout=get("DISTCRAWL_HEARTBEAT_TIMEOUT"),
            stats=self.stats,
        )
        self.store: FrontierStore | None = None
        self.budget: SiteBudget | None = None
        self.node_id = ""
        #: how sites answered, sent with the scheduler's next round trip (set by it)
        self.feedback: SiteFeedback | None = None
        #: site -> monotonic time its hold (a Retry-After this node met) ends
        self.holds: dict[str, float] = {}
        #: site -> monotonic time until which it counts as slow (it timed out)
        self.slow: dict[str, float] = {}
        #: leases to return to the frontier unstarted, at the next round trip
        self.given_back: list[Lease] = []
        #: the robots.txt middleware's ``robot_parser`` (None: robots.txt is not obeyed)
        self.robots_parser: Callable[[Request], Awaitable[Any]] | None = None
        #: requests the scheduler handed to the engine (those of a lease, or the node's own):
        #: True, or False for one its gate held after its lease spent its site's rate token
        #: (it takes a new token before it is sent)
        self.passed: WeakKeyDictionary[Request, bool] = WeakKeyDictionary()
        #: called with a site whose hold changed on this node
        self.on_hold: Callable[[str], None] = lambda site: None
        self._logged_caps: set[str] = set()

    @classmethod
    def of(cls, crawler: Crawler) -> Politeness:
        politeness = _BY_CRAWLER.get(crawler)
        if politeness is None:
            politeness = _BY_CRAWLER[crawler] = cls(crawler)
        return politeness

    def open(self, store: FrontierStore, node_id: str, budget: SiteBudget) -> None:
        """The scheduler opened: robots.txt rules and server budgets reach the frontier."""
        self.store, self.budget, self.node_id = store, budget, node_id
        self.robots.store = store
        self.servers.start(store, node_id)

    async def close(self) -> None:
        await self.servers.stop()

    async def before_flush(self) -> None:
        """Leases given back go to the frontier before the next round trip."""
        store, leases = self.store, self.given_back
        if store is None or not leases:
            return
        self.given_back = []
        try:
            await store.release(self.node_id, leases)
        except BaseException:
            self.given_back[:0] = leases
            raise

    def requeued(self, request: Request, reason: str) -> None:
        """An operator re-queued ``request``, a dead letter for ``reason``: a site given up on
        because its robots.txt could not be read is tried again."""
        if reason == reasons.ROBOTS_UNAVAILABLE:
            self.robots.forget(urlparse_cached(request).netloc)

    # -- what sites answered ----------------------------------------------------------------

    def retry_after(self, site: str, seconds: float) -> int:
        """``site`` answered 429 or 503 with Retry-After: ``seconds``. Every request of it on
        this node waits that long (at most ``RETRY_AFTER_MAX``), and so will every node once the
        frontier has it. Returns the hold in ms (0: none, Retry-After: 0)."""
        if seconds > self.retry_after_max:
            self.stats.inc_value(stat_keys.RETRY_AFTER_CAPPED)
            if site not in self._logged_caps:
                self._logged_caps.add(site)
                logger.warning(
                    "Site %s asked to wait %.0fs (Retry-After): capped at RETRY_AFTER_MAX, %.0fs",
                    site,
                    seconds,
                    self.retry_after_max,
                )
            seconds = self.retry_after_max
        if seconds <= 0:
            return 0
        until = time.monotonic() + seconds
        if until > self.holds.get(site, 0.0) + 0.5:
            self.stats.inc_value(stat_keys.SITE_HOLDS(RETRY_AFTER_HOLD))
            self.signals.send_catch_log(
                dc_signals.site_held, site=site, cause=RETRY_AFTER_HOLD, seconds=seconds
            )
        self.holds[site] = max(until, self.holds.get(site, 0.0))
        self.on_hold(site)
        return int(seconds * 1000)

    def held_for(self, site: str) -> float:
        """Seconds the hold of ``site`` this node knows of still lasts (0: none)."""
        until = self.holds.get(site)
        if until is None:
            return 0.0
        left = until - time.monotonic()
        if left <= 0:
            del self.holds[site]
            return 0.0
        return left

    def timed_out(self, site: str, seconds: float) -> None:
        """A download of ``site`` timed out after ``seconds``: it counts as slow for a while,
        and as a slow answer for its shared rate (an adaptive cut)."""
        self.slow[site] = time.monotonic() + SLOW_FOR
        if self.feedback is not None:
            self.feedback.timed_out(site, seconds)

    def is_slow(self, site: str) -> bool:
        until = self.slow.get(site)
        if until is None:
            return False
        if until <= time.monotonic():
            del self.slow[site]
            return False
        return True

    async def outside_token(self, site: str) -> float:
        """Seconds a request outside the queue must wait for ``site``'s budget (0: its token is
        spent, go): holds, the Crawl-delay and the rate, as the frontier keeps them."""
        store, budget = self.store, self.budget
        if store is None or budget is None:
            return 0.0
        try:
            wait_ms = await store.take_token(site, budget, debt=False)
        except connection.REDIS_FAILURES as exc:
            logger.debug("Budget of %s not read: %s", site, exc)
            return 0.0
        return int(wait_ms) / 1000
