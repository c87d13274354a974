"""scrapy-redis and Scrapy scheduler settings on the frontier: what each one means here.

A scrapy-redis project carries settings for a scheduler it no longer uses. Those with a
meaning here are honoured (the connection settings always; the others translated by the
``distcrawl.Frontier`` add-on into the frontier's own settings); every other one the project
set is reported once at start, with the reason it changes nothing.
"""

from __future__ import annotations

import hashlib
import json
import logging
from typing import TYPE_CHECKING, Any
from weakref import WeakKeyDictionary

from scrapy.utils.python import to_unicode
from w3lib.url import canonicalize_url

from distcrawl.base.config import SETTINGS
from distcrawl.base.names.commands import MIGRATE_CRAWL, RESET_CRAWL
from distcrawl.frontier.connection import redis_url_from_settings

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

__all__ = [
    "IGNORED",
    "ScrapyRedisFingerprinter",
    "adopt_spider",
    "redis_url_from_settings",
    "report_settings",
    "scrapy_redis_fingerprint",
    "translate_settings",
]

logger = logging.getLogger(__name__)

#: setting -> why it changes nothing on the frontier (reported only if the project set it)
IGNORED: dict[str, str] = {
    "SCHEDULER_PERSIST": "the frontier always keeps its queue and dupefilter when a node "
    f"stops (`{RESET_CRAWL.line(spider='SPIDER')}` empties them)",
    "SCHEDULER_FLUSH_ON_START": "a starting node never empties the shared frontier "
    f"(`{RESET_CRAWL.line(spider='SPIDER')}` does)",
    "SCHEDULER_QUEUE_CLASS": "the frontier has one queue: priority first, then first in "
    "first out, leased to nodes instead of popped",
    "SCHEDULER_QUEUE_KEY": "the frontier's keys are {<spider>}:queue, {<spider>}:req, ...; "
    f"`{MIGRATE_CRAWL.line(spider='SPIDER')}` moves an old queue in",
    "SCHEDULER_DUPEFILTER_KEY": "the shared dupefilter is {<spider>}:dupefilter; "
    f"`{MIGRATE_CRAWL.line(spider='SPIDER')}` copies old fingerprints in",
    "SCHEDULER_DUPEFILTER_CLASS": "the frontier filters duplicates itself, in Redis",
    "DUPEFILTER_CLASS": "the frontier filters duplicates itself, in Redis",
    "DUPEFILTER_KEY": "the shared dupefilter is {<spider>}:dupefilter",
    "DUPEFILTER_DEBUG": "duplicates are counted in dupefilter/filtered and frontier/filtered",
    "SCHEDULER_SERIALIZER": "requests are stored as JSON, never pickled",
    "SCHEDULER_IDLE_BEFORE_CLOSE": "a node never blocks on an empty queue; it waits for "
    "work (DISTCRAWL_CLOSE_WHEN_DRAINED, DISTCRAWL_DRAIN_GRACE end it)",
    "SCHEDULER_DEBUG": "the frontier logs refused entries and counts them in frontier/*",
    "SCHEDULER_DISK_QUEUE": "the queue lives in Redis",
    "SCHEDULER_MEMORY_QUEUE": "the queue lives in Redis",
    "SCHEDULER_PRIORITY_QUEUE": "the frontier orders by priority, then first in first out",
    "SCHEDULER_START_DISK_QUEUE": "start requests go to the frontier like any other",
    "SCHEDULER_START_MEMORY_QUEUE": "start requests go to the frontier like any other",
    "JOBDIR": "the crawl's state lives in Redis, shared by every node",
    "REDIS_START_URLS_BATCH_SIZE": "set DISTCRAWL_SEED_BATCH (the distcrawl.Frontier add-on does)",
    "MAX_IDLE_TIME_BEFORE_CLOSE": "set DISTCRAWL_CLOSE_WHEN_DRAINED and DISTCRAWL_DRAIN_GRACE "
    "(the distcrawl.Frontier add-on does)",
    "REDIS_ENCODING": "seeds and requests are UTF-8",
    "REDIS_DECODE_RESPONSES": "the frontier decodes what it reads itself",
}
#: what the add-on translates: scrapy-redis setting -> the frontier settings it sets
TRANSLATED = {
    "REDIS_START_URLS_BATCH_SIZE": "DISTCRAWL_SEED_BATCH",
    "MAX_IDLE_TIME_BEFORE_CLOSE": "DISTCRAWL_CLOSE_WHEN_DRAINED, DISTCRAWL_DRAIN_GRACE",
}
#: settings honoured as they are (logged with the meaning they have here)
HONOURED = {
    "REDIS_HOST": "the frontier's Redis",
    "REDIS_PORT": "the frontier's Redis",
    "REDIS_DB": "the frontier's Redis",
    "REDIS_PARAMS": "the frontier's Redis (host, port, db, username, password, ssl)",
    "REDIS_START_URLS_KEY": "the seed list, unless the spider names its own redis_key",
    "REDIS_START_URLS_AS_SET": "seeds are taken from a set (SPOP), losslessly",
    "REDIS_START_URLS_AS_ZSET": "seeds are taken from a sorted set, highest score first",
}
#: the add-on writes the names it translated here, so the report can say they were honoured
TRANSLATED_SETTING = "DISTCRAWL_COMPAT_TRANSLATED"
#: settings whose scrapy-redis / Scrapy default means no change (not worth a report)
_HARMLESS_VALUES: dict[str, tuple[Any, ...]] = {
    "SCHEDULER_PERSIST": (True, "True", "true", "1", 1),
    "SCHEDULER_FLUSH_ON_START": (False, "False", "false", "0", 0),
    "MAX_IDLE_TIME_BEFORE_CLOSE": (0, "0"),
    "DUPEFILTER_DEBUG": (False, "False", "false", "0", 0),
    "SCHEDULER_DEBUG": (False, "False", "false", "0", 0),
    "REDIS_ENCODING": ("utf-8", "utf8", "UTF-8"),
    "DUPEFILTER_CLASS": ("scrapy.dupefilters.RFPDupeFilter",),
}


