"""Dead letters and refused entries: the one reader of both, and the operator's writes
(re-queue, purge).

A dead letter's reason and site are read here and nowhere else, so ``status``, the
``--reason`` / ``--site`` filters, the dashboard and ``/metrics`` show and match the same
names: the reason exactly as the node recorded it (see :mod:`distcrawl.base.names.reasons`).
Reads are plans (:mod:`distcrawl.ops.reads`): a command runs them on a blocking client, the
dashboard one page at a time on an asyncio client, the status as part of its snapshot.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from distcrawl.base.names import reasons
from distcrawl.frontier.store import FrontierStore
from distcrawl.ops.reads import Batch, Plan, arun, run

if TYPE_CHECKING:
    from distcrawl.frontier.keys import FrontierKeys

__all__ = [
    "UNKNOWN_SITE",
    "Cursor",
    "DeadLetter",
    "Filter",
    "Page",
    "Refused",
    "Tally",
    "apage",
    "arefused",
    "matching",
    "purge",
    "read_record",
    "reason_of",
    "refused",
    "refused_entry",
    "requeue",
    "scan",
    "site_of",
    "tally",
]

#: the site of a dead letter whose record names none (and whose URL has no host)
UNKNOWN_SITE = "unknown"
#: records HSCAN reads per call (a hint to Redis)
SCAN_COUNT = 1000
#: dead letters moved or deleted per Redis call, so no single call blocks the server for long
_BATCH = 500


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def read_record(raw: Any) -> dict[str, Any]:
    """A dead letter's (or refused entry's) JSON record; one that is not a JSON object reads
    as ``{"reason": "unreadable_record"}`` (records come from nodes: not trusted)."""
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError, TypeError):
        return {"reason": reasons.UNREADABLE_RECORD}
    return value if isinstance(value, dict) else {"reason": reasons.UNREADABLE_RECORD}


def reason_of(record: Mapping[str, Any]) -> str:
    """The reason of a record, as every reader shows and every filter matches it."""
    reason = record.get("reason")
    return str(reason) if reason not in (None, "") else reasons.UNKNOWN


def site_of(record: Mapping[str, Any]) -> str:
    """The site (host) of a record: its ``site``, else its URL's host (as the frontier finds
    it when the letter is re-queued), else ``unknown``."""
    site = record.get("site")
    if isinstance(site, str) and site:
        return site
    url = record.get("url")
    host = urlsplit(url).hostname if isinstance(url, str) else None
    return host or UNKNOWN_SITE


@dataclass(frozen=True)
class DeadLetter:
    """One dead letter: its id, the shard it lies in, and its record."""

    id: str
    shard: int
    record: dict[str, Any]

    @property
    def reason(self) -> str:
        return reason_of(self.record)

    @property
    def site(self) -> str:
        return site_of(self.record)

    @property
    def when(self) -> float:
        """When its last try failed (unix time; 0 when the record does not say)."""
        at = self.record.get("last_attempt") or self.record.get("at")
        return float(at) if isinstance(at, (int, float)) else 0.0

    def summary(self) -> dict[str, Any]:
        """The record without its request payload (long, and only for re-queueing), with its
        id, site and reason as the readers name them."""
        shown = {k: v for k, v in self.record.items() if k != "request"}
        return {**shown, "id": self.id, "site": self.site, "reason": self.reason}


@dataclass(frozen=True)
class Filter:
    """Dead letters of any of ``sites`` and any of ``reasons`` (an empty set: any)."""

    sites: frozenset[str] = frozenset()
    reasons: frozenset[str] = frozenset()

    @classmethod
    def of(cls, sites: Iterable[str] = (), reasons: Iterable[str] = ()) -> Filter:
        return cls(frozenset(s.lower() for s in sites if s), frozenset(r for r in reasons if r))

    def __call__(self, letter: DeadLetter) -> bool:
        if self.sites and letter.site.lower() not in self.sites:
            return False
        return not self.reasons or letter.reason in self.reasons


@dataclass(frozen=True)
class Cursor:
    """Where a scan continues: a shard, its HSCAN cursor, and how many matching letters of the
    chunk that cursor reads were already returned (a page may end inside a chunk)."""

    shard: int = 0
    position: int = 0
    skip: int = 0

    def __str__(self) -> str:
        return f"{self.shard}:{self.position}:{self.skip}"

    @classmethod
    def parse(cls, raw: str, shards: int) -> Cursor:
        """A cursor as :meth:`__str__` writes it; anything else is the first page."""
        try:
            shard, position, skip = (int(part) for part in raw.split(":"))
        except ValueError:
            return cls()
        if 0 <= shard < shards and position >= 0 and skip >= 0:
            return cls(shard, position, skip)
        return cls()


@dataclass
class Page:
    """Matching dead letters, and the cursor of the next page (None after the last)."""

    letters: list[DeadLetter] = field(default_factory=list)
    next: Cursor | None = None
    #: records read to find them
    read: int = 0


def scan(
    keys: FrontierKeys,
    match: Filter | None = None,
    *,
    start: Cursor | None = None,
    limit: int | None = None,
    calls: int | None = None,
    sizes: Sequence[int] | None = None,
    count: int = SCAN_COUNT,
) -> Plan[Page]:
    """Read the dead letters that *match*, shard by shard, from *start*: at most *limit* of
    them and *calls* HSCAN calls (None: no bound). *sizes* (each shard's HLEN), when the
    caller read them already, save a round trip; empty shards are skipped."""
    match = match or Filter()
    start = start or Cursor()
    shards = keys.all_shards()
    if sizes is None:
        batch = Batch()
        for shard in shards:
            batch.add(shard.index, "hlen", shard.dead)
        got = yield batch
        sizes = [int(got[shard.index]) for shard in shards]
    page = Page()
    at, position, skip = start.shard, start.position, start.skip
    made = 0
    while calls is None or made < calls:
        while at < len(shards) and not sizes[at]:
            at, position, skip = at + 1, 0, 0
        if at >= len(shards) or (limit is not None and len(page.letters) >= limit):
            break
        batch = Batch()
        batch.add("chunk", "hscan", shards[at].dead, position, count=count)
        got = yield batch
        made += 1
        after, chunk = got["chunk"]
        found = []
        for dead_id, raw in chunk.items():
            page.read += 1
            letter = DeadLetter(_text(dead_id), at, read_record(raw))
            if match(letter):
                found.append(letter)
        found = found[skip:]
        room = None if limit is None else limit - len(page.letters)
        if room is not None and len(found) > room:
            # the page ends inside this chunk: the next one reads it again, past what it took
            page.letters += found[:room]
            page.next = Cursor(at, position, skip + room)
            return page
        page.letters += found
        position, skip = int(after), 0
        if position == 0:
            at += 1
    while at < len(shards) and not sizes[at]:
        at, position, skip = at + 1, 0, 0
    page.next = Cursor(at, position, skip) if at < len(shards) else None
    return page


@dataclass
class Tally:
    """Dead letters counted by reason and by site (most first), over ``counted`` records of
    ``total``."""

    total: int = 0
    counted: int = 0
    by_reason: dict[str, int] = field(default_factory=dict)
    by_site: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "total": self.total,
            "counted": self.counted,
            "by_reason": dict(self.by_reason),
            "by_site": dict(self.by_site),
        }


def tally(letters: Iterable[DeadLetter], total: int | None = None) -> Tally:
    by_reason: dict[str, int] = {}
    by_site: dict[str, int] = {}
    counted = 0
    for letter in letters:
        by_reason[letter.reason] = by_reason.get(letter.reason, 0) + 1
        by_site[letter.site] = by_site.get(letter.site, 0) + 1
        counted += 1
    return Tally(
        total=counted if total is None else total,
        counted=counted,
        by_reason=_most(by_reason),
        by_site=_most(by_site),
    )


def _most(counts: dict[str, int]) -> dict[str, int]:
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


# -- a command's reads and writes (blocking client) ------------------------------------------


def matching(
    client: Any, keys: FrontierKeys, *, sites: Iterable[str] = (), reasons: Iterable[str] = ()
) -> list[DeadLetter]:
    """Every dead letter of any of *sites* and any of *reasons* (none given: any)."""
    return run(client, scan(keys, Filter.of(sites, reasons))).letters


def requeue(client: Any, keys: FrontierKeys, ids: Sequence[str]) -> int:
    """Move the dead letters *ids* back to the queue (atomically per shard, through the
    frontier's ``requeue_dead``); returns how many moved."""
    store = FrontierStore(client, keys)
    moved = 0
    for i in range(0, len(ids), _BATCH):
        moved += int(store.requeue_dead(list(ids[i : i + _BATCH])))
    return moved


def purge(client: Any, keys: FrontierKeys, letters: Sequence[DeadLetter]) -> int:
    """Delete *letters* for good; returns how many were deleted."""
    by_shard: dict[int, list[str]] = {}
    for letter in letters:
        by_shard.setdefault(letter.shard, []).append(letter.id)
    store = FrontierStore(client, keys)
    return sum(int(store.purge_dead(ids, shard=index)) for index, ids in by_shard.items())


# -- the dashboard's pages (asyncio client) --------------------------------------------------


async def apage(
    client: Any,
    keys: FrontierKeys,
    match: Filter,
    *,
    start: Cursor,
    limit: int,
    calls: int,
    count: int,
) -> Page:
    """One page of matching dead letters, read with a bounded number of calls: HLEN per
    shard, then at most *calls* HSCAN."""
    return await arun(client, scan(keys, match, start=start, limit=limit, calls=calls, count=count))


# -- refused seeds and queue entries -----------------------------------------------------------


@dataclass(frozen=True)
class Refused:
    """The refused entries (newest first) of one page, and how many the list holds."""

    total: int
    entries: list[dict[str, Any]]


def _refused_plan(keys: FrontierKeys, start: int, stop: int) -> Plan[Refused]:
    batch = Batch()
    batch.add("total", "llen", keys.rejected)
    batch.add("entries", "lrange", keys.rejected, start, stop)
    got = yield batch
    return Refused(int(got["total"]), [refused_entry(raw) for raw in got["entries"]])


def refused_entry(raw: Any) -> dict[str, Any]:
    """A refused entry as every reader shows it: ``raw`` (the entry as it was pushed),
    ``reason``, ``kind`` (``seed`` or ``queue``), ``node`` and ``at`` (unix time)."""
    record = read_record(raw)
    entry = record.get("raw")
    return {
        "raw": _text(entry) if entry is not None else _text(raw),
        "reason": reason_of(record),
        "kind": record.get("kind"),
        "node": record.get("node"),
        "at": record.get("at"),
    }


def refused(client: Any, keys: FrontierKeys, limit: int = 0) -> Refused:
    """The newest *limit* refused entries (0: all); the list is bounded by the nodes."""
    return run(client, _refused_plan(keys, 0, limit - 1 if limit > 0 else -1))


async def arefused(client: Any, keys: FrontierKeys, page: int, per_page: int) -> Refused:
    """Page *page* (from 0) of *per_page* refused entries, newest first."""
    start = page * per_page
    return await arun(client, _refused_plan(keys, start, start + per_page - 1))
