"""The crawl's products in MongoDB as operators see them: how many are stored, and the latest
few (``status``, the dashboard)."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

import pymongo
from pymongo.errors import PyMongoError

from distcrawl.base.config import SETTINGS
from distcrawl.servers.embedded import DEFAULT_MONGO_DATABASE, resolve_home, services_status

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

__all__ = ["ProductStore", "mongo_uri"]

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

    def count(self) -> int | None:
        try:
            return int(self._collection.estimated_document_count())
        except PyMongoError:
            return None

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
