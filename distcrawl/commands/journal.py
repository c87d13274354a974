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

from pymongo.errors import PyMongoError
from pymongo.write_concern import WriteConcern

from distcrawl.base.config import SETTINGS
from distcrawl.base.urls import mask_url
from distcrawl.commands._common import entry_points
from distcrawl.servers.embedded import ensure_mongo, resolve_home
from distcrawl.storage.journal import Journal
from distcrawl.storage.replay import ReplaySummary, replay_journal
from distcrawl.storage.writer import MongoWriter

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

__all__ = ["Command", "add_arguments", "execute", "run"]

#: seconds between two progress lines
_PROGRESS_EVERY = 1.0


def add_command_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=("show", "replay"), help="what to do")
    parser.add_argument("directory", type=Path, metavar="DIR", help="the journal directory")
    parser.add_argument(
        "--mongo-uri", default=None, metavar="URI", help="MongoDB to replay onto (MONGO_URI)"
    )
    parser.add_argument("--database", default=None, help="database (default: the segment's)")
    parser.add_argument("--collection", default=None, help="collection (default: the segment's)")
    parser.add_argument("--batch-size", type=int, default=None, help="products per bulk write")
    parser.add_argument("--json", action="store_true", help="print the outcome as one JSON object")


def execute(opts: argparse.Namespace, settings: BaseSettings) -> int:
    directory: Path = opts.directory
    if not directory.is_dir():
        print(f"error: {directory} is not a directory", file=sys.stderr)
        return 2
    targets = Journal.targets(directory)
    if opts.action == "show":
        return _show(directory, targets, opts.json)
    if not targets:
        _report(opts.json, {"directory": str(directory), "targets": [], "replayed": 0, "left": 0})
        return 0
    uri = opts.mongo_uri or SETTINGS.value(settings, "MONGO_URI")
    if not uri and SETTINGS.value(settings, "DISTCRAWL_EMBEDDED"):
        uri = ensure_mongo(resolve_home(SETTINGS.value(settings, "DISTCRAWL_HOME") or None))
    if not uri:
        print("error: no MongoDB: give --mongo-uri or set MONGO_URI", file=sys.stderr)
        return 2
    batch_size = opts.batch_size or SETTINGS.value(settings, "MONGO_BATCH_SIZE")
    outcome: dict[str, Any] = {
        "directory": str(directory),
        "mongo_uri": mask_url(uri),
        "targets": [],
        "replayed": 0,
        "rejected": 0,
        "damaged": 0,
        "left": 0,
    }
    status = 0
    for database, collection in targets:
        journal = Journal(directory, database=database, collection=collection)
        onto = (opts.database or database, opts.collection or collection)
        result = _replay(journal, uri, onto, batch_size, settings)
        outcome["targets"].append(result)
        for key in ("replayed", "rejected", "damaged", "left"):
            outcome[key] += result[key]
        if result["left"] or result["rejected"] or result.get("error"):
            status = 1
    _report(opts.json, outcome)
    return status


def _replay(
    journal: Journal,
    uri: str,
    onto: tuple[str, str],
    batch_size: int,
    settings: BaseSettings,
) -> dict[str, Any]:
    source = f"{journal.header['database']}.{journal.header['collection']}"
    segments, products = journal.held()
    result: dict[str, Any] = {
        "journal": source,
        "onto": f"{onto[0]}.{onto[1]}",
        "segments": segments,
        "products": products,
        "held_by_live_nodes": len(_target_segments(journal)) - segments,
    }
    writer = MongoWriter(
        uri=uri,
        database=onto[0],
        collection=onto[1],
        history=SETTINGS.value(settings, "MONGO_PRICE_HISTORY"),
        write_concern=WriteConcern(**SETTINGS.value(settings, "MONGO_WRITE_CONCERN")),
        timeout=SETTINGS.value(settings, "MONGO_TIMEOUT"),
        changes=SETTINGS.value(settings, "MONGO_CHANGES_COLLECTION") or None,
    )
    last = [0.0]

    def progress(summary: ReplaySummary) -> None:
        now = time.monotonic()
        if now - last[0] >= _PROGRESS_EVERY:
            last[0] = now
            print(
                f"{source}: {summary.replayed}/{products} products, "
                f"{summary.segments}/{segments} segments",
                file=sys.stderr,
                flush=True,
            )

    summary = ReplaySummary()
    try:
        writer.ensure_collection()
        summary = replay_journal(journal, writer, batch_size=batch_size, progress=progress)
    except PyMongoError as exc:
        result["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
        print(f"error: MongoDB at {mask_url(uri)}: {result['error']}", file=sys.stderr)
    finally:
        writer.close()
    result.update(
        replayed=summary.replayed,
        rejected=summary.rejected,
        damaged=summary.damaged,
        segments_done=summary.segments,
        left=journal.held()[1],
    )
    for message in summary.messages or ():
        print(f"refused by MongoDB: {message}", file=sys.stderr)
    return result


def _target_segments(journal: Journal) -> list[Path]:
    paths = []
    for path in journal.segments():
        try:
            with open(path, encoding="utf-8") as handle:
                if json.loads(handle.readline()) == journal.header:
                    paths.append(path)
        except (OSError, ValueError):
            continue
    return paths


def _show(directory: Path, targets: list[tuple[str, str]], as_json: bool) -> int:
    rows = []
    for database, collection in targets:
        journal = Journal(directory, database=database, collection=collection)
        segments, products = journal.held()
        rows.append(
            {
                "journal": f"{database}.{collection}",
                "segments": segments,
                "products": products,
                "held_by_live_nodes": len(_target_segments(journal)) - segments,
            }
        )
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


Command, add_arguments, run = entry_points(
    __name__,
    add_command_arguments,
    execute,
    usage="show|replay DIR [--mongo-uri URI] [--database D] [--collection C] [--json]",
    summary="Show or replay a local journal of products onto MongoDB",
)
