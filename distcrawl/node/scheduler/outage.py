"""A node's view of a Redis outage: since when Redis has not served it, the two log lines an
operator reads when it goes away and when it is back, and the bounded retries of a node's
start.

An outage is any failure :func:`~distcrawl.frontier.outages.classify` names: a server out of
reach, and one that answers but cannot serve writes now (out of memory, a failed save, a
read-only replica, a password or an ACL that changed ...)."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

from distcrawl.base.names import stats as stat_keys
from distcrawl.frontier.outages import UNREACHABLE, Outage, classify, error_code

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from scrapy.statscollectors import StatsCollector


__all__ = [
    "OUTAGE_SETTLE",
    "RedisOutage",
    "RedisUnreachableAtStart",
    "StartWait",
]

logger = logging.getLogger(__name__)

#: seconds Redis must have served a node without a failure before its outage counts as over: a
#: server at its memory limit may take one call and refuse the next, and an outage that comes
#: and goes is one outage, with one line when it starts and one when it ends
OUTAGE_SETTLE = 3.0


class RedisOutage:
    """Counts ``frontier/redis_errors`` (every failed round trip) and ``frontier/outages``;
    ``down`` while the last round trip failed."""

    def __init__(
        self,
        node_id: str,
        stats: StatsCollector,
        *,
        heartbeat_timeout: float,
        settle: float = OUTAGE_SETTLE,
    ) -> None:
        self.node_id = node_id
        self.stats = stats
        self.heartbeat_timeout = heartbeat_timeout
        self.settle = settle
        self.since: float | None = None  # monotonic time the outage began (None: no outage)
        self.down = False  # the last round trip failed
        self._served_since: float | None = None  # first success since the last failure
        self._reasons: dict[str, int] = {}  # failed round trips of this outage, by class
        self._waiting = ""  # what the node held for Redis at the last failure
        #: called with the reason when an outage begins (a notice: see node/observe/watch.py)
        self.on_start: Callable[[str], None] | None = None

    def failed(self, exc: BaseException, *, waiting: str = "") -> None:
        """A round trip failed with an outage (see :func:`classify`); ``waiting`` says what
        the node keeps for Redis meanwhile."""
        outage = classify(exc) or UNREACHABLE
        self.stats.inc_value(stat_keys.REDIS_ERRORS)
        new_class = outage.code not in self._reasons
        self._reasons[outage.code] = self._reasons.get(outage.code, 0) + 1
        self._waiting = waiting
        self.down = True
        self._served_since = None
        advice = f"; {outage.advice}" if outage.advice else ""
        if self.since is not None:
            # the same outage goes on: counted, not logged again, unless Redis now names a
            # cause an operator must mend (a server restarted with another password: out of
            # reach first, then WRONGPASS)
            if new_class and outage.advice:
                logger.error(
                    "Redis still unavailable to node %s, now %s: %s%s",
                    self.node_id,
                    outage,
                    _short(exc),
                    advice,
                )
            return
        self.since = time.monotonic()
        self.stats.inc_value(stat_keys.OUTAGES)
        logger.error(
            "Redis unavailable (%s: %s); node %s pauses, keeps every request and ack in "
            "memory and retries with a growing wait until it is back%s",
            outage,
            _short(exc),
            self.node_id,
            advice,
        )
        if self.on_start is not None:
            self.on_start(outage.reason)

    def answered(self) -> bool:
        """A round trip succeeded; returns whether it is the first since a failure (the caller
        then recovers no other node for a heartbeat timeout: every heartbeat went stale while
        Redis was away, ours as well as the live nodes'). The outage is over, and logged as
        such, once Redis has served the node for ``settle`` seconds."""
        if self.since is None:
            return False
        now = time.monotonic()
        first = self.down
        if first:
            self.down = False
            self._served_since = now
        served = self._served_since if self._served_since is not None else now
        if now - served >= self.settle:
            self._over(served)
        return first

    def finish(self) -> None:
        """The node stops: an outage Redis came back from is logged as over at once."""
        if self.since is not None and not self.down:
            self._over(self._served_since or time.monotonic())

    def _over(self, served: float) -> None:
        assert self.since is not None
        reasons = ", ".join(f"{r} x{n}" for r, n in sorted(self._reasons.items()))
        logger.warning(
            "Redis is back after %.1fs (%s); node %s carries on%s (and recovers no other "
            "node for %.0fs: they need time to heart-beat again)",
            served - self.since,
            reasons,
            self.node_id,
            f" with what waited: {self._waiting}" if self._waiting else "",
            self.heartbeat_timeout,
        )
        self.since = None
        self._served_since = None
        self._reasons = {}
        self._waiting = ""


def _short(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 200 else text[:197] + "..."


def _unknown_reply(exc: BaseException) -> Outage | None:
    """An error reply of a class no outage names, met at a node's start: a running node's
    loop retries it, so the start gives it its timeout too (found by the fault search, seed
    1334598814: one such reply to the rejoin made the node exit 1 with tracebacks)."""
    code = error_code(exc)
    return None if code is None else Outage(code, "an error reply of a class no outage names")


class RedisUnreachableAtStart(RuntimeError):
    """Redis did not serve a starting node within ``DISTCRAWL_REDIS_START_TIMEOUT``."""


class StartWait:
    """A node's start: each of its steps runs until Redis serves it, waiting longer between
    tries (0.5 s up to 10 s), all of them within ``timeout`` seconds of the first (0: no
    limit) and while the node is not ``stopped()``; then :class:`RedisUnreachableAtStart`
    (``where``: the masked URL, for the message)."""

    def __init__(
        self, *, timeout: float, where: str = "", stopped: Callable[[], bool] | None = None
    ) -> None:
        self.timeout = timeout
        self.where = where
        self.deadline = time.monotonic() + timeout if timeout > 0 else None
        #: the node is stopped meanwhile: it gives up at once
        self.stopped = stopped or (lambda: False)

    async def run(self, func: Callable[[], Awaitable[None]]) -> None:
        delay = 0.5
        while True:
            try:
                await func()
                return
            except Exception as exc:
                outage = classify(exc) or _unknown_reply(exc)
                if outage is None:
                    raise
                left = None if self.deadline is None else self.deadline - time.monotonic()
                if self.stopped():
                    raise RedisUnreachableAtStart(
                        f"it was stopped while it waited for Redis at its start ({outage})"
                    ) from None
                if left is not None and left <= 0:
                    raise RedisUnreachableAtStart(self._message(outage, exc)) from None
                wait = delay if left is None else min(delay, left)
                # a warning: the node waits; the one error is its refusal, when it gives up
                logger.warning(
                    "Redis unavailable at start (%s: %s); retrying in %.1fs%s",
                    outage,
                    _short(exc),
                    wait,
                    f"; {outage.advice}" if outage.advice else "",
                )
                await asyncio.sleep(wait)
                delay = min(delay * 2, 10.0)

    def _message(self, outage: Outage, exc: BaseException) -> str:
        target = f"Redis at {self.where}" if self.where else "Redis"
        advice = outage.advice or "check REDIS_URL"
        return (
            f"{target} did not serve this node within {self.timeout:g}s of its start "
            f"({outage}: {_short(exc)}); {advice}, or wait longer with "
            "DISTCRAWL_REDIS_START_TIMEOUT (0: wait forever)"
        )
