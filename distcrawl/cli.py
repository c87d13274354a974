"""The ``distcrawl`` console script: one sub-command per module, imported only when used."""

from __future__ import annotations

import argparse
import importlib
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
    "services": ("distcrawl.services", "start or show the embedded Redis and MongoDB"),
}


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog="distcrawl", description=__doc__)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (_, help_text) in SUBCOMMANDS.items():
        sub.add_parser(name, help=help_text, add_help=False)
    if not argv or argv[0] in ("-h", "--help") or argv[0] not in SUBCOMMANDS:
        parser.print_help()
        return 0 if not argv or argv[0] in ("-h", "--help") else 2
    name = argv[0]
    module = importlib.import_module(SUBCOMMANDS[name][0])
    cmd_parser = argparse.ArgumentParser(prog=f"distcrawl {name}", description=module.__doc__)
    module.add_arguments(cmd_parser)
    # options may follow positional arguments (`distcrawl seed catalog --priority 5 URL`)
    args = cmd_parser.parse_intermixed_args(argv[1:])
    return int(module.run(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
