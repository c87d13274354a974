"""What an operator tool knows of the crawl it works on, from the project's settings: the
crawl's Redis (never started by a tool), its keys, and the nodes' timing and limits as the
nodes themselves read them."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from functools import cached_property
from importlib import import_module
from typing import TYPE_CHECKING, Any

from scrapy.settings import SETTINGS_PRIORITIES, Settings
from scrapy.utils.conf import arglist_to_dict
from scrapy.utils.misc import load_object
from scrapy.utils.project import get_project_settings

from distcrawl.base.config import SETTINGS
from distcrawl.base.names.commands import START_SERVICES
from distcrawl.base.urls import mask_url
from distcrawl.frontier import connection, crawlconf
from distcrawl.frontier.keys import FrontierKeys
from distcrawl.frontier.store import CrawlFormatError, FrontierStore
from distcrawl.node.seeds.sources import SeedSource
from distcrawl.node.settings_check import apply_environment
from distcrawl.servers.embedded import resolve_home, services_status

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

__all__ = [
    "Context",
    "CrawlRefused",
    "NoCrawl",
    "NoRedis",
    "NoSpider",
    "crawl_keys",
    "load_settings",
    "project_spider",
    "redis_url",
]


class NoRedis(RuntimeError):
    """No Redis to work on: ``REDIS_URL`` is not set and no embedded Redis runs."""


class NoCrawl(RuntimeError):
    """Redis holds none of the crawl's keys."""


class CrawlRefused(RuntimeError):
    """The crawl is stored in a way this tool must neither read nor write: in another
    frontier format, or with another shard count or seed list than these settings give (its
    reads and writes would miss the crawl). ``lines``: one reason each."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        super().__init__("; ".join(lines))


class NoSpider(RuntimeError):
    """No spider named, and the project has none or several to choose from."""


def load_settings(overrides: list[str] | None = None) -> Settings:
    """The project's settings (``scrapy.cfg`` or ``SCRAPY_SETTINGS_MODULE``, else distcrawl's),
    with ``-s NAME=VALUE`` overrides applied as Scrapy applies them."""
    settings = get_project_settings()
    if settings.get("COMMANDS_MODULE") != "distcrawl.commands":
        # distcrawl's settings under another project's: what that project set itself wins
        ours = import_module("distcrawl.settings")
        project = SETTINGS_PRIORITIES["project"]
        for name in dir(ours):
            if name.isupper() and (settings.getpriority(name) or 0) < project:
                settings.set(name, getattr(ours, name), priority="project")
        # the environment over that project's module, as the distcrawl.Frontier add-on does
        apply_environment(settings)
    if overrides:
        try:
            settings.setdict(arglist_to_dict(overrides), priority="cmdline")
        except ValueError:
            raise SystemExit("invalid -s value, use -s NAME=VALUE") from None
    return settings


def redis_url(settings: BaseSettings) -> str:
    """``REDIS_URL``; when empty, the embedded Redis of ``DISTCRAWL_HOME`` if it runs, else
    :class:`NoRedis` naming the home it looked in. A tool never starts a server: an empty
    Redis started here would only show an empty crawl."""
    if settings.get("REDIS_URL") or not SETTINGS.value(settings, "DISTCRAWL_EMBEDDED"):
        return connection.settings_url(settings)
    home = resolve_home(SETTINGS.value(settings, "DISTCRAWL_HOME") or None)
    embedded = services_status(home)["redis"]
    if not embedded["running"]:
        raise NoRedis(
            f"REDIS_URL is not set and no embedded Redis runs under {home}. Set REDIS_URL to "
            "the crawl's Redis, or DISTCRAWL_HOME to the folder of the nodes' embedded "
            f"services (`{START_SERVICES.line()}` starts them and prints REDIS_URL)."
        )
    return str(embedded["url"])


def crawl_keys(settings: BaseSettings, spider: str) -> FrontierKeys:
    """The crawl's keys, with the seed list named as the frontier scheduler names it (also
    a scrapy-redis spider's own ``redis_key``, and the list its set or zset is staged in)."""
    keys = FrontierKeys.for_spider(spider, settings)
    source = SeedSource.named(spider, _spider_class(settings, spider), settings, keys.start_urls)
    return dataclasses.replace(keys, start_urls=source.list_key)


def project_spiders(settings: BaseSettings) -> list[str]:
    """The names of the project's spiders ([] when they do not load)."""
    try:
        loader = load_object(settings["SPIDER_LOADER_CLASS"]).from_settings(settings.frozencopy())
        return sorted(loader.list())
    except Exception:  # a spider module that does not import: no names to go by
        return []


def project_spider(settings: BaseSettings) -> str:
    """The project's only spider (what a command given no spider works on), else
    :class:`NoSpider` naming the ones there are."""
    try:
        loader = load_object(settings["SPIDER_LOADER_CLASS"]).from_settings(settings.frozencopy())
        names = sorted(loader.list())
    except Exception as exc:  # a spider module that does not import: say which
        raise NoSpider(f"name the spider: the project's spiders do not load ({exc})") from None
    if len(names) == 1:
        return str(names[0])
    if not names:
        raise NoSpider("name the spider: the project has none (SPIDER_MODULES)")
    raise NoSpider(f"name the spider: the project has {len(names)} ({', '.join(names)})")


