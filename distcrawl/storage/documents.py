"""Products as MongoDB documents: validation, BSON-ready values, and the insert / update that
keep one document per product with ``first_seen``, ``last_seen``, ``changed_at``, ``gone_at``
and a bounded price history; and the ``changes`` log of every price, currency and
availability change.

A product's unique key is its document ``_id``: the canonical URL by default, or a
sub-document such as ``{"site": ..., "sku": ...}`` when several key fields are configured.
MongoDB's ``_id`` index is unique on every collection, so a product stored twice is impossible
by construction, and no second unique index has to be maintained on every write (on
SecantusDB a secondary unique index costs more than half of the insert throughput).

Document shape::

    {_id: <key>, url, name, price: Decimal128, currency, availability, ...every item field,
     first_seen, last_seen, changed_at, [gone_at],
     price_history: [{price, currency, availability, seen_at}, ...]}

Prices are stored as BSON Decimal128: exact (no float rounding), compared numerically by
queries and by the history rule (``9.9`` equals ``9.90``), and read back with
``.to_decimal()``. ``price_history`` gets an entry when a product is first stored and
whenever a re-crawl finds a different price, currency or availability, keeping the newest
``MONGO_PRICE_HISTORY`` entries. ``changed_at`` is when the newest observation that changed
one of those fields was made (the first one's, until something changes).

Besides full observations a record may be a revisit of a product page (:data:`NOT_MODIFIED`:
the page answered 304, so the product was seen as stored: ``last_seen`` moves, nothing else;
:data:`GONE`: the page answered 404/410, so ``gone_at`` is set, once). A newer observation of
the product, full or 304, removes ``gone_at``: the product came back.

Each change of price, currency or availability found by a newer observation also becomes one
document of the changes collection (:func:`change_documents`): ``{_id, url, field, old, new,
seen_at}``. Its ``_id`` is derived from the product, the field, the new value and the stored
``changed_at`` the change starts from, so writing it again (a retried bulk write, a journal
replayed twice, a page crawled again after a node died between the two writes) finds it there
and adds nothing.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
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

from distcrawl.base.names import reasons

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = [
    "GONE",
    "MAX_DOCUMENT_BYTES",
    "NOT_MODIFIED",
    "PRODUCT",
    "InvalidItem",
    "Record",
    "change_documents",
    "insert_document",
    "key_token",
    "make_record",
    "record_from_json",
    "record_to_json",
    "revisit_record",
    "revisit_update",
    "update_pipeline",
]

#: a document larger than this is refused before it reaches the server (BSON's limit is 16 MiB)
MAX_DOCUMENT_BYTES = 16 * 1024 * 1024 - 16 * 1024
#: fields every stored product must have (non-empty)
REQUIRED_FIELDS = ("url", "name")
#: fields whose change adds a price-history entry
HISTORY_FIELDS = ("price", "currency", "availability")
#: fields the pipeline owns; an item cannot overwrite them
RESERVED_FIELDS = frozenset(
    {"_id", "first_seen", "last_seen", "changed_at", "gone_at", "price_history"}
)
#: record kinds: a full observation of a product, a 304 revisit, a 404/410 revisit
PRODUCT, NOT_MODIFIED, GONE = "product", "not_modified", "gone"
#: what a record of each revisit kind is made from: the HTTP status of the page
REVISIT_STATUSES = {304: NOT_MODIFIED, 404: GONE, 410: GONE}
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
    to BSON once, on the way in, where it is also validated and measured.

    ``kind`` is :data:`PRODUCT` (a full observation), or a revisit of the product's page,
    :data:`NOT_MODIFIED` or :data:`GONE`, whose ``fields`` hold only the ``url`` and whose
    ``key`` is None when the unique key is not the URL (the product is then found by ``url``).
    """

    key: Any
    fields: dict[str, Any]
    seen_at: dt.datetime
    token: str
    document: RawBSONDocument | None = None
    kind: str = PRODUCT

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
            raise InvalidItem(reasons.MISSING_ITEM_FIELD(name), f"product without {name} on {page}")
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
        raise InvalidItem(
            reasons.UNENCODABLE, f"product on {page} cannot be stored: {exc}"
        ) from exc
    if len(encoded) > MAX_DOCUMENT_BYTES:
        raise InvalidItem(reasons.TOO_LARGE, f"product on {page} is {len(encoded)} bytes as BSON")
    return dataclasses.replace(record, document=RawBSONDocument(encoded))


def revisit_record(
    url: str,
    status: int,
    key_fields: tuple[str, ...],
    *,
    seen_at: dt.datetime,
    unlisted: bool = False,
) -> Record:
    """The record of a product page's revisit that answered *status* (304, 404 or 410; or,
    with *unlisted*, a product that no listing links any more, whatever its page answered:
    gone); raise :class:`InvalidItem` for another status or an empty URL."""
    kind = GONE if unlisted else REVISIT_STATUSES.get(status)
    if kind is None:
        raise InvalidItem(reasons.REVISIT_STATUS, f"a revisit of {url} answered {status}")
    if not url:
        raise InvalidItem(reasons.MISSING_URL, "a revisit without a URL")
    key = url if key_fields == ("url",) else None
    seen = to_bson(seen_at)
    return Record(key=key, fields={"url": url}, seen_at=seen, token=key_token(url), kind=kind)


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
    document["first_seen"] = document["last_seen"] = document["changed_at"] = record.seen_at
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
    changed = {
        "$or": [
            {"$ne": [{"$ifNull": [f"${name}", None]}, {"$literal": record.fields.get(name)}]}
            for name in HISTORY_FIELDS
        ]
    }
    # computed in the first stage, from the fields as they were before this observation
    first["changed_at"] = {
        "$cond": [
            {"$and": [newest, changed]},
            seen,
            {"$ifNull": ["$changed_at", {"$ifNull": ["$first_seen", seen]}]},
        ]
    }
    second: dict[str, Any] = {
        name: {"$cond": [newest, {"$literal": value}, f"${name}"]}
        for name, value in record.fields.items()
    }
    second["last_seen"] = {"$max": [{"$ifNull": ["$last_seen", seen]}, seen]}
    second["gone_at"] = _came_back(seen)
    return [{"$set": first}, {"$set": second}]


