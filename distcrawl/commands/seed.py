"""``seed``: check seeds as the nodes will, push the good ones to ``<spider>:start_urls`` and say
why each refused one was refused.

``scrapy seed catalog URL... [--priority P] [--meta JSON] [--file F]`` (or ``distcrawl seed``).
A seed is a URL or a JSON object ``{"url", "priority", "meta"}``; ``--priority`` / ``--meta``
turn plain URLs into JSON seeds and fill the keys a JSON seed leaves out. The check is the
nodes' own, with ``DISTCRAWL_ALLOW_PRIVATE`` as the nodes read it. A crawl name that no spider
of the project has and no crawl in Redis has used (a misspelt name) is a warning: no node would
take the seeds. Exit status: 0 when every seed was queued, 1 when any was refused, 2 on a usage
error.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import redis

from distcrawl.commands._common import redis_error
from distcrawl.ops import seeds
from distcrawl.ops.context import Context, project_spiders
from distcrawl.ops.entry import add_spider_argument, entry_points

if TYPE_CHECKING:
    from collections.abc import Iterable

    from scrapy.settings import BaseSettings

__all__ = ["Command", "add_arguments", "execute", "run"]


def add_command_arguments(parser: argparse.ArgumentParser) -> None:
    add_spider_argument(parser)
    parser.add_argument("urls", nargs="*", metavar="URL", help="seed URLs or JSON seeds")
    parser.add_argument("--priority", type=int, default=None, help="queue priority of the seeds")
    parser.add_argument(
        "--meta", default=None, metavar="JSON", help="a JSON object: request meta of the seeds"
    )
    parser.add_argument(
        "--file",
        action="append",
        default=[],
        metavar="F",
        help="read seeds from F, one per line ('-' = stdin; blank lines and # comments skipped)",
    )
    parser.add_argument("--dry-run", action="store_true", help="check the seeds, push nothing")
    parser.add_argument("--json", action="store_true", help="print the outcome as one JSON object")


def read_lines(paths: Iterable[str]) -> list[str]:
    lines: list[str] = []
    for path in paths:
        text = sys.stdin.read() if path == "-" else Path(path).read_text("utf-8")
        lines += [s for s in (line.strip() for line in text.splitlines()) if s and s[0] != "#"]
    return lines


def _warn_if_nobody_reads(ctx: Context, client: Any, settings: BaseSettings) -> None:
    """A warning on stderr when no spider of the project has the crawl's name and no node
    ever ran that crawl (it has no record of its settings, no node in Redis): no node would
    take the seeds (a misspelt name; an empty one is refused before, as every bad crawl name
    is). Seeds pushed there before do not count. A dry run (*client* None) reads Redis
    itself, and warns on the project's spiders alone when Redis cannot be read."""
    spiders = project_spiders(settings)
    if ctx.spider in spiders:
        return
    keys = ctx.keys
    unread = ""
    if client is None:
        reader = ctx.client()
        try:
            if reader.exists(keys.config, keys.nodes, keys.gone):
                return
        except (redis.RedisError, OSError):
            unread = f" (Redis not read: {ctx.redis_url} cannot be reached)"
        finally:
            reader.close()
    elif client.exists(keys.config, keys.nodes, keys.gone):
        return  # nodes (of another project) ran this crawl: they read the list
    known = f" (its spiders: {', '.join(spiders)})" if spiders else ""
    print(
        f"warning: no spider of this project is named {ctx.spider!r}{known} and no node ever "
        f"ran a crawl of that name{unread}: no node would take seeds from {keys.start_urls}; "
        "is the name misspelt?",
        file=sys.stderr,
    )


def execute(opts: argparse.Namespace, settings: BaseSettings) -> int:
    meta = None
    if opts.meta is not None:
        try:
            meta = json.loads(opts.meta)
        except ValueError:
            meta = None
        if not isinstance(meta, dict):
            print("error: --meta must be a JSON object", file=sys.stderr)
            return 2
    try:
        raws = list(opts.urls) + read_lines(opts.file)
    except OSError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if not raws:
        print("error: no seeds given (URL arguments or --file)", file=sys.stderr)
        return 2
    ctx = Context(settings, opts.spider)
    keys = ctx.keys
    checked = seeds.check(
        ((r, seeds.prepare(r, opts.priority, meta)) for r in raws), allow=ctx.allow_private
    )
    for refusal in checked.refused:
        hint = seeds.refusal_hint(refusal["reason"])
        print(f"refused {refusal['seed']!r}: {refusal['reason']}{hint}", file=sys.stderr)
    if checked.accepted and opts.dry_run:
        _warn_if_nobody_reads(ctx, None, settings)
    if checked.accepted and not opts.dry_run:
        client = ctx.client()
        try:
            ctx.check_stored(client)
            _warn_if_nobody_reads(ctx, client, settings)
            seeds.push(client, keys, checked.accepted)
        except (redis.RedisError, OSError) as exc:
            return redis_error(ctx.redis_url, exc, "cannot push to ")
        finally:
            client.close()
    accepted, refused = checked.accepted, checked.refused
    if opts.json:
        outcome = {"key": keys.start_urls, "queued": 0 if opts.dry_run else len(accepted)}
        print(json.dumps({**outcome, "accepted": accepted, "refused": refused}))
    else:
        verb = "would queue" if opts.dry_run else "queued"
        print(f"{verb} {len(accepted)} seed(s) to {keys.start_urls}; {len(refused)} refused")
    return 1 if refused else 0


Command, add_arguments, run = entry_points(
    __name__,
    add_command_arguments,
    execute,
    usage="SPIDER URL... [--priority P] [--meta JSON] [--file F]",
    summary="Check seeds and push them to the crawl's start list",
    extra_args="urls",
)