def _set_by_project(settings: BaseSettings, name: str) -> bool:
    """Whether someone set ``name`` (Scrapy's defaults sit at priority 0)."""
    priority = settings.getpriority(name)
    return priority is not None and priority > 0


def translate_settings(settings: BaseSettings, priority: int) -> list[str]:
    """Set the frontier's settings from scrapy-redis' at ``priority``; returns what it did."""
    done = []
    url, _ = redis_url_from_settings(settings)
    if url and not settings.get("REDIS_URL"):
        settings.set("REDIS_URL", url, priority=priority)
        done.append("REDIS_HOST/REDIS_PORT/REDIS_PARAMS -> REDIS_URL")
    translated = []
    batch = settings.getint("REDIS_START_URLS_BATCH_SIZE", 0)
    if batch > 0 and not _set_by_project(settings, "DISTCRAWL_SEED_BATCH"):
        settings.set("DISTCRAWL_SEED_BATCH", batch, priority=priority)
        translated.append("REDIS_START_URLS_BATCH_SIZE")
        done.append(f"REDIS_START_URLS_BATCH_SIZE -> DISTCRAWL_SEED_BATCH = {batch}")
    idle = settings.getint("MAX_IDLE_TIME_BEFORE_CLOSE", 0)
    if idle > 0 and not _set_by_project(settings, "DISTCRAWL_CLOSE_WHEN_DRAINED"):
        # scrapy-redis closes a spider idle that long; the frontier closes a node once the
        # whole cluster has had nothing to do for that long
        settings.set("DISTCRAWL_CLOSE_WHEN_DRAINED", True, priority=priority)
        settings.set("DISTCRAWL_DRAIN_GRACE", float(idle), priority=priority)
        translated.append("MAX_IDLE_TIME_BEFORE_CLOSE")
        done.append(
            f"MAX_IDLE_TIME_BEFORE_CLOSE -> DISTCRAWL_CLOSE_WHEN_DRAINED, "
            f"DISTCRAWL_DRAIN_GRACE = {idle}"
        )
    settings.set(TRANSLATED_SETTING, translated, priority=priority)
    return done


