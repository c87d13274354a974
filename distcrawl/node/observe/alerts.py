"""Notices to webhooks: one JSON POST per event and URL (``DISTCRAWL_ALERT_WEBHOOK``), with a
Slack-compatible ``text``; sent from a thread of its own, tried again with a growing wait,
never holding up the crawl.

A notice's JSON: ``{"text", "kind", "event", "crawl", "run", "node", "at", "data"}``; ``text``
is what a Slack (or Mattermost, or Rocket.Chat) incoming webhook shows, ``kind`` one of the
words of :data:`~distcrawl.base.names.observe.NOTICES`, ``event`` the id the cluster claimed
it under (one notice per event for the whole cluster), ``data`` the event's figures.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import logging
import queue
import threading
import urllib.error
import urllib.request
from typing import TYPE_CHECKING, Any

from distcrawl.base.urls import mask_url

if TYPE_CHECKING:
    from distcrawl.node.observe.buffer import Event

__all__ = ["WebhookSender", "notice_payload"]

logger = logging.getLogger(__name__)

#: notices waiting to be sent at most; one more is dropped (and counted as failed)
QUEUE_MAX = 100
#: seconds the first retry waits (then twice as long each time)
FIRST_WAIT = 1.0


def notice_payload(event: Event, *, crawl: str, run: str, node: str) -> dict[str, Any]:
    """The JSON a notice POSTs."""
    return {
        "text": f"[distcrawl {crawl}] {event.text}",
        "kind": event.kind,
        "event": event.id,
        "crawl": crawl,
        "run": run,
        "node": node,
        "at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "data": event.data,
    }


class WebhookSender:
    """POSTs notices to *urls* from a thread: :meth:`send` never waits; each URL is tried
    *tries* times, :data:`FIRST_WAIT` seconds apart and doubling, each try at most *timeout*
    seconds. ``sent`` and ``failed`` count the notices per URL (read from any thread)."""

    def __init__(
        self, urls: list[str], *, tries: int, timeout: float, first_wait: float = FIRST_WAIT
    ) -> None:
        self.urls = [u for u in urls if u]
        self.tries = max(1, tries)
        self.timeout = timeout
        self.first_wait = first_wait
        self.sent = 0
        self.failed = 0
        self._queue: queue.Queue[dict[str, Any] | None] = queue.Queue(QUEUE_MAX)
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()

    def send(self, payload: dict[str, Any]) -> bool:
        """Queue *payload* for every URL; False when too many wait (it is dropped)."""
        if not self.urls:
            return False
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="distcrawl-alerts", daemon=True)
            self._thread.start()
        try:
            self._queue.put_nowait(payload)
        except queue.Full:
            with self._lock:
                self.failed += len(self.urls)
            logger.warning("Notice %s dropped: too many notices wait", payload.get("event"))
            return False
        return True

    def close(self, timeout: float) -> None:
        """Send what waits for up to *timeout* seconds (blocking: run it on a thread); what is
        left then is given up."""
        thread = self._thread
        if thread is None:
            return
        with contextlib.suppress(queue.Full):
            self._queue.put(None, timeout=max(0.1, timeout))
        thread.join(timeout)
        self._stop.set()
        thread.join(1.0)

    def _run(self) -> None:
        while True:
            payload = self._queue.get()
            if payload is None:
                return
            body = json.dumps(payload, default=str).encode()
            for url in self.urls:
                ok = self._post(url, body, str(payload.get("event", "")))
                with self._lock:
                    if ok:
                        self.sent += 1
                    else:
                        self.failed += 1

    def _post(self, url: str, body: bytes, event: str) -> bool:
        wait = self.first_wait
        problem = ""
        for attempt in range(self.tries):
            request = urllib.request.Request(
                url,
                data=body,
                method="POST",
                headers={"Content-Type": "application/json", "User-Agent": "distcrawl-alerts"},
            )
            try:
                with urllib.request.urlopen(request, timeout=self.timeout) as answer:
                    if 200 <= answer.status < 300:
                        return True
                    problem = f"HTTP {answer.status}"
            except urllib.error.HTTPError as exc:
                problem = f"HTTP {exc.code}"
            except (OSError, ValueError) as exc:
                problem = str(exc) or type(exc).__name__
            if attempt + 1 < self.tries:
                if self._stop.wait(wait):
                    break
                wait *= 2
        logger.warning(
            "Notice %s not delivered to %s after %d tries (%s)",
            event,
            mask_url(url),
            self.tries,
            problem,
        )
        return False
