"""Products as MongoDB documents: validation, BSON-ready values, and the insert / update that
keep one document per product with ``first_seen``, ``last_seen`` and a bounded price history.

A product's unique key is its document ``_id``: the canonical URL by default, or a
sub-document such as ``{"site": ..., "sku": ...}`` when several key fields are configured.
MongoDB's ``_id`` index is unique on every collection, so a product stored twice is impossible
by construction, and no second unique index has to be maintained on every write (on
SecantusDB a secondary unique index costs more than half of the insert throughput).

Document shape::

    {_id: <key>, url, name, price: Decimal128, currency, availability, ...every item field,
     first_seen, last_seen, price_history: [{price, currency, availability, seen_at}, ...]}

Prices are stored as BSON Decimal128: exact (no float rounding), compared numerically by
queries and by the history rule (``9.9`` equals ``9.90``), and read back with
``.to_decimal()``. ``price_history`` gets an entry when a product is first stored and
whenever a re-crawl finds a different price, currency or availability, keeping the newest
``MONGO_PRICE_HISTORY`` entries.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import bson
import scrapy
from bson import json_util
from bson.decimal128 import Decimal128
from bson.errors import InvalidDocument
from bson.raw_bson import RawBSONDocument
from itemadapter import ItemAdapter

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = [
    "MAX_DOCUMENT_BYTES",
    "InvalidItem",
    "Record",
    "insert_document",
    "key_token",
    "make_record",
    "record_from_json",
    "record_to_json",
    "update_pipeline",
]

#: a document larger than this is refused before it reaches the server (BSON's limit is 16 MiB)
MAX_DOCUMENT_BYTES = 16 * 1024 * 1024 - 16 * 1024
#: fields every stored product must have (non-empty)
REQUIRED_FIELDS = ("url", "name")
#: fields whose change adds a price-history entry
HISTORY_FIELDS = ("price", "currency", "availability")
#: fields the pipeline owns; an item cannot overwrite them
RESERVED_FIELDS = frozenset({"_id", "first_seen", "last_seen", "price_history"})
#: extended JSON that keeps every BSON type (Decimal128, datetime) exactly, for the journal
JOURNAL_JSON = json_util.JSONOptions(
    json_mode=json_util.JSONMode.CANONICAL, tz_aware=True, tzinfo=dt.UTC
)


class InvalidItem(ValueError):
    """An item that cannot be stored; ``reason`` is short and stable (a stats key part)."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Record:
    """One product observation, ready to write: the ``_id`` key, the BSON-ready fields, when
    it was seen, ``token`` (the key as a string, to tell records of one product apart) and,
    when known, ``document``: the insert document already encoded, so a product is encoded
    to BSON once, on the way in, where it is also validated and measured."""

    key: Any
    fields: dict[str, Any]
    seen_at: dt.datetime
    token: str
    document: RawBSONDocument | None = None

    @property
    def page(self) -> str:
        """The page the item came from, for log lines."""
        return str(self.fields.get("source_url") or self.fields.get("url") or self.token)


def make_record(
    item: Any, key_fields: tuple[str, ...], *, history: int, now: dt.datetime
) -> Record:
    """Validate *item* and turn it into a :class:`Record`; raise :class:`InvalidItem`.

    ``seen_at`` is the item's ``crawled_at`` when it has one, else *now*; *history* is the
    price-history length (``MONGO_PRICE_HISTORY``), for the encoded insert document.
    """
    adapter = ItemAdapter(item)
    page = str(adapter.get("source_url") or adapter.get("url") or "an unknown page")
    for name in dict.fromkeys((*REQUIRED_FIELDS, *key_fields)):
        value = adapter.get(name)
        if value is None or (isinstance(value, str) and not value.strip()):
            raise InvalidItem(f"missing_{name}", f"product without {name} on {page}")
    try:
        fields = {
            name: value if type(value) in _PLAIN else to_bson(value)
            for name, value in _fields(item, adapter)
            if name not in RESERVED_FIELDS
        }
        key = (
            fields[key_fields[0]]
            if len(key_fields) == 1
            else {name: fields[name] for name in key_fields}
        )
        seen_at = fields.get("crawled_at")
        if not isinstance(seen_at, dt.datetime):
            seen_at = now
        record = Record(key=key, fields=fields, seen_at=seen_at, token=key_token(key))
        encoded = bson.encode(insert_document(record, history))
    except (InvalidDocument, TypeError, ValueError, OverflowError) as exc:
        raise InvalidItem("unencodable", f"product on {page} cannot be stored: {exc}") from exc
    if len(encoded) > MAX_DOCUMENT_BYTES:
        raise InvalidItem("too_large", f"product on {page} is {len(encoded)} bytes as BSON")
    return dataclasses.replace(record, document=RawBSONDocument(encoded))


#: types BSON stores as they are (checked by exact type: the common case, kept cheap)
_PLAIN = frozenset({str, int, float, bool, type(None)})


def _fields(item: Any, adapter: ItemAdapter) -> Iterable[tuple[str, Any]]:
    """The item's fields; dicts and Scrapy items without going through the adapter per field."""
    if isinstance(item, dict):
        return item.items()
    if isinstance(item, scrapy.Item):
        return dict(item).items()  # one copy; ItemAdapter would go through two layers per key
    return adapter.items()


