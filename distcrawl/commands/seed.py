"""``seed``: check seeds as the nodes will, push the good ones to ``<spider>:start_urls`` and say
why each refused one was refused.

``scrapy seed catalog URL... [--priority P] [--meta JSON] [--file F]`` (or ``distcrawl seed``).
A seed is a URL or a JSON object ``{"url", "priority", "meta"}``; ``--priority`` / ``--meta``
turn plain URLs into JSON seeds and fill the keys a JSON seed leaves out. The check is
:func:`distcrawl.node.seeds.parse.parse_seed`, with ``DISTCRAWL_ALLOW_PRIVATE`` as the nodes read
it. Exit status: 0 when every seed was queued, 1 when any was refused, 2 on a usage error.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import redis

from distcrawl.commands._common import (
    add_spider_argument,
    allow_private,
    check_crawl,
    crawl_keys,
    entry_points,
    redis_client,
    redis_error,
    redis_url,
)
from distcrawl.node.seeds.parse import BadSeed, parse_seed, refusal_hint

if TYPE_CHECKING:
    from collections.abc import Iterable

    from scrapy.settings import BaseSettings

__all__ = ["Command", "add_arguments", "execute", "prepare", "run"]

#: seeds pushed per LPUSH
_PUSH_BATCH = 1000


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


def prepare(raw: str, priority: int | None, meta: dict[str, Any] | None) -> str:
    """The seed to push: *raw* as given, or a JSON seed carrying *priority* and *meta*."""
    raw = raw.strip()
    if priority is None and meta is None:
        return raw
    extra: dict[str, Any] = {}
    if priority is not None:
        extra["priority"] = priority
    if meta is not None:
        extra["meta"] = meta
    if raw.startswith("{"):
        try:
            data = json.loads(raw)
        except ValueError:
            return raw  # parse_seed says why
        if not isinstance(data, dict):
            return raw
        return json.dumps({**extra, **data}, separators=(",", ":"))
    return json.dumps({"url": raw, **extra}, separators=(",", ":"))


def check(
    seeds: Iterable[tuple[str, str]], *, allow: bool | frozenset[str]
) -> tuple[list[str], list[dict[str, str]]]:
    """Split ``(as given, as pushed)`` seeds into the accepted ones (as pushed) and refusals
    ``{seed (as given), reason, error}``."""
    accepted: list[str] = []
    refused: list[dict[str, str]] = []
    for given, raw in seeds:
        try:
            parse_seed(raw, allow_private=allow)
        except BadSeed as exc:
            refused.append({"seed": given[:300], "reason": exc.reason, "error": str(exc)})
            continue
        accepted.append(raw)
    return accepted, refused


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
    keys = crawl_keys(settings, opts.spider)
    accepted, refused = check(
        ((r, prepare(r, opts.priority, meta)) for r in raws), allow=allow_private(settings)
    )
    for refusal in refused:
        hint = refusal_hint(refusal["reason"])
        print(f"refused {refusal['seed']!r}: {refusal['reason']}{hint}", file=sys.stderr)
    if accepted and not opts.dry_run:
        client = redis_client(settings)
        try:
            check_crawl(client, keys)
            for i in range(0, len(accepted), _PUSH_BATCH):
                # LPUSH in order: the nodes take from the other end, so the first seed goes first
                client.lpush(keys.start_urls, *accepted[i : i + _PUSH_BATCH])
        except (redis.RedisError, OSError) as exc:
            return redis_error(redis_url(settings), exc, "cannot push to ")
        finally:
            client.close()
    verb = "would queue" if opts.dry_run else "queued"
    if opts.json:
        outcome = {"key": keys.start_urls, "queued": 0 if opts.dry_run else len(accepted)}
        print(json.dumps({**outcome, "accepted": accepted, "refused": refused}))
    else:
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
