"""The blocking side of the MongoDB pipeline: one bulk write per batch of products, run in a
worker thread so the reactor never waits on the network.

New products are inserted (``InsertOne``), stored ones updated with an update pipeline
(``UpdateOne``, ``upsert=True``) that keeps their history; both unordered. Inserts cost the
server several times less than upserts (SecantusDB: ~14k inserts/s against ~2-3k upserts/s),
so telling the two apart pays. How depends on what recent batches looked like: while most
products were new (a first crawl) a batch is inserted straight away and the few that turn out
to exist (duplicate ``_id``) are updated next; otherwise (a re-crawl) one ``find`` looks the
keys up first, since a failed insert costs the server more than a lookup. Either way a
product is written once, and two nodes inserting the same new product at once is harmless:
the loser's insert fails on the unique ``_id`` and it updates instead.

Before a stored product is updated, the changes its observation brings (price, currency,
availability) are inserted into the changes collection, unordered, with ids that make a
second insert of one change a no-op (:func:`~distcrawl.storage.documents.change_documents`):
changes first, so that a batch that fails halfway is retried from the same stored state and
finds the same changes, already there. Revisits (304, 404/410) are plain updates.
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pymongo import ASCENDING, InsertOne, MongoClient, UpdateOne
from pymongo.errors import BulkWriteError, CollectionInvalid, PyMongoError
from pymongo.write_concern import WriteConcern

from distcrawl.base.config import SETTINGS
from distcrawl.storage.documents import (
    CHANGE_PROJECTION,
    GONE,
    NOT_MODIFIED,
    PRODUCT,
    change_documents,
    insert_document,
    key_token,
    revisit_filter,
    revisit_update,
    update_pipeline,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

    from pymongo.collection import Collection

    from distcrawl.storage.documents import Record

__all__ = ["MongoWriter", "WriteOutcome"]

logger = logging.getLogger(__name__)

#: duplicate key: on ``_id`` a race with another writer (retry), on another index a conflict
DUPLICATE_KEY = 11000
#: while more than this share of recent products was new, batches are inserted without a
#: lookup first
OPTIMISTIC_SHARE = 0.5
#: weight of the latest batch in the running share of new products
SHARE_WEIGHT = 0.3
#: per-operation error codes worth retrying (the server or a lock was briefly unavailable)
TRANSIENT_CODES = frozenset(
    {6, 7, 50, 89, 91, 112, 189, 262, 9001, 10107, 11600, 11602, 13435, 13436, 64}
)


@dataclass
class WriteOutcome:
    """What one batch did: counts, the records to write again (by index in the batch), and
    the records the server refused for good, with its message. ``changes``: documents new
    in the changes collection; ``not_modified`` / ``gone``: revisits applied to a stored
    product; ``unknown``: revisits of pages whose product is not stored."""

    inserted: int = 0
    updated: int = 0
    changes: int = 0
    not_modified: int = 0
    gone: int = 0
    unknown: int = 0
    retry: list[int] = field(default_factory=list)
    rejected: dict[int, str] = field(default_factory=dict)


class MongoWriter:
    """Writes batches of :class:`~distcrawl.storage.documents.Record` to one collection.

    Every method blocks; the pipeline calls them in worker threads, two batches at a time at
    most, never with one key in both (pymongo's client is thread-safe). A
    failure of a whole batch (network, server selection, write concern, authentication...)
    is raised as the driver's exception; the caller keeps the batch and retries it, which the
    idempotent writes make safe even when part of it was applied.
    """

    def __init__(
        self,
        *,
        uri: str,
        database: str,
        collection: str,
        history: int,
        write_concern: WriteConcern,
        timeout: float,
        changes: str | None = SETTINGS.default("MONGO_CHANGES_COLLECTION"),
    ) -> None:
        ms = max(1, int(timeout * 1000))
        self.client: MongoClient[dict[str, Any]] = MongoClient(
            uri,
            serverSelectionTimeoutMS=ms,
            connectTimeoutMS=ms,
            socketTimeoutMS=max(ms, 30_000),  # a large batch on a slow server may take a while
            appname="distcrawl",
        )
        self.collection: Collection[dict[str, Any]] = self.client[database].get_collection(
            collection, write_concern=write_concern
        )
        self.changes: Collection[dict[str, Any]] | None = None
        if changes:
            self.changes = self.client[database].get_collection(
                changes, write_concern=write_concern
            )
        self.history = history
        self._collection_ready = False
        self._url_index_ready = False
        #: running share of new products among those written lately (1.0: assume a first crawl)
        self.new_share = 1.0

    def ensure_collection(self) -> None:
        """Create the collection if it is missing: its ``_id`` index is the unique key index."""
        if self._collection_ready:
            return
        database = self.collection.database
        if self.collection.name not in database.list_collection_names(
            filter={"name": self.collection.name}
        ):
            # CollectionInvalid: another node created it a moment ago.
            with contextlib.suppress(CollectionInvalid):
                database.create_collection(self.collection.name)
        if self.changes is not None:
            # readers follow the log in time order: the index makes that a range scan
            self.changes.create_index([("seen_at", ASCENDING)], name="seen_at")
        self._collection_ready = True

    def _ensure_url_index(self) -> None:
        """Revisits find their product by ``url`` when the unique key is something else."""
        if not self._url_index_ready:
            self.collection.create_index([("url", ASCENDING)], name="url")
            self._url_index_ready = True

    def ping(self) -> bool:
        try:
            self.client.admin.command("ping")
            return True
        except PyMongoError:
            return False

    def write(self, records: Sequence[Record]) -> WriteOutcome:
        """Write *records* (at most one per key)."""
        self.ensure_collection()
        outcome = WriteOutcome()
        products = [i for i, record in enumerate(records) if record.kind == PRODUCT]
        if products:
            self._write_products(records, products, outcome)
        if len(products) < len(records):
            self._write_revisits(records, outcome)
        return outcome

    def _write_products(
        self, records: Sequence[Record], indexes: list[int], outcome: WriteOutcome
    ) -> None:
        found: dict[str, dict[str, Any]] = {}
        if self.new_share >= OPTIMISTIC_SHARE:
            stored = self._insert(records, indexes, outcome)
            if stored and self.changes is not None:
                found = self._lookup(records, stored)
        else:
            found = self._lookup(records, indexes)
            stored = [i for i in indexes if records[i].token in found]
            new = [i for i in indexes if records[i].token not in found]
            raced = self._insert(records, new, outcome) if new else []
            if raced and self.changes is not None:  # inserted by another node meanwhile
                found.update(self._lookup(records, raced))
            stored += raced
        if stored:
            if self.changes is not None:
                self._record_changes(records, stored, found, outcome)
            self._update(records, stored, outcome)
        share = 1.0 - len(stored) / len(indexes)
        self.new_share = (1 - SHARE_WEIGHT) * self.new_share + SHARE_WEIGHT * share

    def _lookup(self, records: Sequence[Record], indexes: Sequence[int]) -> dict[str, Any]:
        """The stored documents of ``records[i]`` for *indexes*, by token (with the fields
        change detection reads, when the changes are recorded)."""
        keys = [records[i].key for i in indexes]
        projection = CHANGE_PROJECTION if self.changes is not None else {"_id": 1}
        found = self.collection.find({"_id": {"$in": keys}}, projection)
        return {key_token(doc["_id"]): doc for doc in found}

    def _record_changes(
        self,
        records: Sequence[Record],
        indexes: Sequence[int],
        found: dict[str, dict[str, Any]],
        outcome: WriteOutcome,
    ) -> None:
        """Insert the changes of ``records[i]`` against their stored documents; a change
        already there (the same id) is not inserted twice. Anything else that fails raises:
        the caller writes the batch again."""
        assert self.changes is not None
        documents = [
            change
            for i in indexes
            if (stored := found.get(records[i].token)) is not None
            for change in change_documents(records[i], stored)
        ]
        if not documents:
            return
        try:
            result = self.changes.insert_many(documents, ordered=False)
            outcome.changes += len(result.inserted_ids)
        except BulkWriteError as exc:
            errors = exc.details.get("writeErrors", [])
            if exc.details.get("writeConcernErrors") or any(
                error.get("code") != DUPLICATE_KEY for error in errors
            ):
                raise
            outcome.changes += exc.details.get("nInserted", 0)

    def _write_revisits(self, records: Sequence[Record], outcome: WriteOutcome) -> None:
        for kind in (NOT_MODIFIED, GONE):
            indexes = [i for i, record in enumerate(records) if record.kind == kind]
            if not indexes:
                continue
            if any(records[i].key is None for i in indexes):
                self._ensure_url_index()
            ops = [
                UpdateOne(revisit_filter(records[i]), revisit_update(records[i])) for i in indexes
            ]
            failed = len(outcome.retry) + len(outcome.rejected)
            result = self._bulk(ops, indexes, outcome, on_duplicate=outcome.retry)
            failed = len(outcome.retry) + len(outcome.rejected) - failed
            matched = result.get("nMatched", 0)
            if kind == NOT_MODIFIED:
                outcome.not_modified += matched
            else:
                outcome.gone += matched
            outcome.unknown += max(0, len(indexes) - matched - failed)

    def _insert(
        self, records: Sequence[Record], indexes: Sequence[int], outcome: WriteOutcome
    ) -> list[int]:
        """Insert ``records[i]`` for *indexes*; return the indexes whose key already exists."""
        ops = [
            InsertOne(records[i].document or insert_document(records[i], self.history))
            for i in indexes
        ]
        exists: list[int] = []
        result = self._bulk(ops, indexes, outcome, on_duplicate=exists)
        outcome.inserted += result.get("nInserted", 0)
        return exists

    def _update(
        self, records: Sequence[Record], indexes: Sequence[int], outcome: WriteOutcome
    ) -> None:
        ops = [
            UpdateOne(
                {"_id": records[i].key}, update_pipeline(records[i], self.history), upsert=True
            )
            for i in indexes
        ]
        # A duplicate _id on an upsert: another node inserted the product meanwhile; retry.
        result = self._bulk(ops, indexes, outcome, on_duplicate=outcome.retry)
        outcome.inserted += result.get("nUpserted", 0)
        outcome.updated += result.get("nMatched", 0)

    def _bulk(
        self,
        ops: Sequence[InsertOne[Any] | UpdateOne],
        indexes: Sequence[int],
        outcome: WriteOutcome,
        *,
        on_duplicate: list[int],
    ) -> dict[str, Any]:
        """One unordered bulk write; sort per-operation errors into *on_duplicate* (duplicate
        ``_id``), ``outcome.retry`` (transient) and ``outcome.rejected`` (for good)."""
        try:
            return dict(self.collection.bulk_write(ops, ordered=False).bulk_api_result)
        except BulkWriteError as exc:
            if exc.details.get("writeConcernErrors"):
                raise  # applied but maybe not durable: the caller rewrites the whole batch
            for error in exc.details.get("writeErrors", []):
                index, code = indexes[error["index"]], error.get("code")
                pattern = error.get("keyPattern") or {"_id": 1}
                if code == DUPLICATE_KEY and list(pattern) == ["_id"]:
                    on_duplicate.append(index)
                elif code in TRANSIENT_CODES:
                    outcome.retry.append(index)
                else:  # a conflict on another unique index, a document the server refuses...
                    outcome.rejected[index] = f"{error.get('errmsg', 'write error')} ({code})"
            return dict(exc.details)

    def close(self) -> None:
        self.client.close()
