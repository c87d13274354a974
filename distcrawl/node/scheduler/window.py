"""Requests in and out of the node's local window: ``enqueue_request`` (into the write
buffers, or kept in memory), ``next_request`` and ``has_pending_requests``."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from scrapy.utils.httpobj import urlparse_cached

from distcrawl.base.names import reasons
from distcrawl.base.names import stats as stat_keys
from distcrawl.frontier.batch import Child
from distcrawl.node import signals as dc_signals
from distcrawl.node.requests import codec
from distcrawl.node.scheduler.loop import LEASE_WINDOW
from distcrawl.node.scheduler.state import SchedulerState

if TYPE_CHECKING:
    from scrapy import Request

__all__ = ["RequestWindow"]


class RequestWindow(SchedulerState):
    """Scrapy's scheduler interface: requests in and out of the local window."""

    def has_pending_requests(self) -> bool:
        """Whether the node holds requests for the engine; for a spider that ends once the
        crawl is drained also whether the whole crawl still may have work: until the I/O loop
        saw every node drained for the drain grace. Scrapy then finds the spider idle once,
        sends ``spider_idle`` and closes it (``finished``) unless a handler says otherwise."""
        if self._ready or self._local:
            return True
        loop = self._loop
        return self.close_when_drained and (loop is None or not loop.drained)

    def enqueue_request(self, request: Request) -> bool:
        # the delay is for this parking only: a redirect or a later retry must not inherit it
        delay = request.meta.pop("distcrawl_delay", 0)
        # with DISTCRAWL_RECORD_DONT_FILTER a dont_filter request (a seed, a retry) is recorded
        # too: the dupefilter then knows the URL when a page links back to it
        fp = self.crawler.request_fingerprinter.fingerprint(request)[:16]
        if not request.dont_filter:
            if self.revisit is not None and time.monotonic() >= self._known_until:
                # [revisit] the shared dupefilter forgets: this node's memory of what it sent
                # is wiped once a generation, so a forgotten URL is new again here too
                self._known.clear()
                self._known_until = time.monotonic() + self.revisit.forget_ms / 1000
                self.crawler.signals.send_catch_log(dc_signals.frontier_forgot)
            known = fp.hex()
            if known in self._known:
                # this node already sent it: the shared dupefilter holds it for good
                self.stats.inc_value(stat_keys.FILTERED_LOCALLY)
                self.stats.inc_value(stat_keys.DUPEFILTER_FILTERED)
                return False
            self._known.add(known)
            if self._solo is not None and len(self._known) >= self._known.limit:
                # the next one would make it forget: then it could not tell a new URL
                self._solo.leave("its memory of sent fingerprints is full")
        elif not self.record_dont_filter:
            fp = b""  # as Scrapy's own dupefilter: neither checked nor recorded
        loop = self._loop
        if loop is not None and loop.drained:
            loop.work_again()
        try:
            # the queue keeps one list per priority; the lease line hands it back
            payload = codec.encode(request, self.spider, priority=False)
        except ValueError as exc:
            # as Scrapy keeps a request its disk queue cannot serialise in its memory queue
            self._local.keep(request, reasons.UNQUEUEABLE, str(exc))
            return True
        refused = codec.entry_refusal(request, payload)
        if refused is not None:
            # Scrapy may download it (data:, an unknown scheme fails there as on Scrapy); a
            # queue entry never holds it, so no node is made to open a file: URL from Redis
            self._local.keep(request, refused)
            return True
        delay_ms = int(max(0.0, float(delay or 0)) * 1000)
        site = urlparse_cached(request).hostname or ""
        child = Child(fp, int(request.priority), request.dont_filter, delay_ms, site, payload)
        if not delay_ms and self._may_own(site):
            # Scrapy gets it at once, as from its own scheduler: the next flush writes it as
            # this node's lease (the ack of the page that found it waits for that flush)
            child = child._replace(own=True)
            self._local.add_own(request)
            self._own.wait(request, child)
            self.stats.inc_value(stat_keys.OWN)
        self._writes.children.append(child)
        self._wrote()
        return True

    def _may_own(self, site: str) -> bool:
        """Whether a request of ``site`` found now is this node's own: the node is solo (no
        other node or tool can have recorded its URL: see ``solo.py``), the crawl is not
        paused, no adaptive cut holds the site, nothing the node knows of waits in the shared
        queue or its write buffers (it would come first), the node read the site's robots.txt
        and it asks nothing of its budget (no Crawl-delay), and the node has fewer of its own
        queued than it would lease at once, and fewer not written yet than that plus those in
        progress (its held hash stays the size of a prefetch, not of the crawl)."""
        loop, store, solo = self._loop, self.store, self._solo
        if solo is None or loop is None or store is None or not solo.solo:
            return False
        politeness = self._politeness
        if store.paused or site in loop.cut_sites or politeness.held_for(site) > 0:
            return False
        if politeness.robots_parser is not None and not politeness.robots.plain(site):
            # its robots.txt not read here yet, or it asks for a Crawl-delay: through the
            # queue, where the site's budget and the gate apply
            return False
        limit = max(self.prefetch, self.concurrency * LEASE_WINDOW)
        if self._local.own >= limit or len(self._own) >= limit + self.concurrency:
            return False
        if store.views.queued_anywhere():
            return False
        return not self._writes.confirmed and all(c.own for c in self._writes.children)

    def next_request(self) -> Request | None:
        ready, local, gate = self._ready, self._local, self._gate
        startable = ready.startable
        if local and (not startable or local.priority() > startable[0].priority):
            request = local.pop()
            if gate is not None and request is not None:
                # the node's own (solo mode) passed its checks, unless its site is held now;
                # one kept in memory never went through the queue: both wait for their site's
                # budget at the downloader
                own = request in self._own or request in self._leased
                held = self._politeness.held_for(urlparse_cached(request).hostname or "") > 0
                gate.started(request, passed=own and not held)
            return request
        # the gate holds back what may not start yet (its robots.txt, a hold, its share of
        # the slots, its server's budget), or sends it back
        request = gate.next() if gate is not None else (ready.popleft() if startable else None)
        if request is None:
            if not startable and len(self._leased) < self.concurrency:
                # the engine had a free slot and nothing was leased for it
                self.stats.inc_value(stat_keys.STARVED)
            self._wake.set()
            return None
        self._started.count += 1  # into the stats when they are read
        if len(startable) <= self.low_water:
            self._wake.set()
        return request
