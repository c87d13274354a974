"""The two entry points of an operator tool, made from one implementation.

A tool module has ``add_command_arguments(parser)`` and ``execute(opts, settings) -> int``;
:func:`entry_points` makes ``Command`` for ``scrapy <command>`` (Scrapy reads settings and
``-s`` itself) and ``add_arguments`` / ``run`` for ``distcrawl <command>`` (settings from
:func:`~distcrawl.ops.context.load_settings`). The command line (``distcrawl/commands``) and
the dashboard's command (``distcrawl/web``) are both made this way.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError

from distcrawl.base.config import SettingError
from distcrawl.base.identifiers import BadName, check_crawl_name
from distcrawl.base.pipes import end_quietly, reader_gone
from distcrawl.node.settings_check import unknown_names
from distcrawl.ops.context import CrawlRefused, NoRedis, NoSpider, load_settings, project_spider

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
    "entry_points",
    "report_unknown",
]

#: the crawl of this project, named in help texts
DEFAULT_SPIDER = "catalog"
#: the ``-s NAME=VALUE`` help, as Scrapy words it
_SET_HELP = "set/override setting (may be repeated)"


def add_spider_argument(parser: argparse.ArgumentParser, *, optional: bool = False) -> None:
    """The crawl's spider name; *optional*: by default the project's only spider."""
    if optional:
        parser.add_argument(
            "spider",
            nargs="?",
            default=None,
            help=f"the crawl: its spider name (e.g. {DEFAULT_SPIDER}; default: the project's "
            "only spider)",
        )
        return
    parser.add_argument("spider", help=f"the crawl: its spider name (e.g. {DEFAULT_SPIDER})")


def add_settings_option(parser: argparse.ArgumentParser) -> None:
    """``-s NAME=VALUE`` for the ``distcrawl`` entry point (``scrapy`` adds its own)."""
    parser.add_argument(
        "-s", "--set", action="append", default=[], metavar="NAME=VALUE", help=_SET_HELP
    )


def report_unknown(settings: BaseSettings) -> None:
    """One warning line on stderr per ``DISTCRAWL_*`` name (environment or settings) that is
    no setting, with the nearest setting name."""
    for item in unknown_names(settings):
        print(f"warning: {item.message()}", file=sys.stderr)


def _guarded(execute: Execute, opts: argparse.Namespace, settings: BaseSettings) -> int:
    """*execute*, after the unknown-name warnings. Without a Redis to work on, it says so on
    stderr and exits 1; a setting that cannot be used, or a crawl the tool must not touch
    (:class:`~distcrawl.ops.context.CrawlRefused`), or a crawl name no crawl may have
    (:mod:`~distcrawl.base.identifiers`), is one error line each and exit status 2, not a
    traceback; output whose reader went away (``| head``) ends it quietly, status 0. An
    optional spider left out is the project's only one (none or several: say so, exit 2).
    """
    report_unknown(settings)
    try:
        if getattr(opts, "spider", "") is None:
            opts.spider = project_spider(settings)
        if isinstance(getattr(opts, "spider", None), str):
            check_crawl_name(opts.spider)
        return execute(opts, settings)
    except (SettingError, NoSpider, BadName) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except NoRedis as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except CrawlRefused as exc:
        for line in exc.lines:
            print(f"error: {line}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        if not reader_gone():
            raise
        return end_quietly()


def entry_points(
    module: str,
    add_command_arguments: AddArguments,
    execute: Execute,
    *,
    usage: str,
    summary: str,
    extra_args: str | None = None,
    name: str | None = None,
) -> tuple[type[ScrapyCommand], AddArguments, Callable[[argparse.Namespace], int]]:
    """``Command``, ``add_arguments`` and ``run`` of the command module named *module*.

    *usage* and *summary* are what ``scrapy <command> -h`` and ``scrapy -h`` show. Scrapy's
    parser leaves positional arguments given after an option unparsed: with *extra_args*
    (the name of a list argument) they join that list, else they are a usage error. *name*
    is the command's name, by default the last part of *module*'s.
    """
    name = name or module.rpartition(".")[2]

    # Scrapy makes a command of every ScrapyCommand subclass defined in a module under
    # COMMANDS_MODULE, named after that module: a base class there would be a command of its
    # own, so the class is made here and belongs to *module*.
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
            self.exitcode = _guarded(execute, opts, self.settings)

    Command.__module__, Command.__qualname__ = module, "Command"
    Command.__doc__ = f"``scrapy {name}``."

    def add_arguments(parser: argparse.ArgumentParser) -> None:
        add_command_arguments(parser)
        add_settings_option(parser)

    def run(args: argparse.Namespace) -> int:
        return _guarded(execute, args, load_settings(args.set))

    return Command, add_arguments, run