def _spider_class(settings: BaseSettings, name: str) -> type | None:
    """The project's spider class of that name, if it has one that loads."""
    try:
        loader = load_object(settings["SPIDER_LOADER_CLASS"]).from_settings(settings.frozencopy())
        spidercls: type = loader.load(name)
    except Exception:  # no such spider, or its module does not import: the default keys
        return None
    return spidercls


@dataclass(frozen=True)
class Context:
    """One crawl as an operator tool sees it: ``Context(settings, spider)``."""

    settings: BaseSettings
    spider: str

    @cached_property
    def keys(self) -> FrontierKeys:
        return crawl_keys(self.settings, self.spider)

    @cached_property
    def redis_url(self) -> str:
        """See :func:`redis_url` (raises :class:`NoRedis`)."""
        return redis_url(self.settings)

    @property
    def masked_url(self) -> str:
        return mask_url(self.redis_url)

    def client(self, *, timeout: float = 30) -> Any:
        """A blocking client of the crawl's Redis (a ``RedisCluster`` on a cluster)."""
        return connection.client(self.redis_url, socket_timeout=timeout, socket_connect_timeout=10)

    def async_client(self, *, timeout: float = 30) -> Any:
        """A ``redis.asyncio`` client of the crawl's Redis (cluster-aware)."""
        return connection.async_client(self.redis_url, socket_timeout=timeout)

    @property
    def heartbeat_timeout(self) -> float:
        return float(SETTINGS.value(self.settings, "DISTCRAWL_HEARTBEAT_TIMEOUT"))

    @property
    def heartbeat_interval(self) -> float:
        return float(SETTINGS.value(self.settings, "DISTCRAWL_HEARTBEAT_INTERVAL"))

    @property
    def revisit_grace(self) -> float:
        return float(SETTINGS.value(self.settings, "DISTCRAWL_REVISIT_GRACE"))

    @property
    def page_priorities(self) -> dict[str, int]:
        return page_priorities(self.settings)

    @property
    def allow_private(self) -> bool | frozenset[str]:
        """``DISTCRAWL_ALLOW_PRIVATE`` read exactly as the nodes read it."""
        allowed: bool | frozenset[str] = SETTINGS.value(self.settings, "DISTCRAWL_ALLOW_PRIVATE")
        return allowed

    def check_stored(self, client: Any, *, lost_ok: bool = False) -> None:
        """:class:`CrawlRefused` when the crawl is stored in another frontier format than
        this distcrawl's, when a node found its state gone from Redis (unless ``lost_ok``:
        the reset that clears it), or when its nodes recorded another shard count or seed
        list than these settings give (three reads); every tool asks before it reads or
        writes the crawl. A shard count the operator did not give (no ``DISTCRAWL_SHARDS`` in
        the environment, on the command line or in the project) is the one the crawl
        recorded: the tool then works on the crawl's keys."""
        keys = self.keys
        store = FrontierStore(client, keys)
        try:
            store.check_format()
        except CrawlFormatError as exc:
            raise CrawlRefused([str(exc)]) from exc
        origin = store.read_origin()
        if origin.lost and not lost_ok:
            raise CrawlRefused([origin.refusal(keys.spider)])
        recorded = crawlconf.read(client, keys)
        shards = recorded.get("DISTCRAWL_SHARDS", "")
        if shards.isdigit() and int(shards) != keys.shards and not _given(self.settings, _SHARDS):
            keys = dataclasses.replace(keys, shards=int(shards))
            self.__dict__["keys"] = keys  # the cached property, now the crawl's own layout
        differ = crawlconf.differences(recorded, crawlconf.layout(keys))
        if differ:
            raise CrawlRefused([crawlconf.refusal(m, keys, recorded) for m in differ])

    def check_crawl(self, client: Any, *, lost_ok: bool = False) -> None:
        """:meth:`check_stored`, then :class:`NoCrawl` when Redis holds none of the crawl's
        keys (a misspelt spider name, or another Redis than the nodes'). A few EXISTS (one
        per hash slot: the control slot, the seed list, each shard), never a SCAN."""
        self.check_stored(client, lost_ok=lost_ok)
        keys = self.keys
        control = [keys.nodes, keys.rejected, keys.paused, keys.counters, keys.recovering]
        control.append(keys.origin)
        if client.exists(*control) or client.exists(keys.start_urls):
            return
        for shard in keys.all_shards():
            if client.exists(shard.seq, shard.levels, shard.dead, shard.delayed, shard.seen_info):
                return
        raise NoCrawl(
            f"{self.masked_url} holds no crawl {keys.spider!r} (no nodes, queue, seen URLs, "
            f"dead letters or seeds under {keys.prefix}); check the spider name and REDIS_URL"
        )


_SHARDS = "DISTCRAWL_SHARDS"


def _given(settings: BaseSettings, name: str) -> bool:
    """Whether the operator gave setting *name*: in the environment, with ``-s``, or in the
    project's settings with another value than the registry's default."""
    if name in os.environ or (settings.getpriority(name) or 0) > SETTINGS_PRIORITIES["project"]:
        return True
    return bool(SETTINGS.value(settings, name) != SETTINGS.default(name))


def page_priorities(settings: BaseSettings) -> dict[str, int]:
    """The queue priority of each page kind (``PAGE_PRIORITIES`` over its defaults)."""
    priorities: dict[str, int] = SETTINGS.value(settings, "PAGE_PRIORITIES")
    return priorities
