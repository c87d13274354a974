"""A graceful stop that comes before Scrapy's engine runs, or while its close waits: the node
still returns its leases.

Scrapy stops a crawler on SIGTERM or Ctrl-C by stopping its engine, but only an engine that
runs: one still opening (the scheduler open and leasing, the pipeline or another component
still opening on a loaded machine) is left behind, and the reactor stops under it, with no
close, no stats, and the leases held until the node's heartbeat times out. This guard, set up
when the scheduler opens, is a reactor trigger before shutdown: where the node's close has not
begun, it waits for the engine to run and stops it (the spider closes as on any graceful stop,
the scheduler's close returns the leases, the stats are dumped), or, where the engine does not
run within :data:`ENGINE_START_WAIT` seconds or a second signal forces the stop, closes the
node's part itself. A stop that comes while the spider closes (Scrapy's own stop does not
wait for a close already under way: its pipeline waiting for MongoDB to replay the journal)
waits for that close, which stops waiting for MongoDB, so the leases go back and the node
says how many products its journal holds.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import time
from typing import TYPE_CHECKING, Any

from scrapy.utils.defer import deferred_from_coro

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from scrapy.crawler import Crawler
    from twisted.internet.defer import Deferred

__all__ = ["ENGINE_START_WAIT", "ShutdownGuard"]

logger = logging.getLogger(__name__)

#: seconds a graceful stop waits for an engine still opening to run, so it can stop it cleanly
ENGINE_START_WAIT = 60.0
#: seconds between two looks at the engine meanwhile
_POLL = 0.05


def _forced() -> bool:
    """Whether a second signal forced the stop: Scrapy then ignores SIGTERM (SIGINT tells
    nothing: a node started in the background of a script ignores it from the start)."""
    return signal.getsignal(signal.SIGTERM) is signal.SIG_IGN


def _reactor() -> Any:
    # imported on use: importing it at module level would install Twisted's default reactor
    # before Scrapy installs the asyncio one
    from twisted.internet import reactor

    return reactor


class ShutdownGuard:
    """The reactor trigger of one node (``install`` at its open, ``remove`` at its close).

    ``closing()`` says whether the node's close has begun, ``closed()`` whether it is over;
    ``close()`` is the node's own close (its scheduler's), for an engine that never runs."""

    def __init__(
        self,
        crawler: Crawler,
        *,
        node_id: str,
        closing: Callable[[], bool],
        closed: Callable[[], bool],
        close: Callable[[str], Awaitable[None]],
        wait: float = ENGINE_START_WAIT,
    ) -> None:
        self.crawler = crawler
        self.node_id = node_id
        self.closing = closing
        self.closed = closed
        self.close = close
        self.wait = wait
        #: a graceful stop came before the engine ran: the node's start gives up waiting
        self.stopping = False
        self._trigger: Any = None

    def install(self) -> None:
        self._trigger = _reactor().addSystemEventTrigger("before", "shutdown", self._at_shutdown)

    def _spider_closing(self) -> bool:
        """Whether the spider's close has begun (Scrapy's, or the node's own). An engine that
        sent ``engine_started`` may still be starting: its handlers run before it does."""
        if self.closing():
            return True
        slot = getattr(self.crawler.engine, "_slot", None)
        return slot is not None and slot.closing is not None

    def remove(self) -> None:
        if self._trigger is not None:
            with contextlib.suppress(ValueError, KeyError):
                _reactor().removeSystemEventTrigger(self._trigger)
            self._trigger = None

    def _at_shutdown(self) -> Deferred[None] | None:
        self._trigger = None
        if self.closed() or _forced():
            # the node closed (Scrapy stops a running engine before the reactor), or a second
            # signal forces the stop: nothing is held up here. An engine that runs now may
            # have started since Scrapy found it not running: it is stopped below.
            return None
        return deferred_from_coro(self._stop())

    async def _stop(self) -> None:
        self.stopping = True
        if self._spider_closing():
            # the spider is closing (its pipeline waiting for MongoDB to replay its journal):
            # the close goes on, told to stop waiting, and the node returns its leases
            logger.info("Node %s is stopped while it closes: it finishes its close", self.node_id)
        else:
            logger.info(
                "Node %s is stopped before its engine runs: it stops the engine once it runs, "
                "so its leases go back at once",
                self.node_id,
            )
        deadline = time.monotonic() + self.wait
        while not self.closed():
            engine = self.crawler.engine
            if not self.closing() and engine is not None and engine.running:
                await engine.stop_async()  # the spider closes: the scheduler returns the leases
                return
            if _forced() or time.monotonic() > deadline:
                break
            # the start goes on (or the spider closes, when its open failed) meanwhile
            await asyncio.sleep(_POLL)
        if not self.closing():
            # the engine did not run in time (or a second signal forced the stop): the node
            # returns what it holds itself
            await self.close("shutdown")
