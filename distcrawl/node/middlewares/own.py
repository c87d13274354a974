"""The addresses a node never fetches, whatever ``DISTCRAWL_ALLOW_PRIVATE`` allows: its own
Redis (``REDIS_URL``, every seed node of a cluster), its MongoDB (``MONGO_URI``'s hosts) and
the crawl's dashboards (each records where it listens in the crawl, ``{crawl}:dashboards``).

A request is one of them when its port is theirs and an address its host resolves to is
theirs, loopback and the any-address standing for one another (a server listening on
127.0.0.1 or 0.0.0.0 answers on every loopback address: ``localhost``, ``127.1``, ``[::1]``).
"""

from __future__ import annotations

import ipaddress
import logging
import time
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from distcrawl.frontier import connection
from distcrawl.frontier.store import FrontierStore

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from distcrawl.frontier.keys import FrontierKeys

__all__ = ["DASHBOARD_REFRESH", "OwnAddresses", "endpoints"]

logger = logging.getLogger(__name__)

#: seconds a node trusts the dashboards' addresses it read from the crawl
DASHBOARD_REFRESH = 15.0
_MONGO_PORT = 27017
_REDIS_PORT = 6379


def _split(hostport: str, default: int) -> tuple[str, int] | None:
    """``host:port`` (``[v6]:port``) as (host, port); None when it does not read."""
    text = hostport.strip()
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port = rest.removeprefix(":")
    else:
        host, sep, port = text.rpartition(":")
        if not sep:
            host, port = text, ""
    try:
        return (host.strip().lower(), int(port) if port else default)
    except ValueError:
        return None


def endpoints(redis_url: str, mongo_uri: str) -> list[tuple[str, int, str]]:
    """(host, port, what) of the node's own servers, from its settings (no DNS)."""
    found: list[tuple[str, int, str]] = []
    try:
        target = connection.parse_redis_url(redis_url)
    except connection.RedisURLError:
        target = None
    if target is not None:
        parts = urlsplit(target.url)
        if parts.hostname:
            found.append((parts.hostname.lower(), parts.port or _REDIS_PORT, "Redis"))
        found += [(h.lower(), p, "Redis") for h, p in target.seeds]
    parts = urlsplit(mongo_uri or "")
    if parts.scheme == "mongodb":
        for item in parts.netloc.rpartition("@")[2].split(","):
            hostport = _split(item, _MONGO_PORT)
            if hostport is not None and hostport[0]:
                found.append((*hostport, "MongoDB"))
    return list(dict.fromkeys(found))


def _address(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        ip = ipaddress.ip_address(text.strip("[]").split("%", 1)[0])
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


def _local(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    return ip.is_loopback or ip.is_unspecified


def same_place(a: str, b: str) -> bool:
    """Whether addresses *a* and *b* reach the same server (loopback and any-address alike)."""
    x, y = _address(a), _address(b)
    if x is None or y is None:
        return a.lower() == b.lower()
    return x == y or (_local(x) and _local(y))


class OwnAddresses:
    """The node's own servers (``static``: (host, port, what)) and the crawl's dashboards
    (read from the crawl with ``client``, every :data:`DASHBOARD_REFRESH` seconds, once
    ``open``)."""

    def __init__(
        self,
        static: list[tuple[str, int, str]],
        *,
        resolve: Callable[[str, int], Awaitable[list[str]]],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.static = static
        self.resolve = resolve
        self.clock = clock
        self._store: FrontierStore | None = None
        self._dashboards: list[tuple[str, int, str]] = []
        self._read_at = float("-inf")
        self._resolved: dict[tuple[str, int], list[str]] = {}

    def open(self, client: Any, keys: FrontierKeys) -> None:
        """Read the crawl's dashboards with *client* from now on."""
        self._store = FrontierStore(client, keys)

    def close(self) -> None:
        self._store = None

    async def refresh(self) -> None:
        """Read the dashboards' addresses again, where the last read is old."""
        if self._store is None or self.clock() - self._read_at < DASHBOARD_REFRESH:
            return
        self._read_at = self.clock()
        try:
            found = await self._store.dashboards()
        except connection.REDIS_FAILURES:
            return  # the frontier says Redis is away; the last addresses read stay
        self._dashboards = [
            (hp[0], hp[1], "dashboard") for a in found if (hp := _split(a, 0)) is not None
        ]

    async def _addresses_of(self, host: str, port: int) -> list[str]:
        if _address(host) is not None:
            return [host]
        key = (host, port)
        if key not in self._resolved:
            try:
                self._resolved[key] = list(await self.resolve(host, port))
            except Exception:  # a name of ours that does not resolve matches by name only
                return [host]
        return self._resolved[key] or [host]

    async def whose(self, host: str, port: int, addresses: list[str]) -> str | None:
        """What of the node's own a request to *host*:*port* would reach (its *addresses*:
        what the host resolves to), or None."""
        host = host.lower().rstrip(".")
        for own_host, own_port, what in (*self.static, *self._dashboards):
            if own_port != port:
                continue
            if own_host == host:
                return what
            for own in await self._addresses_of(own_host, own_port):
                if any(same_place(own, a) for a in (host, *addresses)):
                    return what
        return None

    def ports(self) -> set[int]:
        """The ports of the node's own servers and of the dashboards it knows of."""
        return {p for _, p, _ in (*self.static, *self._dashboards)}
