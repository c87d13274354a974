"""Serve the dashboard with uvicorn: in the foreground (``distcrawl web``) or on a thread of
another process (``distcrawl demo --web``, tests)."""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import socket
import threading
from typing import TYPE_CHECKING

import uvicorn

from distcrawl.web.app import create_app
from distcrawl.web.security import check_bind

if TYPE_CHECKING:
    from distcrawl.web.app import WebConfig

__all__ = ["DEFAULT_HOST", "DEFAULT_PORT", "DashboardServer", "bind"]

#: where the dashboard listens unless told otherwise: this machine only
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8470
#: seconds open event streams get to finish when the dashboard stops
_GRACEFUL = 2


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on *host*:*port* (0 = a free port)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host.strip("[]"), port))
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def listening(host: str, port: int) -> tuple[str, ...]:
    """Where a dashboard bound to *host*:*port* can be reached (``host:port`` each): *host*,
    and for an any-address bind the machine's own addresses too."""
    found = [host.strip("[]")]
    if _is_ip(found[0]) and ipaddress.ip_address(found[0]).is_unspecified:
        with contextlib.suppress(OSError):
            for *_, sockaddr in socket.getaddrinfo(socket.gethostname(), None):
                found.append(str(sockaddr[0]))
    shown = (f"[{a}]" if ":" in a else a for a in dict.fromkeys(found))
    return tuple(f"{a}:{port}" for a in shown)


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


class DashboardServer:
    """The dashboard on *host*:*port*, answering to the ``Host`` names of *host* (see
    :class:`~distcrawl.web.security.HostCheck`); refuses a weak token, and a non-loopback
    *host* without one."""

    def __init__(self, config: WebConfig, *, host: str = DEFAULT_HOST, port: int = 0) -> None:
        check_bind(host, config.token)
        self.config = config
        self.host = host
        self.sock = bind(host, port)
        self.port: int = self.sock.getsockname()[1]
        self.app = create_app(config, bind=host, addresses=listening(host, self.port))
        self._server = uvicorn.Server(
            uvicorn.Config(
                self.app,
                log_level="warning",
                timeout_graceful_shutdown=_GRACEFUL,
                access_log=False,
                lifespan="on",
            )
        )
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/"

    def serve(self) -> None:
        """Serve until Ctrl-C (or :meth:`stop` from another thread)."""
        asyncio.run(self._server.serve(sockets=[self.sock]))

    def start(self) -> DashboardServer:
        """Serve on a daemon thread; returns once the dashboard answers."""
        self._thread = threading.Thread(target=self.serve, name="dashboard", daemon=True)
        self._thread.start()
        while not self._server.started:
            if not self._thread.is_alive():
                raise RuntimeError("the dashboard failed to start (see the log)")
            self._thread.join(0.05)
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=20)
            if self._thread.is_alive():  # a client holds the server up: close what is left
                self._server.force_exit = True
                self._thread.join(timeout=10)
        self.sock.close()
        if self._thread is not None and self._thread.is_alive():
            raise RuntimeError("the dashboard did not stop within 30 s")
