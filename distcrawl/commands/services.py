"""``distcrawl services``: start, show or stop the embedded Redis and MongoDB by hand."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from typing import Any

from distcrawl.base.names import commands as words
from distcrawl.base.names.commands import START_SERVICES
from distcrawl.base.urls import mask_url
from distcrawl.servers.embedded import (
    DEFAULT_HOME,
    HOME_ENV,
    ensure_mongo,
    ensure_redis,
    resolve_home,
    services_status,
    stop_services,
)
from distcrawl.servers.process import ServiceError

__all__ = ["add_arguments", "run"]


CLI_DESCRIPTION = f"""\
The embedded Redis and MongoDB of one machine, kept under one home folder
(DISTCRAWL_HOME, default ./.distcrawl). Nodes without REDIS_URL / MONGO_URI start
or reuse them on their own; these commands start, show or stop them by hand.

  start   start both servers (or reuse running ones) and print, as shell lines,
          export REDIS_URL=... and export MONGO_URI=... for this machine:
          eval "$({START_SERVICES.line()})" points the current shell at them
  status  show both servers; exit status 1 unless both answer
  stop    stop both servers (their data stays in the home folder)
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = CLI_DESCRIPTION
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("action", choices=words.SERVICES_ACTIONS, help="start | status | stop")
    parser.add_argument(
        "--home",
        default=None,
        help=f"state directory (default: ${HOME_ENV}, else ./{DEFAULT_HOME})",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def run(args: argparse.Namespace) -> int:
    """``start`` starts (or reuses) both servers and prints their URLs; ``stop`` stops them;
    ``status`` shows them and exits 1 unless both answer."""
    home = resolve_home(args.home)
    result: dict[str, Any] = {"home": str(home)}
    try:
        if args.action == words.START:
            result["redis_url"] = ensure_redis(home)
            result["mongo_uri"] = ensure_mongo(home)
        elif args.action == words.STOP:
            result["stopped"] = stop_services(home)
        else:
            result.update(services_status(home))
    except ServiceError as exc:
        result["error"] = str(exc)
    if args.json:
        print(json.dumps(result))
    elif "error" in result:
        print(f"error: {result['error']}", file=sys.stderr)
    elif args.action == words.START:
        # shell lines: `eval "$(distcrawl services start)"` points this shell at the servers
        print(f"export REDIS_URL={shlex.quote(result['redis_url'])}")
        print(f"export MONGO_URI={shlex.quote(result['mongo_uri'])}")
    elif args.action == words.STOP:
        print(f"stopped: {', '.join(result['stopped']) or 'nothing was running'} ({home})")
    else:
        print(f"home: {home}")
        for name in ("redis", "mongo"):
            info = result[name]
            state = "running" if info["running"] else "stopped"
            url = mask_url(info["url"]) if info["url"] else "-"
            print(f"{name:6} {state:8} pid {info['pid'] or '-'}  {url}")
    if "error" in result:
        return 1
    if args.action == words.STATUS:
        return 0 if all(result[name]["running"] for name in ("redis", "mongo")) else 1
    return 0
