"""A node's settings with a probe among its downloader middlewares: on the first answer 429 or
503 of a site, it downloads another page of that site itself, straight through the engine (a
request that reaches the downloader outside the queue, as a middleware's own would). That
request must wait for the site's hold like every other one. Nodes load it as their settings
module (``tests`` is on their ``PYTHONPATH``)."""

from __future__ import annotations

import asyncio
from typing import Any

from scrapy import Request
from scrapy.http.request import NO_CALLBACK

from distcrawl.settings import *  # noqa: F403
from distcrawl.settings import DOWNLOADER_MIDDLEWARES as _BASE

#: the query string of the probe's own download, as the shop logs its path
PROBE = "?probe=1"

DOWNLOADER_MIDDLEWARES = {**_BASE, "politeness_probe.ThrottleProbe": 950}


class ThrottleProbe:
    """On the first 429/503 answer, one download of the site's home page with ``PROBE``."""

    def __init__(self, crawler: Any) -> None:
        self.crawler = crawler
        self.fired = False
        self._tasks: set[asyncio.Future[Any]] = set()

    @classmethod
    def from_crawler(cls, crawler: Any) -> ThrottleProbe:
        return cls(crawler)

    def process_response(self, request: Request, response: Any) -> Any:
        if response.status in (429, 503) and not self.fired:
            self.fired = True
            probe = Request(response.urljoin("/" + PROBE), callback=NO_CALLBACK, dont_filter=True)
            task = asyncio.ensure_future(self.crawler.engine.download_async(probe))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return response
