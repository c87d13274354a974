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

#: sub-command name -> module with ``add_arguments(parser)`` and ``run(args) -> int``
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "demo": ("distcrawl.demo.run", "run a demo crawl of the bundled shop on embedded services"),
    "shop": ("distcrawl.demo.server", "serve the bundled demo shop on 127.0.0.1"),
    "extract": ("distcrawl.extract.cli", "show what the spider would extract from pages"),
    "profile": ("distcrawl.extract.draft", "draft a site profile from a shop's pages"),
    "status": ("distcrawl.commands.status", "show the whole cluster: queue, nodes, rates"),
    "seed": ("distcrawl.commands.seed", "validate and push seeds into the frontier"),
    "deadletters": ("distcrawl.commands.deadletters", "list, re-queue or purge dead letters"),
    "control": ("distcrawl.commands.control", "pause, resume or reset the crawl"),
    "journal": ("distcrawl.commands.journal", "show or replay a node's local journal"),
    "migrate": ("distcrawl.commands.migrate", "move a scrapy-redis crawl into the frontier"),
    "web": ("distcrawl.commands.web", "serve the live dashboard and Prometheus /metrics"),
    "services": ("distcrawl.commands.services", "start or show the embedded Redis and MongoDB"),
}


def plain_text(doc: str) -> str:
    """A module docstring as help text: reST roles and literals (``x``, :func:`x`) as plain
    text, the first paragraph and any indented layout kept."""
    text = re.sub(r":[a-z]+:`~?([^`]+)`", r"\1", doc)
    text = re.sub(r"``([^`]+)``", r"\1", text)
    text = re.sub(r"`([^`]+)`", r"\1", text)
    return text.replace("::\n", ":\n").strip()


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
    module = importlib.import_module(SUBCOMMANDS[name][0])
    cmd_parser = argparse.ArgumentParser(
        prog=f"distcrawl {name}",
        description=plain_text(module.__doc__ or ""),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    module.add_arguments(cmd_parser)
    # options may follow positional arguments (`distcrawl seed catalog --priority 5 URL`)
    args = cmd_parser.parse_intermixed_args(argv[1:])
    try:
        return int(module.run(args) or 0)
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM: every cleanup on the way out has run
        print(f"distcrawl {name}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
