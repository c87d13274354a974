"""The demo shop's HTTP server: one thread per connection, keep-alive, each answer written in
one ``send``, every connection dropped at stop."""

from __future__ import annotations

import contextlib
import socket
import sys
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

from distcrawl.demo.responses import phrase

if TYPE_CHECKING:
    from distcrawl.demo.shop import DemoShop

__all__ = ["DEFAULT_IDLE_TIMEOUT", "ShopHTTPServer"]

#: an idle keep-alive connection is closed after this many seconds (frees its thread)
DEFAULT_IDLE_TIMEOUT = 30.0
#: the largest body accepted by ``POST /_shop/faults``
_MAX_POST_BYTES = 64 * 1024


class ShopHTTPServer(ThreadingHTTPServer):
    """One thread per connection, keep-alive, and a way to drop every connection at stop."""

    daemon_threads = True
    request_queue_size = 256

    def __init__(self, address: tuple[str, int], shop: DemoShop) -> None:
        self.shop = shop
        self._connections: set[socket.socket] = set()
        self._connections_lock = threading.Lock()
        #: set at stop: requests the shop never answers ("hang") end then
        self.stopping = threading.Event()
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        super().__init__(address, _ShopHandler)

    def track(self, connection: socket.socket) -> None:
        with self._connections_lock:
            self._connections.add(connection)

    def untrack(self, connection: socket.socket) -> None:
        with self._connections_lock:
            self._connections.discard(connection)

    def close_connections(self) -> None:
        """Wake every connection thread: a stopped shop must not keep serving keep-alives."""
        self.stopping.set()
        with self._connections_lock:
            connections = list(self._connections)
        for connection in connections:
            with contextlib.suppress(OSError):  # already closed by the client
                connection.shutdown(socket.SHUT_RDWR)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that hangs up mid-answer (Scrapy cancelling /big) is normal, not a bug.
        exc = sys.exc_info()[1]
        if isinstance(exc, OSError):
            return
        super().handle_error(request, client_address)


class _ShopHandler(BaseHTTPRequestHandler):
    """Reads requests with the standard library, writes answers in one ``send`` each."""

    protocol_version = "HTTP/1.1"
    timeout = DEFAULT_IDLE_TIMEOUT
    server: ShopHTTPServer

    def setup(self) -> None:
        super().setup()
        # Header and body leave in one write, so Nagle only adds delay on keep-alive.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.server.track(self.connection)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.untrack(self.connection)

    def do_GET(self) -> None:
        self._answer("GET")

    def do_HEAD(self) -> None:
        self._answer("HEAD")

    def do_POST(self) -> None:
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if not 0 <= length <= _MAX_POST_BYTES:
            self.send_error(HTTPStatus.BAD_REQUEST, "bad Content-Length")
            return
        self._answer("POST", self.rfile.read(length))

    def log_message(self, format: str, *args: Any) -> None:
        pass  # the shop keeps its own request log; stderr lines would cost throughput

    def _answer(self, method: str, body: bytes = b"") -> None:
        conditions = (self.headers.get("If-None-Match"), self.headers.get("If-Modified-Since"))
        response = self.server.shop._respond(
            method, self.path, self.headers.get("Host"), body, conditions
        )
        if response.action:
            # no answer: held open until the shop stops, or closed at once
            if response.action == "hang":
                self.server.stopping.wait()
            self.close_connection = True
            return
        lines = [f"HTTP/1.1 {response.status} {phrase(response.status)}"]
        if response.status != 304:  # a 304 has no body, so neither type nor length
            lines.append(f"Content-Type: {response.content_type}")
            if response.chunked:
                lines.append("Transfer-Encoding: chunked")
            else:
                lines.append(f"Content-Length: {len(response.body) * response.repeat}")
        lines.extend(f"{name}: {value}" for name, value in response.headers)
        if self.close_connection:
            lines.append("Connection: close")
        elif self.request_version == "HTTP/1.0":
            lines.append("Connection: keep-alive")
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        try:
            if method == "HEAD" or not response.body:
                self.wfile.write(head + (b"0\r\n\r\n" if response.chunked else b""))
                return
            if response.chunked:
                chunk = b"%x\r\n%s\r\n" % (len(response.body), response.body)
                self.wfile.write(head + chunk)
                for _ in range(response.repeat - 1):
                    self.wfile.write(chunk)
                self.wfile.write(b"0\r\n\r\n")
                return
            self.wfile.write(head + response.body)
            for _ in range(response.repeat - 1):
                self.wfile.write(response.body)
        except OSError:
            self.close_connection = True  # the client went away mid-answer
