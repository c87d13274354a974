"""``deadletters``: see, count, re-queue and purge the requests whose last try failed.

``scrapy deadletters catalog list|count|requeue|purge [--site S] [--reason R] [--json]``
(or ``distcrawl deadletters``); ``refused`` lists the refused seeds and queue entries (kept in
``{catalog}:rejected``). ``--site`` (a host) and ``--reason`` (as ``status`` shows it, e.g.
``http_503`` or ``DownloadConnectionRefusedError``) may be repeated and combine: a dead letter
matches when its site is one of the sites and its reason one of the reasons. ``requeue``
moves the matching ones back to the queue atomically; ``purge`` deletes them and needs
``--yes-really``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from typing import TYPE_CHECKING, Any

import redis

from distcrawl.base.names import commands as words
from distcrawl.base.urls import printable
from distcrawl.commands._common import redis_error, warn_if_no_crawl
from distcrawl.commands._tables import Column, console, fit_table
from distcrawl.ops import deadletters
from distcrawl.ops.context import Context
from distcrawl.ops.entry import add_spider_argument, entry_points

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

    from distcrawl.ops.deadletters import DeadLetter, Refused, Tally

__all__ = ["Command", "add_arguments", "execute", "run"]

#: dead letters shown by ``list`` unless ``--limit`` says otherwise (0 = all)
DEFAULT_LIST_LIMIT = 50


def add_command_arguments(parser: argparse.ArgumentParser) -> None:
    add_spider_argument(parser)
    parser.add_argument(
        "action",
        choices=words.DEADLETTERS_ACTIONS,
        help="list | count | requeue | purge dead letters; refused lists the refused seeds "
        "and queue entries, kept in {SPIDER}:rejected (newest first, --limit)",
    )
    parser.add_argument(
        "--site", action="append", default=[], help="only this site (host); repeatable"
    )
    parser.add_argument(
        "--reason",
        action="append",
        default=[],
        help="only this reason, as status shows it; repeatable",
    )
    parser.add_argument(
        "--limit",
        type=int,
        default=DEFAULT_LIST_LIMIT,
        help=f"list: newest N (default {DEFAULT_LIST_LIMIT}; 0 = all)",
    )
    parser.add_argument("--yes-really", action="store_true", help="confirm a purge")
    parser.add_argument("--json", action="store_true", help="print JSON")


def _when(value: Any) -> str:
    """A time as month, day and time of day (UTC): what tells dead letters apart."""
    if not isinstance(value, (int, float)) or not value:
        return "-"
    return dt.datetime.fromtimestamp(value, tz=dt.UTC).strftime("%m-%d %H:%M:%S")


#: the columns of ``list``: a narrow screen leaves out node, then attempts; URLs are cut in
#: the middle, reasons at their end
_LIST_COLUMNS = (
    Column("id", cap=12),
    Column("reason", shrink="end", cap=32, least=16),
    Column("attempts", justify="right", drop=2),
    Column("last try (UTC)"),
    Column("node", drop=1, shrink="end", cap=24),
    Column("url", shrink="middle", least=30, give=1),
)


def _show_list(letters: list[DeadLetter], total: int) -> None:
    rows = [
        [
            letter.id,
            letter.reason,
            str(letter.record.get("attempts", "-")),
            _when(letter.when),
            str(letter.record.get("node", "-")),
            str(letter.record.get("url", "-")),
        ]
        for letter in letters
    ]
    out = console()
    out.print(fit_table(_LIST_COLUMNS, rows, out.width))
    out.print(f"{len(letters)} of {total} matching dead letters shown (full records: --json)")


def _show_counts(counts: Tally) -> None:
    out = console()
    out.print(f"{counts.total} dead letters")
    for title, pairs in (("by reason", counts.by_reason), ("by site", counts.by_site)):
        columns = (Column(title, shrink="middle", style="cyan"), Column("", justify="right"))
        rows = [[name, str(n)] for name, n in pairs.items()]
        out.print(fit_table(columns, rows, out.width))


_REFUSED_COLUMNS = (
    Column("when (UTC)"),
    Column("kind", drop=2),
    Column("reason", shrink="end", cap=32, least=16),
    Column("node", drop=1, shrink="end", cap=24),
    Column("entry", shrink="middle", least=30, give=1),
)


def _show_refused(found: Refused, where: str) -> None:
    rows = [
        [
            _when(entry["at"]),
            str(entry["kind"] or "-"),
            entry["reason"],
            str(entry["node"] or "-"),
            printable(entry["raw"], 10_000),
        ]
        for entry in found.entries
    ]
    out = console()
    out.print(fit_table(_REFUSED_COLUMNS, rows, out.width))
    out.print(
        f"{len(found.entries)} of {found.total} refused entries shown (kept in {where}; "
        "whole entries: --json)"
    )


def execute(opts: argparse.Namespace, settings: BaseSettings) -> int:
    if opts.action == words.PURGE and not opts.yes_really:
        print("purge deletes dead letters for good: add --yes-really to confirm", file=sys.stderr)
        return 2
    ctx = Context(settings, opts.spider)
    keys = ctx.keys
    client = ctx.client()
    try:
        warn_if_no_crawl(ctx, client)
        if opts.action == words.REFUSED:
            found = deadletters.refused(client, keys, opts.limit)
            if opts.json:
                print(json.dumps({"total": found.total, "refused": found.entries}))
            else:
                _show_refused(found, keys.rejected)
            return 0
        letters = deadletters.matching(client, keys, sites=opts.site, reasons=opts.reason)
        outcome: dict[str, Any]
        if opts.action == words.LIST:
            letters.sort(key=lambda letter: -letter.when)
            shown = letters[: opts.limit] if opts.limit > 0 else letters
            if not opts.json:
                _show_list(shown, len(letters))
                return 0
            outcome = {"total": len(letters), "dead_letters": [d.summary() for d in shown]}
        elif opts.action == words.COUNT:
            counts = deadletters.tally(letters)
            if not opts.json:
                _show_counts(counts)
                return 0
            outcome = {"total": counts.total, "by_reason": counts.by_reason}
            outcome["by_site"] = counts.by_site
        elif opts.action == words.REQUEUE:
            moved = deadletters.requeue(client, keys, [letter.id for letter in letters])
            outcome = {"matched": len(letters), "requeued": moved}
            message = f"re-queued {moved} of {len(letters)} matching dead letters"
        else:
            deleted = deadletters.purge(client, keys, letters)
            outcome = {"matched": len(letters), "purged": deleted}
            message = f"purged {deleted} of {len(letters)} matching dead letters"
    except (redis.RedisError, OSError) as exc:
        return redis_error(ctx.redis_url, exc)
    finally:
        client.close()
    print(json.dumps(outcome) if opts.json else message)
    return 0


Command, add_arguments, run = entry_points(
    __name__,
    add_command_arguments,
    execute,
    usage="SPIDER list|count|requeue|purge|refused [--site S] [--reason R] [--json]",
    summary="List, count, re-queue or purge dead letters",
)
