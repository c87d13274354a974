"""Requests that reach the downloader outside the queue wait for their site as a leased one
would: a middleware's own download, a request kept in a node's memory, a robots.txt fetch.

A leased request was admitted by its site's shared budget when it was leased, and the
scheduler's gate held it for its site's hold and its server's budget. One the gate held after
its lease spent its site's rate token takes a new token here (it holds its server's grant
already): sent on the old one, it would go out together with the requests leased since. Any
other request is checked here, just before it is sent: it waits for its site's hold
(robots.txt unavailable, Retry-After; one this node met waits here at once), its Crawl-delay
and its rate (a robots.txt fetch is charged to the rate without waiting, by
:class:`~distcrawl.node.middlewares.robots.SharedRobotsTxt`), and for a grant of its server's
budget, given back when its answer (or failure) is in.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any
from weakref import WeakKeyDictionary

from scrapy.utils.httpobj import urlparse_cached

from distcrawl.base.names import stats as stat_keys
from distcrawl.node.politeness import Politeness

if TYPE_CHECKING:
    from typing import Self

    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Response

__all__ = ["OutsideRequestsMiddleware"]

#: the longest one wait for a site's budget lasts before it is asked again
_STEP = 5.0


class OutsideRequestsMiddleware:
    """Downloader middleware: requests outside the queue wait for their site's budget and their
    server's grant (see the module). Settings: the politeness settings
    (:class:`~distcrawl.node.politeness.Politeness`)."""

    def __init__(self, politeness: Politeness) -> None:
        self.politeness = politeness
        self._grants: WeakKeyDictionary[Request, str] = WeakKeyDictionary()

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(Politeness.of(crawler))

    async def process_request(self, request: Request) -> None:
        politeness = self.politeness
        passed = politeness.passed.get(request)
        if passed:
            return  # leased (admitted by its site's budget and the gate), or the node's own
        url = urlparse_cached(request)
        site = url.hostname
        if not site or url.scheme not in ("http", "https"):
            return
        robots = bool(request.meta.get("dont_obey_robotstxt")) and url.path == "/robots.txt"
        if not robots:
            await self._wait_for_budget(site)
        if passed is not None:
            return  # a leased one the gate held after its token: it has its server's grant
        servers = politeness.servers
        if servers.enabled and servers.store is not None:
            server = await servers.resolved(site)
            if server:
                await servers.acquire(server)
                self._grants[request] = server

    async def _wait_for_budget(self, site: str) -> None:
        """Until ``site`` is not held and a token of its rate is spent for this request."""
        politeness = self.politeness
        waited = False
        while (wait := politeness.held_for(site) or await politeness.outside_token(site)) > 0:
            if not waited:
                politeness.stats.inc_value(stat_keys.OUTSIDE_WAITS)
                waited = True
            await asyncio.sleep(min(wait, _STEP))

    def _done(self, request: Request) -> None:
        server = self._grants.pop(request, None)
        if server:
            self.politeness.servers.done(server)

    def process_response(self, request: Request, response: Response) -> Response:
        self._done(request)
        return response

    def process_exception(self, request: Request, exception: Exception) -> Any:
        self._done(request)
        return None
