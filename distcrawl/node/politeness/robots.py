"""What each site's robots.txt asks of a node, and what the node tells the cluster of it.

A robots.txt that answers (2xx, or a 4xx: no rules, RFC 9309) is *read*: its Crawl-delay, if
any, is written into the site's shared budget for every node (capped at
``DISTCRAWL_MAX_CRAWL_DELAY``, or the site set aside, ``DISTCRAWL_CRAWL_DELAY_OVER_MAX``). One
that answers 5xx (or 429), times out or cannot be reached has *failed*: RFC 9309 says to assume
it forbids everything, so the site is held for every node and its robots.txt fetched again with
backoff (``RETRY_BACKOFF_*``); once it has failed for ``DISTCRAWL_ROBOTS_HOLD_MAX`` the site is
*given up*: its requests become dead letters (``robots_unavailable``) an operator can re-queue.
The failure is shared through the site's robots.txt record in Redis, so the nodes take turns
instead of each fetching a failing robots.txt.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from distcrawl.base.backoff import backoff_delay
from distcrawl.base.names import reasons
from distcrawl.base.names import stats as stat_keys
from distcrawl.base.names.status import CAPPED_DELAY, ROBOTS_TXT_DELAY, ROBOTS_UNAVAILABLE_HOLD
from distcrawl.frontier import connection
from distcrawl.node import signals as dc_signals

if TYPE_CHECKING:
    from scrapy.signalmanager import SignalManager
    from scrapy.statscollectors import StatsCollector

    from distcrawl.frontier.store import FrontierStore

__all__ = [
    "FAILURE_FIELDS",
    "GIVEN_UP_RECHECK",
    "RobotsRules",
    "RobotsState",
    "RobotsUnavailable",
    "SharedFailure",
    "SiteRobots",
]

logger = logging.getLogger(__name__)

#: seconds a node trusts "given up" before it reads the shared record again (an operator who
#: re-queued the site's dead letters deleted it: the site is tried again)
GIVEN_UP_RECHECK = 60.0
#: the fields of a site's shared robots.txt record that say it failed
FAILED_FIELD, ATTEMPTS_FIELD, RETRY_AT_FIELD, GAVE_UP_FIELD = (
    "failed",
    "attempts",
    "retry_at",
    "gave_up",
)
FAILURE_FIELDS = (FAILED_FIELD, ATTEMPTS_FIELD, RETRY_AT_FIELD, GAVE_UP_FIELD)


class RobotsUnavailable(Exception):
    """A site's shared robots.txt record says it cannot be read now (another node's fetch
    failed and its retry is not due, or it was given up): not fetched again here."""

    def __init__(self, failure: SharedFailure) -> None:
        super().__init__("robots.txt unavailable (shared failure record)")
        self.failure = failure


class RobotsState(enum.Enum):
    FETCHING = "fetching"
    READ = "read"
    FAILED = "failed"
    GIVEN_UP = "given_up"


@dataclass
class SiteRobots:
    """One netloc's robots.txt as this node knows it."""

    site: str
    state: RobotsState
    #: the Crawl-delay in force (seconds; 0: none), after the cap
    delay: float = 0.0
    #: the site asks for more than DISTCRAWL_MAX_CRAWL_DELAY and is set aside
    set_aside: bool = False
    #: monotonic time the frontier had the delay: a request leased in a round trip begun
    #: earlier was leased without it
    delay_known: float = 0.0
    #: monotonic time a failed robots.txt may be fetched again (given up: read again)
    retry_at: float = 0.0


@dataclass(frozen=True)
class SharedFailure:
    """A site's robots.txt failure as its shared record holds it (server times, ms)."""

    failed_ms: int
    attempts: int
    retry_at_ms: int
    gave_up_ms: int

    @classmethod
    def of(cls, fields: dict[Any, Any]) -> SharedFailure | None:
        def number(name: str) -> int:
            value = fields.get(name) or fields.get(name.encode())
            try:
                return int(float(value)) if value is not None else 0
            except (TypeError, ValueError):
                return 0

        failed = number(FAILED_FIELD)
        if not failed:
            return None
        return cls(failed, number(ATTEMPTS_FIELD), number(RETRY_AT_FIELD), number(GAVE_UP_FIELD))


