"""``journal``: show or replay a local journal (products a node could not write to MongoDB),
from any folder onto any MongoDB, so an operator can finish a dead node's journal.

``distcrawl journal show DIR`` (or ``scrapy journal show DIR``): segments and products per
target collection. ``distcrawl journal replay DIR [--mongo-uri URI] [--database D]
[--collection C]``: every segment no live node holds, written to MongoDB (to the database
and collection its header names, unless overridden), with progress on stderr and a summary;
a segment is deleted once all of it is in. Replays never overwrite a newer document with
older data, so replaying late or twice is harmless. Exit status: 0 when every product is in
MongoDB, 1 when some are left (MongoDB failed) or were refused, 2 on a usage error.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import redis

from distcrawl.base.names import commands as words
from distcrawl.ops import journal
from distcrawl.ops.context import Context, NoRedis, NoSpider, project_spider
from distcrawl.ops.entry import entry_points

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

    from distcrawl.storage.replay import ReplaySummary

__all__ = ["Command", "add_arguments", "execute", "run"]

#: seconds between two progress lines
_PROGRESS_EVERY = 1.0


def add_command_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=words.JOURNAL_ACTIONS, help="what to do")
    parser.add_argument("directory", type=Path, metavar="DIR", help="the journal directory")
    parser.add_argument(
        "--mongo-uri", default=None, metavar="URI", help="MongoDB to replay onto (MONGO_URI)"
    )
    parser.add_argument("--database", default=None, help="database (default: the segment's)")
    parser.add_argument("--collection", default=None, help="collection (default: the segment's)")
    parser.add_argument("--batch-size", type=int, default=None, help="products per bulk write")
    parser.add_argument(
        "--spider",
        default=None,
        help="replay: the crawl to tell what was replayed, so that status shows it (default: "
        "the project's only spider)",
    )
    parser.add_argument("--json", action="store_true", help="print the outcome as one JSON object")


class _Progress:
    """A progress line on stderr at most every :data:`_PROGRESS_EVERY` seconds."""

    def __init__(self) -> None:
        self.last = 0.0

    def __call__(self, source: str, summary: ReplaySummary, products: int, segments: int) -> None:
        now = time.monotonic()
        if now - self.last >= _PROGRESS_EVERY:
            self.last = now
            print(
                f"{source}: {summary.replayed}/{products} products, "
                f"{summary.segments}/{segments} segments",
                file=sys.stderr,
                flush=True,
            )


def _refused(message: str) -> None:
    print(f"refused by MongoDB: {message}", file=sys.stderr)


#: what a missing journal folder means, and when a node writes one
NO_JOURNAL = (
    "no journal: a node writes one only while MongoDB is unreachable (after "
    "MONGO_JOURNAL_AFTER seconds of outage, or once more than MONGO_BUFFER_MAX_ITEMS products "
    "wait), into MONGO_JOURNAL_PATH (by default <DISTCRAWL_HOME>/journal/<database>.<collection>)"
)


def execute(opts: argparse.Namespace, settings: BaseSettings) -> int:
    directory: Path = opts.directory
    if not directory.exists():
        # nothing was ever journaled there: nothing to show or replay, which is no error
        if opts.json:
            print(json.dumps({"directory": str(directory), "targets": [], "journal": False}))
        else:
            print(f"{directory}: {NO_JOURNAL}")
        return 0
    if not directory.is_dir():
        print(f"error: {directory} is a file, not a journal folder", file=sys.stderr)
        return 2
    if opts.action == words.SHOW:
        return _show(directory, journal.held(directory), opts.json)
    if not journal.targets(directory):
        _report(opts.json, {"directory": str(directory), "targets": [], "replayed": 0, "left": 0})
        return 0
    uri = journal.replay_uri(settings, opts.mongo_uri)
    if not uri:
        print("error: no MongoDB: give --mongo-uri or set MONGO_URI", file=sys.stderr)
        return 2
    outcome = journal.replay(
        directory,
        uri,
        journal.ReplayOptions(settings, opts.batch_size),
        database=opts.database,
        collection=opts.collection,
        progress=_Progress(),
        refused=_refused,
    )
    status = 0
    for target in outcome["targets"]:
        if target.get("error"):
            print(f"error: MongoDB at {outcome['mongo_uri']}: {target['error']}", file=sys.stderr)
        if target["left"] or target["rejected"] or target.get("error"):
            status = 1
    outcome["told"] = _tell_the_crawl(settings, opts.spider, directory)
    _report(opts.json, outcome)
    return status


def _tell_the_crawl(settings: BaseSettings, spider: str | None, directory: Path) -> list[str]:
    """The stopped nodes of this host whose journal *directory* is learn what the replay left
    there, in the crawl's Redis (when there is one to tell): ``status`` shows it."""
    try:
        ctx = Context(settings, spider or project_spider(settings))
        client = ctx.client(timeout=10)
    except (NoRedis, NoSpider):
        return []  # no crawl here to tell: status, wherever it runs, reads the nodes' figures
    try:
        return journal.record_replay(
            client, ctx.keys, directory, heartbeat_timeout=ctx.heartbeat_timeout
        )
    except (redis.RedisError, OSError) as exc:
        print(f"warning: could not tell {ctx.masked_url} what was replayed: {exc}", file=sys.stderr)
        return []
    finally:
        client.close()


def _show(directory: Path, rows: list[dict[str, Any]], as_json: bool) -> int:
    if as_json:
        print(json.dumps({"directory": str(directory), "targets": rows}))
        return 0
    if not rows:
        print(f"{directory}: no journal segments")
    for row in rows:
        print(
            f"{directory}: {row['products']} products in {row['segments']} segments for "
            f"{row['journal']}"
            + (
                f" ({row['held_by_live_nodes']} more held by live nodes)"
                if row["held_by_live_nodes"]
                else ""
            )
        )
    return 0


def _report(as_json: bool, outcome: dict[str, Any]) -> None:
    if as_json:
        print(json.dumps(outcome))
        return
    for target in outcome["targets"]:
        line = (
            f"{target['journal']} -> {target['onto']}: replayed {target['replayed']} products "
            f"from {target['segments_done']} segments"
        )
        extras = [
            f"{target[k]} {label}"
            for k, label in (
                ("rejected", "refused by MongoDB"),
                ("damaged", "damaged lines skipped"),
                ("left", "products left"),
                ("held_by_live_nodes", "segments held by live nodes, skipped"),
            )
            if target.get(k)
        ]
        print(line + (f" ({', '.join(extras)})" if extras else ""))
    print(
        f"replayed {outcome['replayed']} products from {outcome['directory']}"
        + (f" onto {outcome['mongo_uri']}" if outcome.get("mongo_uri") else "")
        + (f"; {outcome['left']} products left" if outcome.get("left") else "")
    )
    if outcome.get("told"):
        print(f"status now shows what is left for node(s) {', '.join(outcome['told'])}")


Command, add_arguments, run = entry_points(
    __name__,
    add_command_arguments,
    execute,
    usage="show|replay DIR [--mongo-uri URI] [--database D] [--collection C] [--json]",
    summary="Show or replay a local journal of products onto MongoDB",
)
