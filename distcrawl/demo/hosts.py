"""Many sites on one machine: a resolver that answers every name under ``.localhost`` with the
loopback address, as RFC 6761 says such names resolve (browsers do; glibc may not).

``shop-a.localhost``, ``shop-b.localhost``, ... are then distinct sites (a site is a host name)
that all answer from one server, 127.0.0.1: what shops on shared hosting look like. A node
uses it with ``-s DNS_RESOLVER=distcrawl.demo.hosts.LocalhostResolver`` (and
``DISTCRAWL_ALLOW_PRIVATE=127.0.0.1``); the demo shop answers whatever host name it is asked
for.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from scrapy.resolver import CachingThreadedResolver, dnscache
from twisted.internet import defer

if TYPE_CHECKING:
    from twisted.internet.defer import Deferred

__all__ = ["LOOPBACK", "LocalhostResolver", "is_localhost_name"]

#: the address every name under .localhost answers from
LOOPBACK = "127.0.0.1"


def is_localhost_name(name: str) -> bool:
    return name.lower().rstrip(".").endswith(".localhost")


class LocalhostResolver(CachingThreadedResolver):
    """Scrapy's caching resolver, with every name under ``.localhost`` in its cache as
    127.0.0.1 (the downloader, the address guard and the server budgets all ask it)."""

    def getHostByName(self, name: str, timeout: Sequence[int] = ()) -> Deferred[str]:
        if is_localhost_name(name):
            dnscache[name] = LOOPBACK
            return defer.succeed(LOOPBACK)
        return super().getHostByName(name, timeout)
