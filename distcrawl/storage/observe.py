"""What a crawl keeps in MongoDB about what went wrong: the snapshot of each error group's first
occurrence, the crawl reports, and each site's field coverage in its last completed crawl (what
the next crawl's findings compare with).

Collections (in the products' database): ``error_snapshots`` (``_id``: spider, run and group),
``crawl_reports`` (``_id``: spider and run) and ``site_quality`` (``_id``: spider and site).

Snapshots are written by :class:`SnapshotWriter` on a thread of its own, a few at a time, from
a bounded queue: a MongoDB that is slow or away costs the crawl nothing but the snapshots it
drops (counted), never a product and never a wait.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import queue
import threading
import time
from typing import TYPE_CHECKING, Any

import pymongo
from bson.binary import Binary
from pymongo.errors import BulkWriteError, DuplicateKeyError, PyMongoError

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = [
    "BASELINES",
    "NOTICES",
    "REPORTS",
    "SNAPSHOTS",
    "ObserveStore",
    "SnapshotWriter",
    "snapshot_document",
]

logger = logging.getLogger(__name__)

SNAPSHOTS = "error_snapshots"
REPORTS = "crawl_reports"
BASELINES = "site_quality"
#: notices claimed without Redis (a frontier outage's), by spider and event
NOTICES = "notices"
#: headers a snapshot keeps, and the characters of each value
MAX_HEADERS = 50
MAX_HEADER_VALUE = 1000
#: characters of an error text (a traceback) a snapshot keeps
MAX_ERROR_TEXT = 8000
#: snapshots waiting for the writer at most; one more is dropped
QUEUE_MAX = 200
#: snapshots written in one insert
BATCH = 20
#: a batch MongoDB fails is tried this many times, WAIT seconds apart and doubling, then dropped
TRIES = 4
WAIT = 0.5
#: duplicate key: written before (by a retried batch)
DUPLICATE_KEY = 11000


def _ids(spider: str, run: str, group: str) -> str:
    return f"{spider}:{run}:{group}"


def snapshot_document(
    *,
    spider: str,
    run: str,
    group: str,
    site: str,
    kind: str,
    template: str,
    url: str,
    status: int | None,
    headers: list[tuple[str, str]],
    body: bytes,
    body_bytes: int,
    error: str,
    node: str,
    at: dt.datetime,
) -> dict[str, Any]:
    """The document of a group's first occurrence (*body*: already cut to the bytes kept;
    *body_bytes*: the whole body's size)."""
    return {
        "_id": _ids(spider, run, group),
        "spider": spider,
        "run": run,
        "group": group,
        "site": site,
        "kind": kind,
        "template": template,
        "url": url,
        "status": status,
        "headers": [[k[:200], v[:MAX_HEADER_VALUE]] for k, v in headers[:MAX_HEADERS]],
        "body": Binary(body),
        "body_bytes": body_bytes,
        "truncated": body_bytes > len(body),
        "error": error[:MAX_ERROR_TEXT],
        "node": node,
        "at": at,
    }


class SnapshotWriter:
    """Writes snapshot documents on a thread: :meth:`put` never waits (False: dropped, too
    many wait), a batch MongoDB fails is tried :data:`TRIES` times and then dropped.
    ``written`` and ``dropped`` count them (read from any thread)."""

    def __init__(self, uri: str, database: str, *, timeout: float = 5.0) -> None:
        self.uri = uri
        self.database = database
        self.timeout = timeout
        self.written = 0
        self.dropped = 0
        self._queue: queue.Queue[dict[str, Any] | None] = queue.Queue(QUEUE_MAX)
        self._thread: threading.Thread | None = None
        self._client: pymongo.MongoClient[dict[str, Any]] | None = None
        self._lock = threading.Lock()

    def put(self, document: dict[str, Any]) -> bool:
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._run, name="distcrawl-snapshots", daemon=True
            )
            self._thread.start()
        try:
            self._queue.put_nowait(document)
        except queue.Full:
            self._count(dropped=1)
            return False
        return True

    def close(self, timeout: float) -> None:
        """Write what waits, for up to *timeout* seconds (blocking: run it on a thread), then
        stop; what is left is dropped."""
        thread = self._thread
        if thread is not None:
            with contextlib.suppress(queue.Full):
                self._queue.put(None, timeout=timeout)
            thread.join(timeout)
            left = self._queue.qsize()
            if thread.is_alive() and left:
                self._count(dropped=left)
        if self._client is not None:
            self._client.close()

    def _count(self, *, written: int = 0, dropped: int = 0) -> None:
        with self._lock:
            self.written += written
            self.dropped += dropped

    def _collection(self) -> Any:
        if self._client is None:
            ms = max(1, int(self.timeout * 1000))
            self._client = pymongo.MongoClient(
                self.uri, serverSelectionTimeoutMS=ms, connectTimeoutMS=ms, appname="distcrawl"
            )
        return self._client[self.database][SNAPSHOTS]

    def _run(self) -> None:
        stopping = False
        while not stopping:
            first = self._queue.get()
            if first is None:
                break
            batch = [first]
            while len(batch) < BATCH:
                try:
                    doc = self._queue.get_nowait()
                except queue.Empty:
                    break
                if doc is None:
                    stopping = True
                    break
                batch.append(doc)
            self._write(batch)

    def _write(self, batch: list[dict[str, Any]]) -> None:
        wait = WAIT
        for attempt in range(TRIES):
            try:
                self._collection().insert_many(batch, ordered=False)
                self._count(written=len(batch))
                return
            except BulkWriteError as exc:
                errors = exc.details.get("writeErrors", [])
                failed = [e for e in errors if e.get("code") != DUPLICATE_KEY]
                self._count(written=len(batch) - len(failed), dropped=len(failed))
                return
            except PyMongoError as exc:
                if attempt == TRIES - 1:
                    logger.warning(
                        "%d error snapshots not stored: MongoDB failed %d times (%s)",
                        len(batch),
                        TRIES,
                        exc,
                    )
                    self._count(dropped=len(batch))
                    return
                time.sleep(wait)
                wait *= 2


