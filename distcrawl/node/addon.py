"""The one switch: ``ADDONS = {"distcrawl.Frontier": 0}`` runs a Scrapy or scrapy-redis
project on the lossless frontier.

It sets ``SCHEDULER`` to the frontier's (also over a project's own ``SCHEDULER``, such as
scrapy-redis'); replaces Scrapy's ``RetryMiddleware`` with the frontier's backoff retries
(retries parked in Redis; the last failure becomes a dead letter) and groups every failure
into the crawl's error groups (:mod:`distcrawl.node.observe`); keeps Scrapy's rule that
a ``dont_filter`` request does not mark its URL seen (``DISTCRAWL_RECORD_DONT_FILTER``);
uses scrapy-redis' fingerprint format (unless the project names its own
``REQUEST_FINGERPRINTER_CLASS``); keeps the process' start-up objects out of the garbage
collector's full passes (:mod:`distcrawl.node.heap`, ``DISTCRAWL_GC_FREEZE``); and translates
scrapy-redis settings (:func:`distcrawl.node.compat.translate_settings`). A spider that is not a
scrapy-redis one closes once the whole cluster is drained (``DISTCRAWL_CLOSE_WHEN_DRAINED``),
as it would end on Scrapy. A setting given on the command line (``-s``) still wins.

It applies distcrawl's environment rule over the project's settings module (an environment
variable named like a registered setting supplies it, see :mod:`distcrawl.base.config`),
reports unknown ``DISTCRAWL_*`` names and checks every registered value, as a node of
distcrawl's own project does (:mod:`distcrawl.node.settings_check`).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from scrapy.settings import SETTINGS_PRIORITIES
from scrapy_redis.spiders import RedisMixin

from distcrawl.node.compat import translate_settings
from distcrawl.node.settings_check import apply_environment, check

if TYPE_CHECKING:
    from typing import Self

    from scrapy.crawler import Crawler
    from scrapy.settings import BaseSettings

__all__ = ["Frontier"]

logger = logging.getLogger(__name__)

#: the scheduler the add-on sets
SCHEDULER = "distcrawl.node.scheduler.FrontierScheduler"
#: the request fingerprints of the frontier's dupefilter (scrapy-redis' own format)
FINGERPRINTER = "distcrawl.node.compat.ScrapyRedisFingerprinter"
#: Scrapy's retry middleware and the frontier's, which takes its place (same order, 550)
_SCRAPY_RETRY = "scrapy.downloadermiddlewares.retry.RetryMiddleware"
_FRONTIER_RETRY = "distcrawl.node.middlewares.retry.BackoffRetryMiddleware"
#: start-up objects out of the collector's full passes (``DISTCRAWL_GC_FREEZE``)
_FREEZE = "distcrawl.node.heap.FreezeStartupObjects"
#: every failure into the crawl's error groups (after the retry middleware: each try)
_CAPTURE = "distcrawl.node.observe.capture.FailureCapture"
#: the end of a crawl: its report and its notice, by the last node out
_CRAWL_END = "distcrawl.ops.finish.CrawlEnd"


class Frontier:
    """Scrapy add-on: the frontier scheduler and what it needs, in one line of ``ADDONS``."""

    def __init__(self, crawler: Crawler | None = None) -> None:
        self.crawler = crawler

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(crawler)

    def update_settings(self, settings: BaseSettings) -> None:
        # a project's settings.py (priority "project") names scrapy-redis' scheduler: the
        # add-on is the project's own choice, so it wins over that, not over -s
        priority = max(SETTINGS_PRIORITIES["addon"], SETTINGS_PRIORITIES["project"])
        apply_environment(settings)
        previous = settings.get("SCHEDULER") if settings.getpriority("SCHEDULER") else None
        if (settings.getpriority("SCHEDULER") or 0) <= priority:
            settings.set("SCHEDULER", SCHEDULER, priority=priority)
        middlewares = settings["DOWNLOADER_MIDDLEWARES"]
        if _FRONTIER_RETRY not in middlewares:
            order = settings["DOWNLOADER_MIDDLEWARES_BASE"].get(_SCRAPY_RETRY, 550)
            middlewares.set(_SCRAPY_RETRY, None, priority)
            middlewares.set(_FRONTIER_RETRY, order, priority)
        if _CAPTURE not in middlewares:
            middlewares.set(_CAPTURE, int(middlewares[_FRONTIER_RETRY]) + 10, priority)
        extensions = settings["EXTENSIONS"]
        if _FREEZE not in extensions:
            extensions.set(_FREEZE, 0, priority)
        if _CRAWL_END not in extensions:
            extensions.set(_CRAWL_END, 500, priority)
        # Scrapy's rule, which a project's spiders rely on: a dont_filter request (a start
        # URL) does not mark its URL seen, so a rule that links back to it still parses it
        if (settings.getpriority("DISTCRAWL_RECORD_DONT_FILTER") or 0) <= priority:
            settings.set("DISTCRAWL_RECORD_DONT_FILTER", False, priority=priority)
        # scrapy-redis' fingerprints: a dupefilter moved by `distcrawl migrate` keeps working
        if (settings.getpriority("REQUEST_FINGERPRINTER_CLASS") or 0) <= 0:
            settings.set("REQUEST_FINGERPRINTER_CLASS", FINGERPRINTER, priority=priority)
        done = translate_settings(settings, priority)
        spidercls = getattr(self.crawler, "spidercls", None)
        if (
            spidercls is not None
            and not issubclass(spidercls, RedisMixin)
            and not settings.getpriority("DISTCRAWL_CLOSE_WHEN_DRAINED")
        ):
            # a plain Scrapy spider ends once its crawl is done, as it does on Scrapy (a
            # scrapy-redis spider waits for more seeds, as it does on scrapy-redis)
            settings.set("DISTCRAWL_CLOSE_WHEN_DRAINED", True, priority=priority)
            done.append("DISTCRAWL_CLOSE_WHEN_DRAINED (not a scrapy-redis spider)")
        if previous and previous != SCHEDULER:
            done.insert(0, f"SCHEDULER {previous} -> {SCHEDULER}")
        logger.info("distcrawl.Frontier add-on: %s", "; ".join(done) or "frontier scheduler")
        check(settings, spidercls=spidercls)