def to_bson(value: Any) -> Any:
    """*value* with Decimals as Decimal128, dates as UTC datetimes, tuples and sets as lists
    and nested items as dicts; anything else is left for BSON to accept or refuse."""
    if value is None or isinstance(value, (str, int, float)):  # the common case first
        return value
    if isinstance(value, Decimal):
        return Decimal128(value)
    if isinstance(value, dt.datetime):
        return value if value.tzinfo else value.replace(tzinfo=dt.UTC)
    if isinstance(value, dt.date):
        return dt.datetime(value.year, value.month, value.day, tzinfo=dt.UTC)
    if isinstance(value, (list, tuple, set, frozenset)):
        return [to_bson(v) for v in value]
    if isinstance(value, dict):
        return {str(k): to_bson(v) for k, v in value.items()}
    if ItemAdapter.is_item(value):
        return {str(k): to_bson(v) for k, v in ItemAdapter(value).items()}
    return value


def _history_entry(record: Record) -> dict[str, Any] | None:
    fields = record.fields
    if fields.get("price") is None and fields.get("availability") is None:
        return None
    entry = {name: fields.get(name) for name in HISTORY_FIELDS}
    entry["seen_at"] = record.seen_at
    return entry


def insert_document(record: Record, history: int) -> dict[str, Any]:
    """The document of a product stored for the first time."""
    document = {"_id": record.key, **record.fields}
    document["first_seen"] = document["last_seen"] = record.seen_at
    entry = _history_entry(record)
    if history > 0 and entry is not None:
        document["price_history"] = [entry]
    return document


def update_pipeline(record: Record, history: int) -> list[dict[str, Any]]:
    """An update pipeline for a product already stored (also correct as an upsert).

    Observations may arrive out of order (a journal replayed after the crawl moved on), so
    the crawl time decides: an observation older than the stored ``last_seen`` changes no
    field; only ``first_seen`` (the earliest) and the price history may learn from it. The
    first stage puts the observation's history entry at its place in time when it differs
    from the entry before it (the state seen then); the second overwrites the fields the
    item carries when the observation is the newest.

    Every value goes through ``$literal``: a product name such as ``"$5 off"`` must stay data.
    """
    seen = {"$literal": record.seen_at}
    first: dict[str, Any] = {
        "first_seen": {"$min": [{"$ifNull": ["$first_seen", seen]}, seen]},
    }
    entry = _history_entry(record)
    if history > 0 and entry is not None:
        first["price_history"] = _history_update(entry, history)
    newest = {"$gte": [seen, {"$ifNull": ["$last_seen", {"$literal": _EPOCH}]}]}
    second: dict[str, Any] = {
        name: {"$cond": [newest, {"$literal": value}, f"${name}"]}
        for name, value in record.fields.items()
    }
    second["last_seen"] = {"$max": [{"$ifNull": ["$last_seen", seen]}, seen]}
    return [{"$set": first}, {"$set": second}]


#: older than any crawl: the ``last_seen`` of a document that has none
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def _history_update(entry: dict[str, Any], history: int) -> dict[str, Any]:
    """The stored history with *entry* at its place in time (newest *history* kept): added
    when it differs from the entry before it; when it equals the entry after it, that state
    began earlier than thought, and *entry* takes that entry's place."""
    stored = {"$ifNull": ["$price_history", []]}
    seen = {"$literal": entry["seen_at"]}

    def differs(other: str) -> dict[str, Any]:
        return {
            "$or": [
                {"$eq": [{"$type": other}, "missing"]},
                *(
                    {"$ne": [f"{other}.{name}", {"$literal": entry[name]}]}
                    for name in HISTORY_FIELDS
                ),
            ]
        }

    after_rest = {"$slice": ["$$after", 1, {"$max": [1, {"$size": "$$after"}]}]}
    placed = {
        "$concatArrays": [
            "$$before",
            [{"$literal": entry}],
            {"$cond": [differs("$$next"), "$$after", after_rest]},
        ]
    }
    return {
        "$let": {
            "vars": {
                "before": {
                    "$filter": {"input": stored, "as": "e", "cond": {"$lte": ["$$e.seen_at", seen]}}
                },
                "after": {
                    "$filter": {"input": stored, "as": "e", "cond": {"$gt": ["$$e.seen_at", seen]}}
                },
            },
            "in": {
                "$let": {
                    "vars": {
                        "prev": {"$arrayElemAt": ["$$before", -1]},
                        "next": {"$arrayElemAt": ["$$after", 0]},
                    },
                    "in": {"$cond": [differs("$$prev"), {"$slice": [placed, -history]}, stored]},
                }
            },
        }
    }


def record_to_json(record: Record) -> str:
    """One journal line (no newline inside: extended JSON escapes them)."""
    return json_util.dumps(
        {"key": record.key, "fields": record.fields, "seen_at": record.seen_at},
        json_options=JOURNAL_JSON,
    )


def record_from_json(line: str) -> Record:
    """The record of a journal line; raises ``ValueError`` on a damaged line."""
    data = json_util.loads(line, json_options=JOURNAL_JSON)
    if not isinstance(data, dict) or not {"key", "fields", "seen_at"} <= data.keys():
        raise ValueError("not a journal record")
    key = data["key"]
    return Record(key=key, fields=data["fields"], seen_at=data["seen_at"], token=key_token(key))


def key_token(key: Any) -> str:
    """A product key as a string (keys may be sub-documents, which do not hash)."""
    return key if isinstance(key, str) else json_util.dumps(key, json_options=JOURNAL_JSON)
