"""``deadletters``: see, count, re-queue and purge the requests whose last try failed.

``scrapy deadletters catalog list|count|requeue|purge [--site S] [--reason R] [--json]``;
``refused`` lists the refused seeds and queue entries (kept in ``{catalog}:rejected``).
(or ``distcrawl deadletters``). ``--site`` (a host) and ``--reason`` (as recorded, e.g.
``http_503``) may be repeated and combine: a dead letter matches when its site is one of the
sites and its reason one of the reasons. ``requeue`` moves the matching ones back to the queue
atomically (``requeue_dead`` in ``frontier.lua``); ``purge`` deletes them and needs
``--yes-really``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from typing import TYPE_CHECKING, Any

import redis
from rich.console import Console
from rich.table import Table

from distcrawl.commands._common import (
    add_spider_argument,
    check_crawl,
    crawl_keys,
    entry_points,
    redis_client,
    redis_error,
    redis_url,
    warn_if_no_crawl,
)
from distcrawl.frontier.store import FrontierStore
from distcrawl.ops.status import record_site

if TYPE_CHECKING:
    from collections.abc import Iterator

    from scrapy.settings import BaseSettings

    from distcrawl.frontier.store import FrontierKeys

__all__ = ["Command", "add_arguments", "count", "execute", "matching", "purge", "requeue", "run"]

ACTIONS = ("list", "count", "requeue", "purge", "refused")
#: dead letters shown by ``list`` unless ``--limit`` says otherwise (0 = all)
DEFAULT_LIST_LIMIT = 50
#: dead letters moved or deleted per Redis call, so no single call blocks the server for long
_BATCH = 500


def add_command_arguments(parser: argparse.ArgumentParser) -> None:
    add_spider_argument(parser)
    parser.add_argument(
        "action",
        choices=ACTIONS,
        help="list | count | requeue | purge dead letters; refused lists the refused seeds "
        "and queue entries, kept in {SPIDER}:rejected (newest first, --limit)",
    )
    parser.add_argument(
        "--site", action="append", default=[], help="only this site (host); repeatable"
    )
    parser.add_argument(
        "--reason", action="append", default=[], help="only this reason; repeatable"
    )
    parser.add_argument(
        "--limit",
        type=int,
        default=DEFAULT_LIST_LIMIT,
        help=f"list: newest N (default {DEFAULT_LIST_LIMIT}; 0 = all)",
    )
    parser.add_argument("--yes-really", action="store_true", help="confirm a purge")
    parser.add_argument("--json", action="store_true", help="print JSON")


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _record(raw: Any) -> dict[str, Any]:
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):
        return {"reason": "unreadable_record"}
    return value if isinstance(value, dict) else {"reason": "unreadable_record"}


def matching(
    client: redis.Redis, keys: FrontierKeys, *, sites: list[str], reasons: list[str]
) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(id, record)`` of every dead letter that matches the filters (empty = any)."""
    wanted_sites = {s.lower() for s in sites}
    wanted_reasons = set(reasons)
    for dead_id, raw in _all_dead(client, keys):
        record = _record(raw)
        if wanted_sites and record_site(record).lower() not in wanted_sites:
            continue
        if wanted_reasons and str(record.get("reason")) not in wanted_reasons:
            continue
        yield _text(dead_id), record


def _all_dead(client: redis.Redis, keys: FrontierKeys) -> Iterator[tuple[Any, Any]]:
    for shard in keys.all_shards():
        yield from client.hscan_iter(shard.dead, count=1000)


