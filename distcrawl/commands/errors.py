"""``errors``: the crawl's failures grouped by site, kind and message template, and the snapshot
of each group's first occurrence.

``distcrawl errors [SPIDER] [--site S] [--json]`` lists the groups, the most failures first
(``list`` is the default action); ``distcrawl errors [SPIDER] show GROUP`` prints one group and
its first occurrence: URL, status, headers, the error's text and the first part of the body
(``--body FILE`` writes the body to FILE instead). GROUP is a group's id or the start of it.
The snapshot is read from MongoDB (``MONGO_URI``, or the embedded server of
``DISTCRAWL_HOME``); the groups from Redis.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import redis
from pymongo.errors import PyMongoError
from rich.text import Text

from distcrawl.base.names import commands as words
from distcrawl.base.urls import printable
from distcrawl.commands._common import redis_error, warn_if_no_crawl
from distcrawl.commands._tables import Column, console, fit_table
from distcrawl.ops import errors
from distcrawl.ops.context import Context, project_spider
from distcrawl.ops.entry import DEFAULT_SPIDER, entry_points
from distcrawl.ops.report import observe_store

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

    from distcrawl.frontier.protocol.observe import ErrorGroup

__all__ = ["Command", "add_arguments", "execute", "run"]

_LIST_COLUMNS = (
    Column("group", cap=16),
    Column("kind"),
    Column("site", shrink="middle", least=12, drop=3),
    Column("failures", justify="right"),
    Column("first (UTC)", drop=2),
    Column("last (UTC)", drop=1),
    Column("snapshot", drop=4),
    Column("template", shrink="end", least=24, give=1),
)


def add_command_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "words",
        nargs="*",
        metavar="[SPIDER] [list | show GROUP]",
        help=f"the crawl: its spider name (e.g. {DEFAULT_SPIDER}; default: the project's only "
        "spider); list (the default): every group; show GROUP: one group and its first "
        "occurrence (GROUP: its id, or the first digits of it)",
    )
    parser.add_argument(
        "--site", action="append", default=[], help="list: only this site (host); repeatable"
    )
    parser.add_argument(
        "--body", metavar="FILE", help="show: write the snapshot's body to FILE, not the screen"
    )
    parser.add_argument("--json", action="store_true", help="print JSON")


def _when(ms: int) -> str:
    if not ms:
        return "-"
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC).strftime("%m-%d %H:%M:%S")


def _show_list(found: dict[str, Any]) -> None:
    rows = [
        [
            g["id"],
            g["kind"],
            Text(g["site"] or "(any)"),
            str(g["count"]),
            _when(g["first_seen_ms"]),
            _when(g["last_seen_ms"]),
            "kept" if g["snapshot"] else "-",
            Text(printable(g["template"], 500)),
        ]
        for g in found["groups"]
    ]
    out = console()
    out.print(fit_table(_LIST_COLUMNS, rows, out.width))
    failures = sum(g["count"] for g in found["groups"])
    out.print(
        f"{len(rows)} error groups, {failures} failures (a group's first occurrence: "
        f"`{words.SHOW_ERROR_GROUP.line(spider=found['crawl'])}`)"
    )
    if found["mongo_error"]:
        out.print(Text(f"snapshots not read: {found['mongo_error']}"))


def _show_group(group: ErrorGroup, snapshot: errors.Snapshot | None, body: str | None) -> None:
    lines = [
        f"group     {group.id}",
        f"site      {group.site or '(any)'}",
        f"kind      {group.kind}",
        f"template  {printable(group.template, 500)}",
        f"failures  {group.count}  first {_when(group.first_ms)}  last {_when(group.last_ms)} UTC",
    ]
    lines += [f"sample    {printable(url, 2000)}" for url in group.samples]
    if snapshot is None:
        why = "none kept (DISTCRAWL_SNAPSHOTS_MAX reached, or MongoDB was away)"
        if group.snapshot_node:
            why = f"not found in MongoDB (node {group.snapshot_node} was to store it)"
        lines.append(f"first occurrence: {why}")
        print("\n".join(lines))
        return
    status = "-" if snapshot.status is None else str(snapshot.status)
    lines += [
        "",
        f"first occurrence  {snapshot.at}  on node {snapshot.node}",
        f"url       {printable(snapshot.url, 2000)}",
        f"status    {status}",
    ]
    lines += [f"header    {printable(k, 200)}: {printable(v, 1000)}" for k, v in snapshot.headers]
    if snapshot.error:
        lines += ["error", *(printable(line, 1000) for line in snapshot.error.splitlines())]
    kept = f"{len(snapshot.body)} of {snapshot.body_bytes} bytes"
    if body is not None:
        Path(body).write_bytes(snapshot.body)
        lines.append(f"body      {kept} written to {body}")
        print("\n".join(lines))
        return
    lines.append(f"body      {kept}{' (cut)' if snapshot.truncated else ''}:")
    print("\n".join(lines))
    text = snapshot.text()
    # the crawled page's text, its control characters escaped (never a terminal's escapes)
    print("\n".join(printable(line, len(line) + 1) for line in text.splitlines()))


class Usage(ValueError):
    """Positional arguments that are no ``[SPIDER] [list | show GROUP]``."""


def read_words(given: list[str]) -> tuple[str | None, str, str | None]:
    """(spider, action, group) of ``[SPIDER] [list | show GROUP]``: a first word that is an
    action names no spider (the project's only one is meant)."""
    rest = list(given)
    spider = None
    if rest and rest[0] not in words.ERRORS_ACTIONS:
        spider = rest.pop(0)
    action = rest.pop(0) if rest else words.LIST
    if action not in words.ERRORS_ACTIONS:
        raise Usage(f"{action!r} is no action: {' or '.join(words.ERRORS_ACTIONS)}")
    group = rest.pop(0) if rest else None
    if action == words.SHOW and group is None:
        raise Usage(f"show needs the group's id: {words.SHOW_ERROR_GROUP.line(spider='SPIDER')}")
    if rest or (action == words.LIST and group is not None):
        raise Usage(f"unexpected arguments: {' '.join(rest or [str(group)])}")
    return spider, action, group


def execute(opts: argparse.Namespace, settings: BaseSettings) -> int:
    try:
        spider, action, group_id = read_words(opts.words)
    except Usage as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    ctx = Context(settings, spider or project_spider(settings))
    client = ctx.client()
    mongo = observe_store(settings)
    try:
        warn_if_no_crawl(ctx, client)
        if action == words.LIST:
            found = errors.list_groups(client, ctx.keys, mongo=mongo, sites=opts.site)
            if opts.json:
                print(json.dumps(found))
            else:
                _show_list(found)
            return 0
        try:
            group, snapshot = errors.find_group(client, ctx.keys, str(group_id), mongo=mongo)
        except (errors.GroupNotFound, errors.AmbiguousGroup) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        if opts.json:
            shown = {**group.as_dict(), "snapshot": snapshot.as_dict() if snapshot else None}
            if opts.body and snapshot is not None:
                Path(opts.body).write_bytes(snapshot.body)
                del shown["snapshot"]["body"]
            print(json.dumps(shown))
        else:
            _show_group(group, snapshot, opts.body)
    except (redis.RedisError, OSError) as exc:
        return redis_error(ctx.redis_url, exc, "cannot read ")
    except PyMongoError as exc:
        print(f"error: MongoDB: {exc}", file=sys.stderr)
        return 1
    finally:
        client.close()
        if mongo is not None:
            mongo.close()
    return 0


Command, add_arguments, run = entry_points(
    __name__,
    add_command_arguments,
    execute,
    usage="[SPIDER] [list | show GROUP] [--site S] [--json] [--body FILE]",
    summary="List the crawl's error groups, or show one's first occurrence",
)
