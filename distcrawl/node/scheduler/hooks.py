"""The engine's hooks and Scrapy's signals the scheduler listens to: acks of finished
requests, dead letters, per-site feedback, idleness, a rewind of Redis."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from scrapy.exceptions import DontCloseSpider
from scrapy.http.request import NO_CALLBACK
from scrapy.utils.httpobj import urlparse_cached

from distcrawl.base.backoff import parse_retry_after
from distcrawl.base.names import stats as stat_keys
from distcrawl.base.urls import mask_url
from distcrawl.node import signals as dc_signals
from distcrawl.node.scheduler.deadletter import dead_letter
from distcrawl.node.scheduler.reconcile import report_rewind
from distcrawl.node.scheduler.state import SchedulerState

if TYPE_CHECKING:
    from scrapy import Request, Spider

    from distcrawl.frontier.batch import Child, Lease

__all__ = ["EngineHooks"]

logger = logging.getLogger(__name__)


class EngineHooks(SchedulerState):
    """What the engine and the signals tell the scheduler."""

    def _request_done(self, request: Request) -> None:
        """The engine is done with ``request`` for good (see :class:`InProgress`): ack it."""
        if self._gate is not None:
            self._gate.done(request)
        lease = self._leased.pop(request, None)
        if lease is None:
            # one of the node's own not written yet (acked once it is), or one kept in memory
            self._own.finished(request)
            return
        revisits = self._revisits
        if revisits is None or not revisits.schedule(request, lease):
            self._writes.acks.append(lease)
        self._wrote()

    def _dead_letter(self, request: Request, reason: str, **details: Any) -> None:
        """``request_dead_lettered``: the request goes to the dead letters with its reason.

        A request of the downloader's own (``NO_CALLBACK``: robots.txt, a middleware's
        download) is no request of the spider: never a dead letter. One that no dead letter can
        carry (it was kept in memory for that reason) is logged and counted instead."""
        if request.callback is NO_CALLBACK:
            return
        try:
            letter = dead_letter(
                request,
                reason,
                details,
                spider=self.spider,
                node_id=self.node_id,
                fingerprint=self.crawler.request_fingerprinter.fingerprint(request),
                lease=self._leased.get(request),
            )
        except ValueError as exc:
            logger.warning(
                "Gave up on %s (%s); no dead letter can carry it: %s",
                mask_url(request.url),
                reason,
                exc,
            )
            self.stats.inc_value(stat_keys.DEAD_LETTERS_UNWRITABLE)
            return
        if self._revisits is not None:
            self._revisits.dead_lettered(request)
        self._writes.dead.append(letter)
        self.stats.inc_value(stat_keys.DEAD_LETTERED)
        self._wake.set()

    def _site_of(self, request: Request) -> str:
        """The site of ``request`` ("" for none): the gate knows it for one it started."""
        gate = self._gate
        if gate is None:
            return urlparse_cached(request).hostname or ""
        return gate.site_of(request)

    def _response_received(self, response: Any, request: Request, **_: Any) -> None:
        """``response_downloaded``: every answer of a site, for its shared budget."""
        site = self._site_of(request)
        if not site:
            return
        status = response.status
        header = response.headers.get(b"Retry-After") if status in (429, 503) else None
        hold_ms = 0
        if header is not None:
            seconds = parse_retry_after(header)
            if seconds is not None:
                # every request of the site waits, here at once, on every node once told
                hold_ms = self._politeness.retry_after(site, seconds)
        self._feedback.record(
            site,
            status,
            header is not None,
            float(request.meta.get("download_latency", 0.0)),
            hold_ms,
        )

    def _page_received(self, response: Any, request: Request, **_: Any) -> None:
        """``response_received``: the node's pages per site, and where a site answered from."""
        site = self._site_of(request)
        if site:
            self._sites.record(site)
            address = getattr(response, "ip_address", None)
            if address is not None:
                # the server the site answered from (server budgets resolve it beforehand)
                self._politeness.servers.answered_from(site, address)

    def _give_back(self, request: Request) -> None:
        """A leased request the gate sends back unstarted: its lease returns to the frontier
        (where its site is held, or paced by its Crawl-delay)."""
        lease = self._leased.pop(request, None)
        if lease is None:
            return
        self._politeness.given_back.append(lease)
        self.stats.inc_value(stat_keys.GIVEN_BACK)
        if self._revisits is not None:
            self._revisits.forget_dropped()
        self._wake.set()

    def _set_aside(self, request: Request, reason: str) -> None:
        """A leased request the gate gives up on unstarted: a dead letter, and its lease ends."""
        self._dead_letter(request, reason, attempts=0)
        self._request_done(request)

    def _spider_idle(self, spider: Spider) -> None:
        # a spider that ends once the crawl is drained is idle only then (see
        # has_pending_requests): Scrapy closes it, or its own handlers keep it open
        if not self.close_when_drained and (self._loop is None or not self._loop.closing):
            raise DontCloseSpider("waiting for the frontier")

    def _downloading(self) -> int:
        engine = self.crawler.engine
        if engine is None:
            return len(self._leased) - len(self._ready)
        return len(engine.downloader.active)

    def _wake_engine(self) -> None:
        # The engine polls next_request() only when it is told to (or on a 5 s heartbeat);
        # without this nudge a prefetched batch would wait for that heartbeat.
        slot = getattr(self.crawler.engine, "_slot", None)
        if slot is not None:
            slot.nextcall.schedule()

    def _forget_pushed(self, found: bytes) -> None:
        """A shard lacked this node's last mark (see :func:`report_rewind`): what the node
        remembers having pushed may be gone, so it and the spider forget it."""
        report_rewind(
            found,
            node_id=self.node_id,
            heartbeat_timeout=self.heartbeat_timeout,
            forgotten=len(self._known),
            stats=self.stats,
        )
        self._known.clear()
        if self._solo is not None:
            self._solo.leave("Redis lost writes")
        self.crawler.signals.send_catch_log(dc_signals.frontier_rewound)

    def _own_written(self, own: list[tuple[Child, Lease | None]]) -> None:
        self._own.written(own, queue=self._local, leased=self._leased, acks=self._writes.acks)
        self._wrote()

    def _holds_work(self) -> bool:
        """Work of this node the I/O loop does not see: requests kept in memory, and a
        ``start()`` not exhausted yet (it may still yield requests)."""
        engine = self.crawler.engine
        return bool(self._local) or (engine is not None and engine._start is not None)
