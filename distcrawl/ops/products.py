"""The crawl's products in MongoDB as operators see them: how many the collection holds, how
many of them this crawl stored, and the latest few (``status``, the dashboard)."""

from __future__ import annotations

import datetime as dt
import threading
from typing import TYPE_CHECKING, Any

import pymongo
from pymongo.errors import PyMongoError

from distcrawl.base.config import SETTINGS
from distcrawl.base.urls import mask_url
from distcrawl.servers.embedded import DEFAULT_MONGO_DATABASE, resolve_home, services_status

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

__all__ = ["ProductStore", "mongo_uri", "no_store_reason"]

#: fields of a product the dashboard shows
_SHOWN = ("url", "name", "price", "currency", "availability", "last_seen")


def mongo_uri(settings: BaseSettings) -> str:
    """``MONGO_URI``, else the embedded server's if one runs on this machine, else ""."""
    uri: str = SETTINGS.value(settings, "MONGO_URI")
    if uri:
        return uri
    home = resolve_home(SETTINGS.value(settings, "DISTCRAWL_HOME") or None)
    mongo = services_status(home)["mongo"]
    return str(mongo["url"]) if mongo["running"] else ""


def no_store_reason(settings: BaseSettings) -> str:
    """Why a tool has no MongoDB to count products in (:func:`mongo_uri` is empty)."""
    home = resolve_home(SETTINGS.value(settings, "DISTCRAWL_HOME") or None)
    return f"MONGO_URI is not set and no embedded MongoDB runs under {home}"


def _reason(exc: BaseException) -> str:
    """A driver's error in one line (a server-selection timeout lists every attempt)."""
    text = str(exc).split(", Timeout:")[0].split(" (configured timeouts")[0]
    return f"{type(exc).__name__}: {text}"[:300]


class ProductStore:
    """One MongoDB client for a tool's whole life; every call is blocking (the dashboard runs
    it in a thread) and answers None when MongoDB cannot be reached."""

    def __init__(self, uri: str, *, database: str | None, collection: str) -> None:
        self.uri = uri
        self._client: pymongo.MongoClient[dict[str, Any]] = pymongo.MongoClient(
            uri, serverSelectionTimeoutMS=3000, connectTimeoutMS=3000, socketTimeoutMS=10000
        )
        # the pipeline's choice: MONGO_DATABASE, else the URI's database, else "catalog"
        db = (
            self._client[database]
            if database
            else self._client.get_default_database(DEFAULT_MONGO_DATABASE)
        )
        self._collection = db[collection]
        self._lock = threading.Lock()

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> ProductStore | None:
        uri = mongo_uri(settings)
        if not uri:
            return None
        return cls(
            uri,
            database=SETTINGS.value(settings, "MONGO_DATABASE") or None,
            collection=SETTINGS.value(settings, "MONGO_COLLECTION"),
        )

    @property
    def where(self) -> str:
        """``database.collection``."""
        return f"{self._collection.database.name}.{self._collection.name}"

    def count(self) -> int | None:
        try:
            return int(self._collection.estimated_document_count())
        except PyMongoError:
            return None

    def figures(self, since_ms: int | None, *, this_crawl: bool = True) -> dict[str, Any]:
        """The collection's products over every crawl (``in_collection``, a cheap estimate),
        and those this crawl stored or saw again (``this_crawl``: ``last_seen`` at or after
        *since_ms*, when the crawl's first node started; one scan of the collection, skipped
        without *this_crawl*). A figure that cannot be read is None, and ``error`` says why."""
        out: dict[str, Any] = {
            "collection": self.where,
            "in_collection": None,
            "this_crawl": None,
            "since_ms": since_ms,
            "error": None,
        }
        try:
            out["in_collection"] = int(self._collection.estimated_document_count())
            if since_ms is None:
                out["error"] = "no node has started this crawl yet (no start time recorded)"
            elif this_crawl:
                since = dt.datetime.fromtimestamp(since_ms / 1000, tz=dt.UTC)
                count = self._collection.count_documents({"last_seen": {"$gte": since}})
                out["this_crawl"] = int(count)
        except PyMongoError as exc:
            out["error"] = f"MongoDB at {mask_url(self.uri)}: {_reason(exc)}"
        return out

    def latest(self, limit: int) -> list[dict[str, Any]] | None:
        """The *limit* products seen last (``last_seen``, newest first)."""
        try:
            cursor = self._collection.find({}, dict.fromkeys(_SHOWN, 1))
            docs = list(cursor.sort("last_seen", -1).limit(limit))
        except PyMongoError:
            return None
        return [{k: _plain(doc.get(k)) for k in _SHOWN} for doc in docs]

    def close(self) -> None:
        self._client.close()


def _plain(value: Any) -> Any:
    """A JSON-ready value (Decimal128 prices, datetimes and the like become text)."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if hasattr(value, "to_decimal"):
        return str(value.to_decimal())
    if hasattr(value, "isoformat"):
        return str(value.isoformat())
    return str(value)
