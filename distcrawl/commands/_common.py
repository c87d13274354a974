"""What every operator command shares: settings, the Redis client and the crawl's keys.

Each command module has one implementation, ``add_command_arguments(parser)`` and
``execute(opts, settings) -> int``, and two entry points made from it by :func:`entry_points`:
``Command`` for ``scrapy <command>`` (Scrapy reads settings and ``-s`` itself), and
``add_arguments`` / ``run`` for ``distcrawl <command>`` (settings from :func:`load_settings`).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from importlib import import_module
from typing import TYPE_CHECKING, Any

from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError
from scrapy.settings import SETTINGS_PRIORITIES, Settings
from scrapy.utils.conf import arglist_to_dict
from scrapy.utils.misc import load_object
from scrapy.utils.project import get_project_settings

from distcrawl.base.config import SETTINGS, SettingError
from distcrawl.base.urls import mask_url
from distcrawl.frontier import connection, crawlconf
from distcrawl.frontier.store import FrontierKeys
from distcrawl.node.seeds.sources import SeedSource
from distcrawl.node.settings_check import apply_environment, unknown_names
from distcrawl.servers.embedded import resolve_home, services_status

if TYPE_CHECKING:
    from collections.abc import Callable

    from scrapy.settings import BaseSettings

    #: a module's ``add_command_arguments``, and the ``distcrawl`` script's ``add_arguments``
    AddArguments = Callable[[argparse.ArgumentParser], None]
    #: a command module's ``execute``: the command itself, returning its exit status
    Execute = Callable[[argparse.Namespace, BaseSettings], int]

__all__ = [
    "DEFAULT_SPIDER",
    "add_settings_option",
    "add_spider_argument",
    "allow_private",
    "check_crawl",
    "crawl_keys",
    "entry_points",
    "heartbeat_interval",
    "heartbeat_timeout",
    "load_settings",
    "page_priorities",
    "redis_client",
    "redis_error",
    "redis_url",
    "report_unknown",
    "warn_if_no_crawl",
]

#: the crawl of this project, named in help texts
DEFAULT_SPIDER = "catalog"
#: the ``-s NAME=VALUE`` help, as Scrapy words it
_SET_HELP = "set/override setting (may be repeated)"


def add_spider_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("spider", help=f"the crawl: its spider name (e.g. {DEFAULT_SPIDER})")


def add_settings_option(parser: argparse.ArgumentParser) -> None:
    """``-s NAME=VALUE`` for the ``distcrawl`` entry point (``scrapy`` adds its own)."""
    parser.add_argument(
        "-s", "--set", action="append", default=[], metavar="NAME=VALUE", help=_SET_HELP
    )


def entry_points(
    module: str,
    add_command_arguments: AddArguments,
    execute: Execute,
    *,
    usage: str,
    summary: str,
    extra_args: str | None = None,
) -> tuple[type[ScrapyCommand], AddArguments, Callable[[argparse.Namespace], int]]:
    """``Command``, ``add_arguments`` and ``run`` of the command module named *module*.

    *usage* and *summary* are what ``scrapy <command> -h`` and ``scrapy -h`` show. Scrapy's
    parser leaves positional arguments given after an option unparsed: with *extra_args*
    (the name of a list argument) they join that list, else they are a usage error.
    """

    # Scrapy makes a command of every ScrapyCommand subclass defined in a module under
    # COMMANDS_MODULE, named after that module: a base class here would be a command
    # ``_common``, so the class is made here and belongs to *module*.
    class Command(ScrapyCommand):
        requires_project = True
        requires_crawler_process = False

        def syntax(self) -> str:
            return usage

        def short_desc(self) -> str:
            return summary

        def add_options(self, parser: argparse.ArgumentParser) -> None:
            super().add_options(parser)
            add_command_arguments(parser)

        def run(self, args: list[str], opts: argparse.Namespace) -> None:
            if extra_args is None:
                if args:
                    raise UsageError(f"unexpected arguments: {' '.join(args)}")
            else:
                unknown = [a for a in args if a.startswith("-")]
                if unknown:
                    raise UsageError(f"unknown options: {' '.join(unknown)}")
                setattr(opts, extra_args, [*getattr(opts, extra_args), *args])
            assert self.settings is not None
            self.exitcode = _execute(execute, opts, self.settings)

    Command.__module__, Command.__qualname__ = module, "Command"
    Command.__doc__ = f"``scrapy {module.rpartition('.')[2]}``."

    def add_arguments(parser: argparse.ArgumentParser) -> None:
        add_command_arguments(parser)
        add_settings_option(parser)

    def run(args: argparse.Namespace) -> int:
        return _execute(execute, args, load_settings(args.set))

    return Command, add_arguments, run


def _execute(execute: Execute, opts: argparse.Namespace, settings: BaseSettings) -> int:
    """*execute*, after the unknown-name warnings; a setting that cannot be used is an
    error line and exit status 2, not a traceback."""
    report_unknown(settings)
    try:
        return execute(opts, settings)
    except SettingError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def load_settings(overrides: list[str] | None = None) -> Settings:
    """The project's settings (``scrapy.cfg`` or ``SCRAPY_SETTINGS_MODULE``, else distcrawl's),
    with ``-s`` overrides applied as Scrapy applies them."""
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


def report_unknown(settings: BaseSettings) -> None:
    """One warning line on stderr per ``DISTCRAWL_*`` name (environment or settings) that is
    no setting, with the nearest setting name."""
    for item in unknown_names(settings):
        print(f"warning: {item.message()}", file=sys.stderr)


def check_crawl(client: Any, keys: FrontierKeys) -> None:
    """Exit with status 2 when the crawl's nodes recorded another shard count or seed list
    than this command computes: its reads and writes would miss the crawl."""
    recorded = crawlconf.read(client, keys)
    differ = crawlconf.differences(recorded, crawlconf.layout(keys))
    for mismatch in differ:
        print(f"error: {crawlconf.refusal(mismatch, keys, recorded)}", file=sys.stderr)
    if differ:
        raise SystemExit(2)


def redis_url(settings: BaseSettings) -> str:
    """``REDIS_URL``; when empty, the embedded Redis of ``DISTCRAWL_HOME`` if it runs.

    An operator command never starts a server: an empty Redis started here would only show an
    empty crawl. With neither, it exits (status 1) naming the home it looked in.
    """
    if settings.get("REDIS_URL") or not SETTINGS.value(settings, "DISTCRAWL_EMBEDDED"):
        return connection.settings_url(settings)
    home = resolve_home(SETTINGS.value(settings, "DISTCRAWL_HOME") or None)
    embedded = services_status(home)["redis"]
    if not embedded["running"]:
        raise SystemExit(
            f"error: REDIS_URL is not set and no embedded Redis runs under {home}. Set "
            "REDIS_URL to the crawl's Redis, or DISTCRAWL_HOME to the folder of the nodes' "
            "embedded services (`distcrawl services start` starts them and prints REDIS_URL)."
        )
    return str(embedded["url"])


def warn_if_no_crawl(client: Any, keys: FrontierKeys, url: str) -> bool:
    """Warn on stderr when Redis holds none of the crawl's keys (a misspelt spider name, or
    another Redis than the nodes'); True when it holds some. A few EXISTS (one per hash slot:
    the control slot, the seed list, each shard), never a SCAN."""
    control = [keys.nodes, keys.rejected, keys.paused, keys.counters, keys.recovering]
    if client.exists(*control) or client.exists(keys.start_urls):
        return True
    for shard in keys.all_shards():
        if client.exists(shard.seq, shard.queue, shard.dead, shard.delayed, shard.seen_info):
            return True
    print(
        f"warning: {mask_url(url)} holds no crawl {keys.spider!r} (no nodes, queue, seen URLs, "
        f"dead letters or seeds under {keys.prefix}); check the spider name and REDIS_URL",
        file=sys.stderr,
    )
    return False


def redis_client(settings: BaseSettings) -> Any:
    """A blocking client of the crawl's Redis (a ``RedisCluster`` on a cluster)."""
    return connection.client(redis_url(settings), socket_timeout=30, socket_connect_timeout=10)


