"""A node's local journal (products it could not write to MongoDB) from any folder: what it
holds, and replaying it onto any MongoDB, so an operator can finish a dead node's journal.

A replay writes every segment no live node holds, to the database and collection its header
names (unless overridden), and deletes a segment once all of it is in. It never overwrites a
newer document with older data, so replaying late or twice is harmless.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pymongo.errors import PyMongoError
from pymongo.write_concern import WriteConcern

from distcrawl.base.config import SETTINGS
from distcrawl.base.urls import mask_url
from distcrawl.ops.reads import Batch, read
from distcrawl.ops.snapshot import JOURNAL_AT_FIELD, JOURNAL_LEFT_FIELD
from distcrawl.servers.embedded import ensure_mongo, resolve_home
from distcrawl.storage.journal import Journal
from distcrawl.storage.replay import ReplaySummary, replay_journal
from distcrawl.storage.writer import MongoWriter

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

    from distcrawl.frontier.keys import FrontierKeys

__all__ = ["ReplayOptions", "held", "record_replay", "replay", "replay_uri", "targets"]

#: the outcome counts of a replay, summed over its targets
COUNTS = ("replayed", "rejected", "damaged", "left")


def _segments_of(journal: Journal) -> list[Path]:
    """Every segment of *journal*'s target, live nodes' included."""
    paths = []
    for path in journal.segments():
        try:
            with open(path, encoding="utf-8") as handle:
                if json.loads(handle.readline()) == journal.header:
                    paths.append(path)
        except (OSError, ValueError):
            continue
    return paths


def targets(directory: Path) -> list[tuple[str, str]]:
    """The ``(database, collection)`` pairs the journal's segments in *directory* are for."""
    return Journal.targets(directory)


def held(directory: Path) -> list[dict[str, Any]]:
    """Per target collection: the segments and products the journal holds (those no live
    node holds), and the segments live nodes hold."""
    rows = []
    for database, collection in targets(directory):
        journal = Journal(directory, database=database, collection=collection)
        segments, products = journal.held()
        rows.append(
            {
                "journal": f"{database}.{collection}",
                "segments": segments,
                "products": products,
                "held_by_live_nodes": len(_segments_of(journal)) - segments,
            }
        )
    return rows


def replay_uri(settings: BaseSettings, given: str | None) -> str:
    """The MongoDB to replay onto: *given*, else ``MONGO_URI``, else this machine's embedded
    MongoDB (started if it does not run) unless ``DISTCRAWL_EMBEDDED`` is off; else ""."""
    uri = given or SETTINGS.value(settings, "MONGO_URI")
    if not uri and SETTINGS.value(settings, "DISTCRAWL_EMBEDDED"):
        uri = ensure_mongo(resolve_home(SETTINGS.value(settings, "DISTCRAWL_HOME") or None))
    return str(uri)


class ReplayOptions:
    """How products are written, as the nodes' pipeline writes them (its settings)."""

    def __init__(self, settings: BaseSettings, batch_size: int | None = None) -> None:
        self.batch_size: int = batch_size or SETTINGS.value(settings, "MONGO_BATCH_SIZE")
        self.history: int = SETTINGS.value(settings, "MONGO_PRICE_HISTORY")
        self.timeout: float = SETTINGS.value(settings, "MONGO_TIMEOUT")
        self.write_concern: dict[str, Any] = SETTINGS.value(settings, "MONGO_WRITE_CONCERN")
        self.changes: str | None = SETTINGS.value(settings, "MONGO_CHANGES_COLLECTION") or None


def _replay_one(
    journal: Journal,
    uri: str,
    onto: tuple[str, str],
    options: ReplayOptions,
    progress: Callable[[str, ReplaySummary, int, int], None] | None,
    refused: Callable[[str], None] | None,
) -> dict[str, Any]:
    source = f"{journal.header['database']}.{journal.header['collection']}"
    segments, products = journal.held()
    result: dict[str, Any] = {
        "journal": source,
        "onto": f"{onto[0]}.{onto[1]}",
        "segments": segments,
        "products": products,
        "held_by_live_nodes": len(_segments_of(journal)) - segments,
    }
    writer = MongoWriter(
        uri=uri,
        database=onto[0],
        collection=onto[1],
        history=options.history,
        write_concern=WriteConcern(**options.write_concern),
        timeout=options.timeout,
        changes=options.changes,
    )

    def step(summary: ReplaySummary) -> None:
        if progress is not None:
            progress(source, summary, products, segments)

    summary = ReplaySummary()
    try:
        writer.ensure_collection()
        summary = replay_journal(journal, writer, batch_size=options.batch_size, progress=step)
    except PyMongoError as exc:
        result["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
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
        if refused is not None:
            refused(message)
    return result


def replay(
    directory: Path,
    uri: str,
    options: ReplayOptions,
    *,
    database: str | None = None,
    collection: str | None = None,
    progress: Callable[[str, ReplaySummary, int, int], None] | None = None,
    refused: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Replay every target of the journal in *directory* onto *uri* (into *database* and
    *collection* when given, else the segment's own). *progress* hears ``(journal, summary so
    far, products, segments)``; *refused* each product MongoDB refused. The outcome has one
    entry per target (an ``error`` when MongoDB failed) and the counts summed."""
    outcome: dict[str, Any] = {
        "directory": str(directory),
        "mongo_uri": mask_url(uri),
        "targets": [],
        **dict.fromkeys(COUNTS, 0),
    }
    for db, coll in targets(directory):
        journal = Journal(directory, database=db, collection=coll)
        onto = (database or db, collection or coll)
        result = _replay_one(journal, uri, onto, options, progress, refused)
        outcome["targets"].append(result)
        for key in COUNTS:
            outcome[key] += result[key]
    return outcome


#: stopped and recovered nodes looked at by :func:`record_replay` (newest first)
_MAX_GONE = 100


def record_replay(
    client: Any, keys: FrontierKeys, directory: Path, *, heartbeat_timeout: float
) -> list[str]:
    """Tell the crawl what a replay left in *directory*: every node of this host whose journal
    it is and that no longer heart-beats gets the products left there, so that ``status`` (the
    ``journal`` column), the dashboard and ``/metrics`` stop showing the ones replayed. A live
    node reports its own. Returns the nodes told; a bounded number of commands."""
    left = sum(row["products"] for row in held(directory))
    path, host = str(directory.resolve()), socket.gethostname()
    batch = Batch()
    batch.add("nodes", "zrange", keys.nodes, 0, -1, withscores=True)
    batch.add("gone", "zrevrange", keys.gone, 0, _MAX_GONE - 1)
    got = read(client, Batch.clock(keys.prefix))
    seconds, micros = got["time"]
    now_ms = int(seconds) * 1000 + int(micros) // 1000
    got = read(client, batch)
    live_since = now_ms - int(heartbeat_timeout * 1000)
    live = {_text(n) for n, beat in got["nodes"] if float(beat) >= live_since}
    names = [n for n in dict.fromkeys([*(_text(n) for n, _ in got["nodes"]),
                                       *map(_text, got["gone"])]) if n not in live]  # fmt: skip
    batch = Batch()
    for name in names:
        batch.add(name, "hget", keys.node(name), "info")
    infos = read(client, batch) if names else {}
    told = []
    for name in names:
        try:
            info = json.loads(infos[name] or "{}")
        except ValueError:
            continue
        if isinstance(info, dict) and info.get("journal") == path and info.get("host") == host:
            told.append(name)
    for name in told:
        client.hset(keys.node(name), mapping={JOURNAL_LEFT_FIELD: left, JOURNAL_AT_FIELD: now_ms})
    return told


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