def _came_back(seen: dict[str, Any]) -> dict[str, Any]:
    """``gone_at`` removed when the product was seen after it: it came back."""
    return {"$cond": [{"$gt": [seen, {"$ifNull": ["$gone_at", seen]}]}, "$$REMOVE", "$gone_at"]}


def revisit_filter(record: Record) -> dict[str, Any]:
    """Which document a revisit record updates: its key, else the product with its URL."""
    return {"_id": record.key} if record.key is not None else {"url": record.fields["url"]}


def revisit_update(record: Record) -> list[dict[str, Any]]:
    """The update of a stored product that a revisit record makes (never an upsert: a
    revisit of a page whose product was never stored changes nothing).

    :data:`NOT_MODIFIED`: the page is as it was when last seen, so the product was seen
    again: ``last_seen`` moves on (never back) and ``gone_at`` goes if it is older.
    :data:`GONE`: ``gone_at`` becomes the earliest answer of the page saying so that is not
    older than ``last_seen`` (an older one was overtaken by a newer sighting)."""
    seen = {"$literal": record.seen_at}
    if record.kind == NOT_MODIFIED:
        return [
            {
                "$set": {
                    "last_seen": {"$max": [{"$ifNull": ["$last_seen", seen]}, seen]},
                    "gone_at": _came_back(seen),
                }
            }
        ]
    newest = {"$gte": [seen, {"$ifNull": ["$last_seen", {"$literal": _EPOCH}]}]}
    earliest = {"$min": [{"$ifNull": ["$gone_at", seen]}, seen]}
    return [{"$set": {"gone_at": {"$cond": [newest, earliest, "$gone_at"]}}}]


#: the stored fields :func:`change_documents` compares an observation with
CHANGE_PROJECTION = {name: 1 for name in (*HISTORY_FIELDS, "first_seen", "last_seen", "changed_at")}


def change_documents(record: Record, stored: dict[str, Any]) -> list[dict[str, Any]]:
    """The changes collection's documents for a full observation of a product *stored* as
    given (its :data:`CHANGE_PROJECTION`): one per history field whose value differs, if the
    observation is not older than the stored one (an older one, replayed late, changes
    nothing that is current). Prices compare as numbers, as the server compares them."""
    last_seen = stored.get("last_seen")
    if isinstance(last_seen, dt.datetime) and _utc(record.seen_at) < _utc(last_seen):
        return []
    since = stored.get("changed_at") or stored.get("first_seen") or last_seen
    documents = []
    for name in HISTORY_FIELDS:
        old, new = stored.get(name), record.fields.get(name)
        if _comparable(old) == _comparable(new):
            continue
        documents.append(
            {
                "_id": _change_id(record.token, name, since, new),
                "url": record.fields.get("url"),
                "field": name,
                "old": old,
                "new": new,
                "seen_at": record.seen_at,
            }
        )
    return documents


def _change_id(token: str, name: str, since: Any, new: Any) -> str:
    text = json_util.dumps([token, name, since, new], json_options=JOURNAL_JSON)
    return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


def _comparable(value: Any) -> Any:
    return value.to_decimal() if isinstance(value, Decimal128) else value


def _utc(value: dt.datetime) -> dt.datetime:
    return value if value.tzinfo else value.replace(tzinfo=dt.UTC)


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
    data = {"key": record.key, "fields": record.fields, "seen_at": record.seen_at}
    if record.kind != PRODUCT:
        data["kind"] = record.kind
    return json_util.dumps(data, json_options=JOURNAL_JSON)


def record_from_json(line: str) -> Record:
    """The record of a journal line; raises ``ValueError`` on a damaged line."""
    data = json_util.loads(line, json_options=JOURNAL_JSON)
    if not isinstance(data, dict) or not {"key", "fields", "seen_at"} <= data.keys():
        raise ValueError("not a journal record")
    key, fields, kind = data["key"], data["fields"], data.get("kind", PRODUCT)
    if kind not in (PRODUCT, NOT_MODIFIED, GONE) or not isinstance(fields, dict):
        raise ValueError("not a journal record")
    if kind == PRODUCT:
        token = key_token(key)
    elif isinstance(fields.get("url"), str):
        token = key_token(fields["url"])
    else:
        raise ValueError("a revisit without a URL")
    return Record(key=key, fields=fields, seen_at=data["seen_at"], token=token, kind=kind)


def key_token(key: Any) -> str:
    """A product key as a string (keys may be sub-documents, which do not hash)."""
    return key if isinstance(key, str) else json_util.dumps(key, json_options=JOURNAL_JSON)