def count(records: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    by_reason: dict[str, int] = {}
    by_site: dict[str, int] = {}
    for _, record in records:
        reason = str(record.get("reason") or "unknown")
        by_reason[reason] = by_reason.get(reason, 0) + 1
        site = record_site(record)
        by_site[site] = by_site.get(site, 0) + 1
    return {"total": len(records), "by_reason": _most(by_reason), "by_site": _most(by_site)}


def _most(counts: dict[str, int]) -> dict[str, int]:
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def requeue(client: redis.Redis, keys: FrontierKeys, ids: list[str]) -> int:
    """Move the dead letters *ids* back to the queue; returns how many moved."""
    store = FrontierStore(client, keys)
    moved = 0
    for i in range(0, len(ids), _BATCH):
        moved += int(store.requeue_dead(ids[i : i + _BATCH]))
    return moved


def purge(client: redis.Redis, keys: FrontierKeys, ids: list[str]) -> int:
    deleted = 0
    for i in range(0, len(ids), _BATCH):
        for shard in keys.all_shards():
            deleted += int(client.hdel(shard.dead, *ids[i : i + _BATCH]))
    return deleted


def _summary(dead_id: str, record: dict[str, Any]) -> dict[str, Any]:
    """A record without its request payload (which is long and only for re-queueing)."""
    return {"id": dead_id, **{k: v for k, v in record.items() if k != "request"}}


def _when(value: Any) -> str:
    if not isinstance(value, (int, float)):
        return "-"
    return dt.datetime.fromtimestamp(value, tz=dt.UTC).strftime("%Y-%m-%d %H:%M:%S")


def _show_list(records: list[tuple[str, dict[str, Any]]], total: int) -> None:
    table = Table(box=None, header_style="bold")
    for column in ("id", "reason", "attempts", "last attempt (UTC)", "node", "url"):
        table.add_column(column, overflow="fold" if column == "url" else "ellipsis")
    for dead_id, record in records:
        table.add_row(
            dead_id[:12],
            str(record.get("reason", "-")),
            str(record.get("attempts", "-")),
            _when(record.get("last_attempt", record.get("at"))),
            str(record.get("node", "-")),
            str(record.get("url", "-")),
        )
    console = Console()
    console.print(table)
    console.print(f"{len(records)} of {total} matching dead letters shown")


def _show_counts(counts: dict[str, Any]) -> None:
    console = Console()
    console.print(f"{counts['total']} dead letters")
    for title, key in (("by reason", "by_reason"), ("by site", "by_site")):
        table = Table(title=title, title_justify="left", box=None, show_header=False)
        table.add_column(style="cyan")
        table.add_column(justify="right")
        for name, n in counts[key].items():
            table.add_row(name, str(n))
        console.print(table)


def _show_refused(client: redis.Redis, keys: FrontierKeys, opts: argparse.Namespace) -> int:
    """The refused seeds and queue entries, newest first (the list is bounded by the nodes)."""
    total = int(client.llen(keys.rejected))
    end = opts.limit - 1 if opts.limit > 0 else -1
    entries = []
    for raw in client.lrange(keys.rejected, 0, end):
        try:
            entry = json.loads(raw)
        except ValueError:
            entry = {"raw": _text(raw), "reason": "unreadable"}
        entries.append(entry if isinstance(entry, dict) else {"raw": str(entry)})
    if opts.json:
        print(json.dumps({"total": total, "refused": entries}))
        return 0
    table = Table(box=None, header_style="bold")
    for column in ("when (UTC)", "kind", "reason", "node", "entry"):
        table.add_column(column, overflow="fold")
    for entry in entries:
        at = entry.get("at")
        when = (
            dt.datetime.fromtimestamp(float(at), tz=dt.UTC).strftime("%Y-%m-%d %H:%M:%S")
            if isinstance(at, (int, float))
            else "-"
        )
        raw = str(entry.get("raw", ""))
        table.add_row(
            when,
            str(entry.get("kind", "-")),
            str(entry.get("reason", "-")),
            str(entry.get("node", "-")),
            raw if len(raw) <= 120 else raw[:117] + "...",
        )
    console = Console()
    console.print(table)
    console.print(f"{len(entries)} of {total} refused entries shown (kept in {keys.rejected})")
    return 0


def execute(opts: argparse.Namespace, settings: BaseSettings) -> int:
    if opts.action == "purge" and not opts.yes_really:
        print("purge deletes dead letters for good: add --yes-really to confirm", file=sys.stderr)
        return 2
    keys = crawl_keys(settings, opts.spider)
    url = redis_url(settings)
    client = redis_client(settings)
    try:
        warn_if_no_crawl(client, keys, url)
        check_crawl(client, keys)
        if opts.action == "refused":
            return _show_refused(client, keys, opts)
        records = list(matching(client, keys, sites=opts.site, reasons=opts.reason))
        outcome: dict[str, Any]
        if opts.action == "list":
            records.sort(key=lambda r: -float(r[1].get("last_attempt") or r[1].get("at") or 0))
            shown = records[: opts.limit] if opts.limit > 0 else records
            if not opts.json:
                _show_list(shown, len(records))
                return 0
            outcome = {"total": len(records), "dead_letters": [_summary(*r) for r in shown]}
        elif opts.action == "count":
            outcome = count(records)
            if not opts.json:
                _show_counts(outcome)
                return 0
        elif opts.action == "requeue":
            moved = requeue(client, keys, [dead_id for dead_id, _ in records])
            outcome = {"matched": len(records), "requeued": moved}
            message = f"re-queued {moved} of {len(records)} matching dead letters"
        else:
            deleted = purge(client, keys, [dead_id for dead_id, _ in records])
            outcome = {"matched": len(records), "purged": deleted}
            message = f"purged {deleted} of {len(records)} matching dead letters"
    except (redis.RedisError, OSError) as exc:
        return redis_error(url, exc)
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
