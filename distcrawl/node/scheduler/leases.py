"""Lease intake: the payloads a round trip leased become requests ready for the engine; an
entry that is no request is refused with its reason and moved aside."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from distcrawl.base.names import stats as stat_keys
from distcrawl.base.urls import printable
from distcrawl.node.requests import codec
from distcrawl.node.requests.payload import BadEntry
from distcrawl.node.seeds.intake import rejection_record

if TYPE_CHECKING:
    from collections.abc import Callable

    from scrapy import Request, Spider
    from scrapy.statscollectors import StatsCollector

    from distcrawl.frontier.batch import Lease, Leased
    from distcrawl.node.scheduler.buffers import WriteBuffers
    from distcrawl.node.scheduler.ready import ReadyQueue
    from distcrawl.node.scheduler.revisits import RevisitHooks

__all__ = ["LeaseIntake"]

logger = logging.getLogger(__name__)


class LeaseIntake:
    """Decodes leased payloads into ``ready`` (the engine's next requests) and ``leased``
    (request -> its lease, until acked), and wakes the engine for them."""

    def __init__(
        self,
        *,
        spider: Spider,
        node_id: str,
        ready: ReadyQueue,
        leased: dict[Request, Lease],
        writes: WriteBuffers,
        revisits: RevisitHooks | None,
        stats: StatsCollector,
        wake_engine: Callable[[], None],
        requeued: Callable[[Request, str], None] | None = None,
    ) -> None:
        self.spider = spider
        self.node_id = node_id
        self.ready = ready
        self.leased = leased
        self.writes = writes
        self.revisits = revisits
        self.stats = stats
        self.wake_engine = wake_engine
        #: told of a dead letter an operator re-queued, with its reason
        self.requeued = requeued

    def accept(self, leased: list[Leased]) -> int:
        """Take ``leased`` in; returns how many entries it held (refused ones included)."""
        n = 0
        bad: list[Lease] = []
        spider, ready, revisits = self.spider, self.ready, self.revisits
        for lease, payload, priority, paced in leased:
            try:
                request = codec.decode(payload, spider, allow_private=True, priority=priority)
            except BadEntry as exc:
                self._refuse(lease, payload, exc)
                bad.append(lease)
                continue
            reason = request.meta.pop("distcrawl_dead_letter", None)
            if reason is not None:
                self.stats.inc_value(stat_keys.REQUEUED_DEAD_LETTERS)
                if self.requeued is not None:
                    self.requeued(request, str(reason))
            self.leased[request] = lease
            if revisits is not None:
                revisits.send_conditional(request, payload)
            if paced:
                # its site's token was spent for now: it goes before what is already waiting
                ready.paced(request)
            else:
                ready.append(request)
            n += 1
        if bad:
            self.writes.acks.extend(bad)  # moved aside into the rejected list, in the next flush
        if n:
            self.stats.inc_value(stat_keys.LEASED, n)
            self.wake_engine()
        return n + len(bad)

    def _refuse(self, lease: Lease, payload: bytes, exc: BadEntry) -> None:
        rid = lease.rid
        shown = rid if isinstance(rid, str) else rid.decode("utf-8", "backslashreplace")
        logger.warning("Refused queue entry %s: %s", printable(shown), printable(str(exc)))
        self.stats.inc_value(stat_keys.REFUSED(exc.reason))
        self.writes.rejected.append(
            rejection_record(payload, exc.reason, kind="queue", node=self.node_id)
        )