class RobotsRules:
    """The robots.txt of every site this node met, and what it asks of the site's budget.

    Settings: ``DISTCRAWL_MAX_CRAWL_DELAY``, ``DISTCRAWL_CRAWL_DELAY_OVER_MAX``,
    ``DISTCRAWL_ROBOTS_HOLD_MAX``, ``RETRY_BACKOFF_BASE``, ``RETRY_BACKOFF_MAX``,
    ``RETRY_BACKOFF_JITTER``, ``DISTCRAWL_ROBOTS_TTL`` (read by :class:`Politeness`).
    """

    def __init__(
        self,
        *,
        max_delay: float,
        over_max: str,
        hold_max: float,
        backoff: tuple[float, float, float],
        ttl: int,
        stats: StatsCollector,
        signals: SignalManager,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_delay = max_delay
        self.over_max = over_max
        self.hold_max = hold_max
        self.backoff = backoff
        self.ttl = ttl
        self.stats = stats
        self.signals = signals
        self.clock = clock
        #: the frontier (set when the node's scheduler opens; None: nothing is shared)
        self.store: FrontierStore | None = None
        self._sites: dict[str, SiteRobots] = {}
        #: called with a netloc whose robots.txt state changed (the scheduler's gate)
        self.listeners: list[Callable[[str], None]] = []
        self._forgetting: dict[str, asyncio.Future[Any]] = {}
        #: site -> the netloc whose robots.txt this node read last for it
        self._netloc_of: dict[str, str] = {}

    def get(self, netloc: str) -> SiteRobots | None:
        return self._sites.get(netloc)

    def plain(self, site: str) -> bool:
        """Whether robots.txt of ``site`` was read on this node and asks nothing of its
        budget (no Crawl-delay, not set aside): its requests may skip the queue (solo mode)."""
        netloc = self._netloc_of.get(site)
        entry = self._sites.get(netloc) if netloc is not None else None
        return (
            entry is not None
            and entry.state is RobotsState.READ
            and not entry.delay
            and not entry.set_aside
        )

    def fetch_due(self, netloc: str) -> bool:
        """Whether robots.txt of ``netloc`` is to be fetched (again) now."""
        entry = self._sites.get(netloc)
        if entry is None:
            return True
        if entry.state in (RobotsState.FAILED, RobotsState.GIVEN_UP):
            return self.clock() >= entry.retry_at
        return False

    def fetching(self, netloc: str, site: str) -> None:
        entry = self._sites.get(netloc)
        if entry is None:
            self._sites[netloc] = SiteRobots(site, RobotsState.FETCHING)
        else:
            entry.state = RobotsState.FETCHING

    def forget(self, netloc: str) -> None:
        """A site given up on is tried again (its dead letters were re-queued): its state here
        and its shared failure are forgotten, the latter before robots.txt is fetched again
        (:meth:`forgotten`)."""
        entry = self._sites.get(netloc)
        if entry is not None:
            if entry.state is not RobotsState.GIVEN_UP:
                return  # read, or being fetched: nothing to forget
            del self._sites[netloc]
        store = self.store
        if store is not None and netloc not in self._forgetting:
            key = store.keys.robots(netloc)
            self._forgetting[netloc] = asyncio.ensure_future(
                store.client.hdel(key, *FAILURE_FIELDS)
            )

    async def forgotten(self, netloc: str) -> None:
        """Wait until the shared failure of ``netloc`` is forgotten, if it is being."""
        pending = self._forgetting.pop(netloc, None)
        if pending is not None:
            try:
                await pending
            except connection.REDIS_FAILURES as exc:
                logger.warning("robots.txt failure of %s not forgotten: %s", netloc, exc)

    def no_rules(self, netloc: str, site: str) -> None:
        """robots.txt of ``netloc`` was refused before its download (the address guard) or
        could not be handled at all (a bug): read as no rules, so that nothing waits for it
        forever."""
        self._sites[netloc] = SiteRobots(site, RobotsState.READ, delay_known=self.clock())
        self._changed(netloc)

    def _changed(self, netloc: str) -> None:
        entry = self._sites.get(netloc)
        if entry is not None:
            self._netloc_of[entry.site] = netloc
        for listener in self.listeners:
            listener(netloc)

    # -- read ------------------------------------------------------------------------------

    async def read(
        self, netloc: str, site: str, delay: float | None, *, status: int, fresh: bool = False
    ) -> None:
        """robots.txt of ``netloc`` answered ``status`` with this Crawl-delay: the site's
        budget gets it for every node before any request of the site waiting here goes.
        ``fresh``: this node fetched it (not another's shared copy), so it ends a hold an
        earlier failure left, wherever that failure was met."""
        entry = self._sites.get(netloc) or SiteRobots(site, RobotsState.FETCHING)
        was_failed = entry.retry_at > 0 or fresh
        if 400 <= status < 500:
            self.stats.inc_value(stat_keys.ROBOTSTXT_NO_RULES)
        asked = max(0.0, float(delay or 0.0))
        source, in_force, aside = ROBOTS_TXT_DELAY, asked, False
        if asked > self.max_delay:
            if self.over_max == "cap":
                source, in_force = CAPPED_DELAY, self.max_delay
                self.stats.inc_value(stat_keys.ROBOTSTXT_DELAY_CAPPED)
            else:
                aside, in_force = True, 0.0
        if asked and not (entry.state is RobotsState.READ and entry.delay == in_force):
            self._log_delay(site, asked, in_force, aside)
            if aside:
                self.signals.send_catch_log(
                    dc_signals.site_set_aside, site=site, reason=reasons.CRAWL_DELAY_OVER_MAX
                )
        if asked:
            self.stats.inc_value(stat_keys.ROBOTSTXT_CRAWL_DELAY)
        store = self.store
        if store is not None and (in_force or was_failed or entry.delay):
            try:
                await store.set_site_robots(
                    site,
                    delay_ms=int(in_force * 1000),
                    source=source,
                    hold_ms=0 if was_failed else None,
                    why=ROBOTS_UNAVAILABLE_HOLD,
                )
            except connection.REDIS_FAILURES as exc:
                logger.warning("Crawl-delay of %s not shared with the cluster: %s", site, exc)
        self._sites[netloc] = SiteRobots(
            site, RobotsState.READ, delay=in_force, set_aside=aside, delay_known=self.clock()
        )
        if asked:
            self.signals.send_catch_log(
                dc_signals.site_crawl_delay,
                site=site,
                delay=in_force,
                source=source,
                set_aside=aside,
            )
        self._changed(netloc)

    def _log_delay(self, site: str, asked: float, in_force: float, aside: bool) -> None:
        if aside:
            logger.warning(
                "Site %s asks for a Crawl-delay of %gs, over DISTCRAWL_MAX_CRAWL_DELAY (%gs): "
                "set aside, its requests become dead letters (%s)",
                site,
                asked,
                self.max_delay,
                reasons.CRAWL_DELAY_OVER_MAX,
            )
        elif in_force < asked:
            logger.warning(
                "Site %s asks for a Crawl-delay of %gs: capped at DISTCRAWL_MAX_CRAWL_DELAY, "
                "one request every %gs for the whole cluster",
                site,
                asked,
                in_force,
            )
        else:
            logger.info(
                "Site %s asks for a Crawl-delay of %gs: one request at a time for the whole "
                "cluster, the next %gs after the last one finished",
                site,
                asked,
                asked,
            )

    # -- failed ----------------------------------------------------------------------------

    async def failed(
        self, netloc: str, site: str, why: str, shared: SharedFailure | None = None
    ) -> None:
        """robots.txt of ``netloc`` could not be read (``why``); ``shared``: the failure
        another node recorded, read instead of fetching. The site is held for every node until
        robots.txt is tried again, or given up."""
        store = self.store
        now_ms = int((store.server_time() if store is not None else time.time()) * 1000)
        entry = self._sites.get(netloc) or SiteRobots(site, RobotsState.FETCHING)
        if shared is None:
            self.stats.inc_value(stat_keys.ROBOTSTXT_UNAVAILABLE)
            known = await self._shared_failure(netloc)
            attempts = (known.attempts if known else 0) + 1
            first = known.failed_ms if known else now_ms
            gave_up = known.gave_up_ms if known else 0
        else:
            attempts, first, gave_up = shared.attempts, shared.failed_ms, shared.gave_up_ms
        if gave_up or now_ms - first >= self.hold_max * 1000:
            await self._give_up(netloc, site, entry, why, first, attempts, now_ms, shared)
            return
        if shared is not None:
            wait_ms = max(0, shared.retry_at_ms - now_ms)
        else:
            base, cap, jitter = self.backoff
            wait = backoff_delay(attempts, base=base, cap=cap, jitter=jitter)
            wait_ms = int(min(wait * 1000, first + self.hold_max * 1000 - now_ms))
            await self._share_failure(netloc, first, attempts, now_ms + wait_ms, 0)
            if store is not None:
                try:
                    await store.set_site_robots(
                        site, hold_ms=max(1, wait_ms), why=ROBOTS_UNAVAILABLE_HOLD
                    )
                except connection.REDIS_FAILURES as exc:
                    logger.warning("Hold of %s not shared with the cluster: %s", site, exc)
            self.stats.inc_value(stat_keys.SITE_HOLDS(ROBOTS_UNAVAILABLE_HOLD))
            self.signals.send_catch_log(
                dc_signals.site_held,
                site=site,
                cause=ROBOTS_UNAVAILABLE_HOLD,
                seconds=wait_ms / 1000,
            )
            level = logging.WARNING if attempts == 1 else logging.INFO
            logger.log(
                level,
                "robots.txt of %s could not be read (%s, try %d): the site is held for every node "
                "and robots.txt fetched again in %.1fs; given up after %s of failures "
                "(DISTCRAWL_ROBOTS_HOLD_MAX)",
                netloc,
                why,
                attempts,
                wait_ms / 1000,
                f"{self.hold_max:g}s",
            )
        entry.state, entry.retry_at = RobotsState.FAILED, self.clock() + wait_ms / 1000
        self._sites[netloc] = entry
        self._changed(netloc)

    async def _give_up(
        self,
        netloc: str,
        site: str,
        entry: SiteRobots,
        why: str,
        first: int,
        attempts: int,
        now_ms: int,
        shared: SharedFailure | None,
    ) -> None:
        if shared is None or not shared.gave_up_ms:
            await self._share_failure(netloc, first, attempts, 0, now_ms)
            logger.warning(
                "robots.txt of %s could not be read for %.0fs (%s, %d tries): given up, the "
                "site's requests become dead letters (%s); re-queue them once it is back",
                netloc,
                (now_ms - first) / 1000,
                why,
                attempts,
                reasons.ROBOTS_UNAVAILABLE,
            )
            self.signals.send_catch_log(
                dc_signals.site_set_aside, site=site, reason=reasons.ROBOTS_UNAVAILABLE
            )
        store = self.store
        if store is not None:
            try:
                # no longer held: its requests come by, and each goes to the dead letters
                await store.set_site_robots(site, hold_ms=0, why=ROBOTS_UNAVAILABLE_HOLD)
            except connection.REDIS_FAILURES as exc:
                logger.warning("robots.txt of %s given up, not shared: %s", site, exc)
        entry.state = RobotsState.GIVEN_UP
        entry.retry_at = self.clock() + min(self.hold_max, GIVEN_UP_RECHECK)
        self._sites[netloc] = entry
        self._changed(netloc)

    # -- the shared record -----------------------------------------------------------------

    async def _shared_failure(self, netloc: str) -> SharedFailure | None:
        store = self.store
        if store is None:
            return None
        try:
            fields = await store.client.hgetall(store.keys.robots(netloc))
        except connection.REDIS_FAILURES:
            return None
        return SharedFailure.of(fields or {})

    async def _share_failure(
        self, netloc: str, first: int, attempts: int, retry_at: int, gave_up: int
    ) -> None:
        store = self.store
        if store is None:
            return
        key = store.keys.robots(netloc)
        record = {FAILED_FIELD: first, ATTEMPTS_FIELD: attempts, RETRY_AT_FIELD: retry_at}
        if gave_up:
            record[GAVE_UP_FIELD] = gave_up
        try:
            pipe = store.client.pipeline(transaction=True)
            pipe.hset(key, mapping=record)
            # forgotten a hold's length after it was last written: a site given up is then
            # tried again (or at once when an operator deletes the record)
            pipe.pexpire(key, int(self.hold_max * 1000 + 60_000))
            await pipe.execute()
        except connection.REDIS_FAILURES as exc:
            logger.warning("robots.txt failure of %s not shared: %s", netloc, exc)
