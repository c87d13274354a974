"""A local webhook receiver: a real HTTP server on 127.0.0.1 that keeps every JSON notice POSTed
to it (``distcrawl demo --incidents`` points the nodes' ``DISTCRAWL_ALERT_WEBHOOK`` at it, and
tests of the notices use it). It may answer the first few POSTs with 503, as a receiver that is
briefly down does."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["WebhookReceiver"]

#: the largest notice body the receiver reads
MAX_BODY = 1024 * 1024


class WebhookReceiver:
    """Serves ``POST /`` (any path) on 127.0.0.1 from a thread; :attr:`url` is where to send.
    ``fail_first``: the first this many POSTs are answered 503 and not kept."""

    def __init__(self, *, host: str = "127.0.0.1", fail_first: int = 0) -> None:
        self.host = host
        self.fail_first = fail_first
        self.notices: list[dict[str, Any]] = []
        self.attempts = 0
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> WebhookReceiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                size = min(int(self.headers.get("Content-Length") or 0), MAX_BODY)
                body = self.rfile.read(size)
                status = receiver._take(body)
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer((self.host, 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="demo-webhook", daemon=True
        )
        self._thread.start()
        return self

    def _take(self, body: bytes) -> int:
        with self._lock:
            self.attempts += 1
            if self.attempts <= self.fail_first:
                return 503
            try:
                notice = json.loads(body)
            except ValueError:
                return 400
            self.notices.append(notice if isinstance(notice, dict) else {"body": notice})
            return 200

    @property
    def url(self) -> str:
        assert self._server is not None, "the receiver is not started"
        port = self._server.server_address[1]
        return f"http://{self.host}:{port}/notices"

    def received(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self.notices)

    def by_kind(self) -> dict[str, int]:
        """How many notices of each kind arrived."""
        counts: dict[str, int] = {}
        for notice in self.received():
            kind = str(notice.get("kind", "?"))
            counts[kind] = counts.get(kind, 0) + 1
        return dict(sorted(counts.items()))

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
        if self._thread is not None:
            self._thread.join(5)

    def __enter__(self) -> WebhookReceiver:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