def ignored_settings(settings: BaseSettings) -> list[tuple[str, str]]:
    """The settings the project set that change nothing on the frontier, with the reason."""
    translated = set(settings.getlist(TRANSLATED_SETTING))
    out = []
    for name, reason in IGNORED.items():
        if name in translated or not _set_by_project(settings, name):
            continue
        if settings.get(name) in _HARMLESS_VALUES.get(name, ()):
            continue
        out.append((name, reason))
    _, unused = redis_url_from_settings(settings)
    out.extend(
        (f"REDIS_PARAMS[{key!r}]", "the frontier sets its own connection options") for key in unused
    )
    return out


def report_settings(settings: BaseSettings) -> list[str]:
    """Log once which scrapy-redis settings are honoured and which are ignored, and why."""
    lines = []
    translated = set(settings.getlist(TRANSLATED_SETTING))
    for name in translated:
        lines.append(f"{name} honoured as {TRANSLATED[name]}")
    for name, meaning in HONOURED.items():
        if _set_by_project(settings, name):
            lines.append(f"{name} honoured: {meaning}")
    for line in lines:
        logger.info("Setting %s", line)
    ignored = ignored_settings(settings)
    for name, reason in ignored:
        logger.warning("Setting %s is ignored by the frontier: %s", name, reason)
    return lines + [f"{name} ignored: {reason}" for name, reason in ignored]


def adopt_spider(crawler: Any, spider: Any) -> None:
    """Prepare ``spider`` for the frontier scheduler: a scrapy-redis spider stops popping its
    own ``redis_key`` when idle (the frontier takes its seeds, losslessly); the operator's
    ``DISTCRAWL_REQUEST_CLASSES`` and ``DISTCRAWL_ITEM_CLASSES`` join the codec's allow-lists;
    the settings report is logged."""
    from scrapy import signals
    from scrapy_redis.spiders import RedisMixin

    from distcrawl.node.requests.classes import allow_item_classes, allow_request_classes

    if isinstance(spider, RedisMixin):
        crawler.signals.disconnect(spider.spider_idle, signal=signals.spider_idle)
        logger.info(
            "scrapy-redis spider %s: its seeds from %s go through the frontier",
            spider.name,
            spider.redis_key,
        )
    allow_request_classes(SETTINGS.value(crawler.settings, "DISTCRAWL_REQUEST_CLASSES"))
    allow_item_classes(SETTINGS.value(crawler.settings, "DISTCRAWL_ITEM_CLASSES"))
    report_settings(crawler.settings)


def scrapy_redis_fingerprint(request: Any) -> str:
    """The fingerprint scrapy-redis' ``RFPDupeFilter`` writes: SHA-1 (hex) of method, the
    canonical URL and the body, the same data Scrapy's default fingerprint covers."""
    data = {
        "method": to_unicode(request.method),
        "url": canonicalize_url(request.url),
        "body": (request.body or b"").hex(),
    }
    return hashlib.sha1(json.dumps(data, sort_keys=True).encode()).hexdigest()


class ScrapyRedisFingerprinter:
    """``REQUEST_FINGERPRINTER_CLASS`` with scrapy-redis' fingerprints, which the
    ``distcrawl.Frontier`` add-on sets: the frontier's dupefilter then holds fingerprints in the
    format a scrapy-redis dupefilter already has, so ``distcrawl migrate`` copies them as
    they are and a moved crawl does not fetch again what it fetched before."""

    def __init__(self) -> None:
        self._cache: WeakKeyDictionary[Any, bytes] = WeakKeyDictionary()

    @classmethod
    def from_crawler(cls, crawler: Any) -> ScrapyRedisFingerprinter:
        return cls()

    def fingerprint(self, request: Any) -> bytes:
        fp = self._cache.get(request)
        if fp is None:
            fp = self._cache[request] = bytes.fromhex(scrapy_redis_fingerprint(request))
        return fp
