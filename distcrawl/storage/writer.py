"""The blocking side of the MongoDB pipeline: one bulk write per batch of products, run in a
worker thread so the reactor never waits on the network.

A batch costs two round trips: one ``find`` of the batch's keys, then one unordered
``bulk_write`` with an ``InsertOne`` for each new product and an update-pipeline ``UpdateOne``
(``upsert=True``) for each stored one. Inserts are several times cheaper than upserts on the
server (SecantusDB: ~14k inserts/s against ~2-3k upserts/s), and a first crawl is nearly all
inserts. Two nodes inserting the same new product at once is harmless: the second insert fails
on the unique ``_id`` and its record is retried, then found and updated.
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pymongo import InsertOne, MongoClient, UpdateOne
from pymongo.errors import BulkWriteError, CollectionInvalid, PyMongoError
from pymongo.write_concern import WriteConcern

from distcrawl.storage.documents import insert_document, key_token, update_pipeline

if TYPE_CHECKING:
    from collections.abc import Sequence

    from pymongo.collection import Collection

    from distcrawl.storage.documents import Record

__all__ = ["MongoWriter", "WriteOutcome"]

logger = logging.getLogger(__name__)

#: duplicate key: on ``_id`` a race with another writer (retry), on another index a conflict
DUPLICATE_KEY = 11000
#: per-operation error codes worth retrying (the server or a lock was briefly unavailable)
TRANSIENT_CODES = frozenset(
    {6, 7, 50, 89, 91, 112, 189, 262, 9001, 10107, 11600, 11602, 13435, 13436, 64}
)


@dataclass
class WriteOutcome:
    """What one batch did: counts, the records to write again (by index in the batch), and
    the records the server refused for good, with its message."""

    inserted: int = 0
    updated: int = 0
    retry: list[int] = field(default_factory=list)
    rejected: dict[int, str] = field(default_factory=dict)


class MongoWriter:
    """Writes batches of :class:`~distcrawl.storage.documents.Record` to one collection.

    Every method blocks; the pipeline calls them in a worker thread. A failure of the whole
    batch (network, server selection, write concern, authentication...) is raised as the
    driver's exception; the caller keeps the batch and retries.
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
        self.history = history
        self._collection_ready = False

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
        self._collection_ready = True

    def ping(self) -> bool:
        try:
            self.client.admin.command("ping")
            return True
        except PyMongoError:
            return False

    def write(self, records: Sequence[Record]) -> WriteOutcome:
        """Write *records* (one per key) in one bulk write."""
        self.ensure_collection()
        keys = [record.key for record in records]
        found = self.collection.find({"_id": {"$in": keys}}, {"_id": 1})
        stored = {key_token(doc["_id"]) for doc in found}
        ops: list[InsertOne[dict[str, Any]] | UpdateOne] = [
            UpdateOne({"_id": record.key}, update_pipeline(record, self.history), upsert=True)
            if record.token in stored
            else InsertOne(insert_document(record, self.history))
            for record in records
        ]
        outcome = WriteOutcome()
        try:
            result = self.collection.bulk_write(ops, ordered=False).bulk_api_result
        except BulkWriteError as exc:
            result = dict(exc.details)
            for error in result.get("writeErrors", []):
                index, code = error["index"], error.get("code")
                # A duplicate _id is a race with another writer: the retry finds and
                # updates the product. A duplicate on another unique index is a conflict.
                pattern = error.get("keyPattern") or {"_id": 1}
                race = code == DUPLICATE_KEY and list(pattern) == ["_id"]
                if race or code in TRANSIENT_CODES:
                    outcome.retry.append(index)
                else:
                    outcome.rejected[index] = f"{error.get('errmsg', 'write error')} ({code})"
            if result.get("writeConcernErrors"):
                # Applied but maybe not durable: rewriting the whole batch is idempotent.
                raise
        outcome.inserted = result.get("nInserted", 0) + result.get("nUpserted", 0)
        outcome.updated = result.get("nMatched", 0)
        return outcome

    def close(self) -> None:
        self.client.close()
