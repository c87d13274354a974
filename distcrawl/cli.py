"""distcrawl: Scrapy nodes sharing one crawl frontier in Redis, storing products in MongoDB.

status, seed, deadletters and control are also Scrapy commands (scrapy status catalog, ...),
with the same options. "distcrawl COMMAND --help" explains each command.
"""

from __future__ import annotations

import argparse
import importlib
import re
import sys
from collections.abc import Sequence
from types import ModuleType

from distcrawl.base.names import commands as words
from distcrawl.base.names import vocabulary
from distcrawl.base.pipes import end_quietly, reader_gone

#: sub-command name -> module with ``add_arguments(parser)`` and ``run(args) -> int``
MODULES: dict[str, str] = {
    words.DEMO: "distcrawl.demo.run",
    words.SHOP: "distcrawl.demo.server",
    words.EXTRACT: "distcrawl.extract.cli",
    words.PROFILE: "distcrawl.extract.draft",
    words.STATUS: "distcrawl.commands.status",
    words.SEED: "distcrawl.commands.seed",
    words.DEADLETTERS: "distcrawl.commands.deadletters",
    words.CONTROL: "distcrawl.commands.control",
    words.JOURNAL: "distcrawl.commands.journal",
    words.MIGRATE: "distcrawl.commands.migrate",
    # the dashboard's command lives with the dashboard (the CLI and the web never meet)
    words.WEB: "distcrawl.web.command",
    words.SERVICES: "distcrawl.commands.services",
    words.ERRORS: "distcrawl.commands.errors",
    words.REPORT: "distcrawl.commands.report",
}
#: sub-command name -> (module, one line of help from the vocabulary)
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    term.name: (MODULES[term.name], term.meaning)
    for term in vocabulary(words.COMMAND)
    if term.name in MODULES
}


def plain_text(doc: str) -> str:
    """A module docstring as help text: reST roles and literals (``x``, :func:`x`) as plain
    text, the first paragraph and any indented layout kept."""
    text = re.sub(r":[a-z]+:`~?([^`]+)`", r"\1", doc)
    text = re.sub(r"``([^`]+)``", r"\1", text)
    text = re.sub(r"`([^`]+)`", r"\1", text)
    return text.replace("::\n", ":\n").strip()


def command_parser(name: str) -> tuple[ModuleType, argparse.ArgumentParser]:
    """The module of the sub-command *name* and its argument parser."""
    module = importlib.import_module(SUBCOMMANDS[name][0])
    parser = argparse.ArgumentParser(
        prog=f"distcrawl {name}",
        description=plain_text(module.__doc__ or ""),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    module.add_arguments(parser)
    return module, parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog="distcrawl", description=plain_text(__doc__ or ""))
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (_, help_text) in SUBCOMMANDS.items():
        sub.add_parser(name, help=help_text, add_help=False)
    if not argv or argv[0] in ("-h", "--help") or argv[0] not in SUBCOMMANDS:
        parser.print_help()
        return 0 if not argv or argv[0] in ("-h", "--help") else 2
    name = argv[0]
    module, cmd_parser = command_parser(name)
    # options may follow positional arguments (`distcrawl seed catalog --priority 5 URL`)
    args = cmd_parser.parse_intermixed_args(argv[1:])
    try:
        return int(module.run(args) or 0)
    except BrokenPipeError:
        if not reader_gone():
            raise
        return end_quietly()  # its reader had enough (`| head`), as `git log | head`
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM: every cleanup on the way out has run
        print(f"distcrawl {name}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