class ObserveStore:
    """The crawl's reports, snapshots and per-site baselines in MongoDB; every call blocks
    (run it on a thread) and raises the driver's errors."""

    def __init__(self, uri: str, database: str, *, timeout: float = 5.0) -> None:
        ms = max(1, int(timeout * 1000))
        self.client: pymongo.MongoClient[dict[str, Any]] = pymongo.MongoClient(
            uri, serverSelectionTimeoutMS=ms, connectTimeoutMS=ms, appname="distcrawl"
        )
        self.db = self.client[database]

    def close(self) -> None:
        self.client.close()

    # -- snapshots --------------------------------------------------------------------------

    def snapshot(self, spider: str, run: str, group: str) -> dict[str, Any] | None:
        key = _ids(spider, run, group)
        found: dict[str, Any] | None = self.db[SNAPSHOTS].find_one({"_id": key})
        return found

    def snapshots(self, spider: str, run: str) -> dict[str, dict[str, Any]]:
        """The run's snapshots by group, without their bodies."""
        cursor = self.db[SNAPSHOTS].find({"spider": spider, "run": run}, {"body": 0})
        return {doc["group"]: doc for doc in cursor}

    def prune_snapshots(self, spider: str, keep_runs: list[str]) -> int:
        """Delete the snapshots of the spider's other runs."""
        result = self.db[SNAPSHOTS].delete_many({"spider": spider, "run": {"$nin": keep_runs}})
        return int(result.deleted_count)

    # -- reports ----------------------------------------------------------------------------

    def save_report(self, report: Mapping[str, Any]) -> None:
        key = f"{report['crawl']}:{report['run']}"
        self.db[REPORTS].replace_one({"_id": key}, {**report, "_id": key}, upsert=True)

    def last_report(self, spider: str, *, before: str | None = None) -> dict[str, Any] | None:
        """The spider's newest report (of another run than *before*)."""
        query: dict[str, Any] = {"crawl": spider}
        if before is not None:
            query["run"] = {"$ne": before}
        docs = list(self.db[REPORTS].find(query).sort("finished_ms", -1).limit(1))
        return docs[0] if docs else None

    # -- baselines --------------------------------------------------------------------------

    def save_baselines(
        self, spider: str, run: str, sites: Mapping[str, tuple[int, Mapping[str, float]]]
    ) -> None:
        """Each site's products and field shares in this completed crawl."""
        now = dt.datetime.now(dt.UTC)
        ops = [
            pymongo.ReplaceOne(
                {"_id": {"spider": spider, "site": site}},
                {"run": run, "products": n, "shares": dict(shares), "at": now},
                upsert=True,
            )
            for site, (n, shares) in sites.items()
        ]
        if ops:
            self.db[BASELINES].bulk_write(ops, ordered=False)

    def baselines(
        self, spider: str, *, run: str | None = None
    ) -> dict[str, tuple[int, dict[str, float]]]:
        """Each site's products and field shares in its last completed crawl (other than
        *run*)."""
        out: dict[str, tuple[int, dict[str, float]]] = {}
        for doc in self.db[BASELINES].find({"_id.spider": spider}):
            if run is not None and doc.get("run") == run:
                continue
            shares = doc.get("shares")
            if isinstance(shares, dict):
                products = int(doc.get("products") or 0)
                found = {str(k): float(v) for k, v in shares.items()}
                out[str(doc["_id"]["site"])] = (products, found)
        return out

    # -- notices without Redis --------------------------------------------------------------

    def claim_once(self, key: str, cooldown: float) -> bool:
        """Whether this caller is the first to claim *key* in *cooldown* seconds (one atomic
        update of one document: every other caller finds it claimed)."""
        now = dt.datetime.now(dt.UTC)
        stale = now - dt.timedelta(seconds=cooldown)
        try:
            self.db[NOTICES].update_one(
                {"_id": key, "$or": [{"at": {"$lt": stale}}, {"at": {"$exists": False}}]},
                {"$set": {"at": now}},
                upsert=True,
            )
        except DuplicateKeyError:
            return False
        return True

    # -- products against the last crawl ----------------------------------------------------

    def product_changes(self, collection: str, since: dt.datetime) -> dict[str, int]:
        """The products of *collection* as this crawl (started at *since*) found them: new
        (first seen since), changed (seen before, their price, currency or availability
        changed since), unchanged (seen before and since, nothing changed) and gone (not
        seen since, or found gone since)."""
        products = self.db[collection]
        before = {"first_seen": {"$lt": since}}
        return {
            "new": products.count_documents({"first_seen": {"$gte": since}}),
            "changed": products.count_documents({**before, "changed_at": {"$gte": since}}),
            "unchanged": products.count_documents(
                {
                    **before,
                    "last_seen": {"$gte": since},
                    "changed_at": {"$lt": since},
                    "gone_at": {"$exists": False},
                }
            ),
            "gone": products.count_documents(
                {"$or": [{"last_seen": {"$lt": since}}, {"gone_at": {"$gte": since}}]}
            ),
        }