def redis_error(url: str, exc: BaseException, doing: str = "") -> int:
    """Say on stderr that Redis at *url* failed, its password masked; the exit status, 1."""
    print(f"error: {doing}{mask_url(url)}: {exc}", file=sys.stderr)
    return 1


def crawl_keys(settings: BaseSettings, spider: str) -> FrontierKeys:
    """The crawl's keys, with the seed list named as the frontier scheduler names it (also
    a scrapy-redis spider's own ``redis_key``, and the list its set or zset is staged in)."""
    keys = FrontierKeys.for_spider(spider, settings)
    source = SeedSource.named(spider, _spider_class(settings, spider), settings, keys.start_urls)
    return dataclasses.replace(keys, start_urls=source.list_key)


def _spider_class(settings: BaseSettings, name: str) -> type | None:
    """The project's spider class of that name, if it has one that loads."""
    try:
        loader = load_object(settings["SPIDER_LOADER_CLASS"]).from_settings(settings.frozencopy())
        spidercls: type = loader.load(name)
    except Exception:  # no such spider, or its module does not import: the default keys
        return None
    return spidercls


def allow_private(settings: BaseSettings) -> bool | frozenset[str]:
    """``DISTCRAWL_ALLOW_PRIVATE`` read exactly as the frontier scheduler reads it."""
    allowed: bool | frozenset[str] = SETTINGS.value(settings, "DISTCRAWL_ALLOW_PRIVATE")
    return allowed


def heartbeat_timeout(settings: BaseSettings) -> float:
    return float(SETTINGS.value(settings, "DISTCRAWL_HEARTBEAT_TIMEOUT"))


def heartbeat_interval(settings: BaseSettings) -> float:
    return float(SETTINGS.value(settings, "DISTCRAWL_HEARTBEAT_INTERVAL"))


def page_priorities(settings: BaseSettings) -> dict[str, int]:
    priorities: dict[str, int] = SETTINGS.value(settings, "PAGE_PRIORITIES")
    return priorities
