"""The MongoDB item pipeline: products upserted in bulk on a unique key, and durable before
``process_item`` returns, in MongoDB or, while MongoDB is unreachable, in a local journal.

The frontier acknowledges a request once Scrapy has finished with its response, and Scrapy
awaits every item's ``process_item``; so an item's coroutine completes only when the item is
stored, journaled (fsync'd), or dropped with ``DropItem`` and a counted reason. A transient
database fault never raises: the item waits, which slows the crawl down (backpressure).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import logging
import random
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self
from urllib.parse import unquote, urlsplit

from pymongo.write_concern import WriteConcern
from scrapy.exceptions import DropItem

from distcrawl.services import mask_url, resolve_home
from distcrawl.storage.documents import InvalidItem, make_record
from distcrawl.storage.journal import Journal
from distcrawl.storage.writer import MongoWriter, WriteOutcome

if TYPE_CHECKING:
    from collections.abc import Sequence

    from scrapy.crawler import Crawler
    from scrapy.statscollectors import StatsCollector

    from distcrawl.storage.documents import Record
    from distcrawl.storage.journal import Segment

__all__ = ["MongoPipeline"]

logger = logging.getLogger(__name__)

#: database when neither ``MONGO_DATABASE`` nor the URI names one
DEFAULT_DATABASE = "catalog"
#: collection of products
DEFAULT_COLLECTION = "products"
#: item fields whose values make a product's unique key (its document ``_id``)
DEFAULT_UNIQUE_KEY = ("url",)
#: most products in one bulk write
DEFAULT_BATCH_SIZE = 100
#: seconds an idle writer lets a partial batch gather; 0 writes at once and lets the batch
#: form from what arrives during the previous write (group commit). Each item's request stays
#: leased until the item is durable and a node leases no more than its free slots, so any
#: wait here caps a node at CONCURRENT_REQUESTS / interval products per second.
DEFAULT_FLUSH_INTERVAL = 0.0
#: newest price-history entries kept per product (0 disables the history)
DEFAULT_PRICE_HISTORY = 20
#: while MongoDB is unreachable, products waiting in memory beyond this go to the journal
DEFAULT_BUFFER_MAX_ITEMS = 1000
#: seconds of outage after which waiting products go to the journal (and new ones straight
#: there) instead of holding their requests; also bounds how long a stop waits for MongoDB
DEFAULT_JOURNAL_AFTER = 15.0
#: seconds ``close_spider`` waits for MongoDB (writing what is left, replaying the journal)
DEFAULT_CLOSE_TIMEOUT = 10.0
#: driver timeouts in seconds (server selection, connect): how fast an outage is noticed
DEFAULT_TIMEOUT = 5.0
#: first and longest pause between retries of a failed write, in seconds (doubling)
DEFAULT_RETRY_BACKOFF = 0.25
DEFAULT_RETRY_BACKOFF_MAX = 5.0
#: acknowledged by a majority and journaled: the document survives a primary failover
DEFAULT_WRITE_CONCERN: dict[str, Any] = {"w": "majority", "j": True}
#: bulk writes in flight at once: while one is on the server, the other lane settles its
#: batch and forms the next (products of one key never go to both at once)
LANES = 2
#: a record whose write keeps racing (duplicate _id, transient per-document errors) this many
#: times is refused rather than retried forever
MAX_RECORD_ATTEMPTS = 10


@dataclass(slots=True)
class _Waiting:
    """An item waiting to be durable; its ``process_item`` awaits ``future``."""

    record: Record
    future: asyncio.Future[None]
    since: float
    attempts: int = 0


@dataclass(slots=True)
class _Outage:
    since: float = field(default_factory=time.monotonic)
    attempts: int = 0


class MongoPipeline:
    """Stores products in MongoDB with bulk upserts; survives MongoDB outages without losing
    or duplicating a product.

    Settings (read once, in ``from_crawler``):

    - ``MONGO_URI``: the server (required; :class:`distcrawl.services.EmbeddedServices` fills
      it with the embedded SecantusDB when empty).
    - ``MONGO_DATABASE``: database (default: the URI's, else ``catalog``).
    - ``MONGO_COLLECTION``: collection (default ``products``).
    - ``MONGO_UNIQUE_KEY``: item fields forming the unique key, stored as the document
      ``_id`` (whose index is unique in every collection; created with the collection at
      open): ``["url"]`` (default, the canonical URL) or e.g. ``["site", "sku"]``. An item
      missing a key field is dropped (``missing_<field>``).
    - ``MONGO_BATCH_SIZE``: most products per bulk write (default 100).
    - ``MONGO_FLUSH_INTERVAL``: seconds an idle writer lets a partial batch gather (default
      0: group commit, batches grow with the load; see ``DEFAULT_FLUSH_INTERVAL``).
    - ``MONGO_WRITE_CONCERN``: ``{"w": "majority", "j": true}`` by default; a dict (or JSON
      object) of ``WriteConcern`` arguments, or just the ``w`` value. ``w=0`` is refused.
    - ``MONGO_PRICE_HISTORY``: price-history entries kept per product (default 20).
    - ``MONGO_TIMEOUT``: driver timeouts in seconds (default 5).
    - ``MONGO_BUFFER_MAX_ITEMS``: products held in memory during an outage before they spill
      to the journal (default 1000).
    - ``MONGO_JOURNAL_AFTER``: seconds of outage after which products go to the journal
      (default 15).
    - ``MONGO_JOURNAL_PATH``: journal directory (default
      ``<DISTCRAWL_HOME>/journal/<database>.<collection>``); nodes on one machine may share
      it, and each replays what stopped nodes left there.
    - ``MONGO_CLOSE_TIMEOUT``: seconds a closing node waits for MongoDB (default 10).
    - ``MONGO_RETRY_BACKOFF`` / ``MONGO_RETRY_BACKOFF_MAX``: pause between retries, doubling
      from the first to the second (defaults 0.25 and 5 seconds).
    - ``DISTCRAWL_HOME``: see :mod:`distcrawl.services` (for the default journal path).

    Stats: ``pipeline/written``, ``pipeline/inserted``, ``pipeline/updated``,
    ``pipeline/batches``, ``pipeline/retries``, ``pipeline/journaled``, ``pipeline/replayed``,
    ``pipeline/journal_damaged``, ``pipeline/dropped/<reason>`` (``missing_url``,
    ``missing_name``, ``unencodable``, ``too_large``, ``rejected``).
    """

    def __init__(
        self,
        *,
        stats: StatsCollector,
        uri: str,
        database: str,
        collection: str = DEFAULT_COLLECTION,
        unique_key: Sequence[str] = DEFAULT_UNIQUE_KEY,
        batch_size: int = DEFAULT_BATCH_SIZE,
        flush_interval: float = DEFAULT_FLUSH_INTERVAL,
        write_concern: WriteConcern | None = None,
        price_history: int = DEFAULT_PRICE_HISTORY,
        timeout: float = DEFAULT_TIMEOUT,
        buffer_max_items: int = DEFAULT_BUFFER_MAX_ITEMS,
        journal_after: float = DEFAULT_JOURNAL_AFTER,
        journal_path: Path,
        close_timeout: float = DEFAULT_CLOSE_TIMEOUT,
        retry_backoff: float = DEFAULT_RETRY_BACKOFF,
        retry_backoff_max: float = DEFAULT_RETRY_BACKOFF_MAX,
    ) -> None:
        if not uri:
            raise ValueError(
                "MONGO_URI is empty: set it, or enable the add-on "
                "distcrawl.services.EmbeddedServices to use the embedded MongoDB"
            )
        if not unique_key:
            raise ValueError("MONGO_UNIQUE_KEY names no field")
        self.stats = stats
        self.uri = uri
        self.database = database
        self.collection = collection
        self.unique_key = tuple(unique_key)
        self.batch_size = max(1, batch_size)
        self.flush_interval = max(0.0, flush_interval)
        self.write_concern = write_concern or WriteConcern(**DEFAULT_WRITE_CONCERN)
        if not self.write_concern.acknowledged:
            raise ValueError("MONGO_WRITE_CONCERN w=0 cannot tell when a product is durable")
        self.price_history = max(0, price_history)
        self.timeout = timeout
        self.buffer_max_items = max(1, buffer_max_items)
        self.journal_after = max(0.0, journal_after)
        self.journal_path = journal_path
        self.close_timeout = max(0.0, close_timeout)
        self.retry_backoff = max(0.01, retry_backoff)
        self.retry_backoff_max = max(self.retry_backoff, retry_backoff_max)

        self._waiting: deque[_Waiting] = deque()
        self._in_flight: dict[int, list[_Waiting]] = {}  # lane -> the batch it is writing
        self._outage: _Outage | None = None
        self._journaling = False  # outage long enough: products go straight to the journal
        self._replay_wanted = False
        self._replaying: Segment | None = None
        self._replayed_from_segment = 0
        self._closing = False
        self._deadline = float("inf")
        self._writer: MongoWriter | None = None
        self._journal: Journal | None = None
        self._lanes: list[asyncio.Task[None]] = []
        self._probe: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()  # an item arrived, or the node is closing
        self._nudge = asyncio.Event()  # MongoDB answers again, or the node is closing
        self._journal_lock = asyncio.Lock()

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        settings = crawler.settings
        uri = settings.get("MONGO_URI") or ""
        database = settings.get("MONGO_DATABASE") or _uri_database(uri) or DEFAULT_DATABASE
        collection = settings.get("MONGO_COLLECTION") or DEFAULT_COLLECTION
        journal_path = settings.get("MONGO_JOURNAL_PATH") or (
            resolve_home(settings.get("DISTCRAWL_HOME") or None)
            / "journal"
            / f"{database}.{collection}"
        )
        assert crawler.stats is not None
        return cls(
            stats=crawler.stats,
            uri=uri,
            database=database,
            collection=collection,
            unique_key=settings.getlist("MONGO_UNIQUE_KEY") or DEFAULT_UNIQUE_KEY,
            batch_size=settings.getint("MONGO_BATCH_SIZE", DEFAULT_BATCH_SIZE),
            flush_interval=settings.getfloat("MONGO_FLUSH_INTERVAL", DEFAULT_FLUSH_INTERVAL),
            write_concern=_write_concern(settings.get("MONGO_WRITE_CONCERN")),
            price_history=settings.getint("MONGO_PRICE_HISTORY", DEFAULT_PRICE_HISTORY),
            timeout=settings.getfloat("MONGO_TIMEOUT", DEFAULT_TIMEOUT),
            buffer_max_items=settings.getint("MONGO_BUFFER_MAX_ITEMS", DEFAULT_BUFFER_MAX_ITEMS),
            journal_after=settings.getfloat("MONGO_JOURNAL_AFTER", DEFAULT_JOURNAL_AFTER),
            journal_path=Path(journal_path),
            close_timeout=settings.getfloat("MONGO_CLOSE_TIMEOUT", DEFAULT_CLOSE_TIMEOUT),
            retry_backoff=settings.getfloat("MONGO_RETRY_BACKOFF", DEFAULT_RETRY_BACKOFF),
            retry_backoff_max=settings.getfloat(
                "MONGO_RETRY_BACKOFF_MAX", DEFAULT_RETRY_BACKOFF_MAX
            ),
        )

    # ------------------------------------------------------------------ Scrapy's interface

    async def open_spider(self) -> None:
        self._writer = MongoWriter(
            uri=self.uri,
            database=self.database,
            collection=self.collection,
            history=self.price_history,
            write_concern=self.write_concern,
            timeout=self.timeout,
        )
        self._journal = Journal(
            self.journal_path, database=self.database, collection=self.collection
        )
        self._replay_wanted = bool(await asyncio.to_thread(self._journal.segments))
        try:
            await asyncio.to_thread(self._writer.ensure_collection)
        except Exception as exc:
            # Not fatal: products wait (or go to the journal) until MongoDB answers.
            self._failed(exc, waiting=0, what="MongoDB unreachable at open")
        self._lanes = [asyncio.create_task(self._flush_forever(lane)) for lane in range(LANES)]

    async def process_item(self, item: Any) -> Any:
        try:
            record = make_record(
                item, self.unique_key, history=self.price_history, now=dt.datetime.now(dt.UTC)
            )
        except InvalidItem as exc:
            self.stats.inc_value(f"pipeline/dropped/{exc.reason}")
            raise DropItem(str(exc)) from exc
        waiting = _Waiting(record, asyncio.get_running_loop().create_future(), time.monotonic())
        self._waiting.append(waiting)
        self._wake.set()
        if self._outage is not None and len(self._waiting) > self.buffer_max_items:
            spill = list(self._waiting)
            self._waiting.clear()
            if not await self._journal_items(spill):
                self._waiting.extendleft(reversed(spill))  # no disk either: keep waiting
        await waiting.future  # raises DropItem if the server refused the document for good
        return item

    async def close_spider(self) -> None:
        self._closing = True
        self._deadline = time.monotonic() + self.close_timeout
        self._wake.set()
        self._nudge.set()
        lanes = asyncio.gather(*self._lanes)
        try:
            await asyncio.wait_for(asyncio.shield(lanes), self.close_timeout + 1.0)
        except TimeoutError:
            lanes.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await lanes
        in_flight = [w for batch in self._in_flight.values() for w in batch]
        leftovers = [w for w in (*in_flight, *self._waiting) if not w.future.done()]
        self._in_flight, self._waiting = {}, deque()
        if leftovers and not await self._journal_items(leftovers):
            logger.error(
                "%d products could be neither written nor journaled; their pages will be "
                "crawled again when their leases return",
                len(leftovers),
            )
            for waiting in leftovers:
                if not waiting.future.done():
                    waiting.future.cancel()
        if self._probe is not None:
            self._probe.cancel()
        if self._replaying is not None:
            self._replaying.release()
            self._replaying = None
        if self._journal is not None:
            await asyncio.to_thread(self._journal.close)
            left = await asyncio.to_thread(self._journal.segments)
            if left:
                logger.warning(
                    "%d journal segments in %s wait for the next run to replay them",
                    len(left),
                    self.journal_path,
                )
        if self._writer is not None:
            await asyncio.to_thread(self._writer.close)

    # ------------------------------------------------------------------ the writer task

    async def _flush_forever(self, lane: int) -> None:
        """One writing lane. Lanes take batches with disjoint keys, so one batch is on the
        server while the other is being settled and the next one formed; lane 0 also replays
        the journal."""
        while True:
            try:
                batch = self._take_batch() if self._waiting else []
                if batch:
                    await self._store(lane, batch)
                elif lane == 0 and self._replay_wanted and self._can_replay():
                    await self._replay_step()
                elif self._closing and not self._waiting:
                    return
                else:
                    self._wake.clear()
                    await self._wake.wait()
                    await self._linger()
            except Exception:
                # A bug must not strand the waiting items: they stay queued and are retried.
                logger.exception("MongoDB pipeline error; retrying")
                self._waiting.extendleft(reversed(self._in_flight.pop(lane, [])))
                await asyncio.sleep(1.0)

    async def _linger(self) -> None:
        await asyncio.sleep(0)  # items produced in the same loop iteration join this batch
        if self.flush_interval <= 0:
            return
        deadline = self._waiting[0].since + self.flush_interval
        while len(self._waiting) < self.batch_size and not self._closing:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), remaining)

    def _take_batch(self) -> list[_Waiting]:
        """Up to a batch of items with distinct keys, oldest first, none of them being written
        by another lane; a product seen twice keeps its later observation for a later batch, so
        its history stays in order."""
        batch: list[_Waiting] = []
        later: list[_Waiting] = []
        tokens = {w.record.token for busy in self._in_flight.values() for w in busy}
        scanned = 0
        while self._waiting and len(batch) < self.batch_size and scanned < 4 * self.batch_size:
            waiting = self._waiting.popleft()
            scanned += 1
            if waiting.future.done():
                continue  # already journaled by a spill
            if waiting.record.token in tokens:
                later.append(waiting)
            else:
                tokens.add(waiting.record.token)
                batch.append(waiting)
        self._waiting.extendleft(reversed(later))
        if not batch and later:
            self._wake.clear()  # all of them wait for a lane to finish; it wakes us
        return batch

    async def _store(self, lane: int, batch: list[_Waiting]) -> None:
        """Make every item of *batch* durable: written, or journaled once the outage is long
        enough (or the node is closing and out of time). Never raises for a database fault."""
        self._in_flight[lane] = batch
        while batch:
            if not self._journaling:
                try:
                    outcome = await self._write([w.record for w in batch])
                except Exception as exc:
                    self._failed(exc, waiting=len(batch) + len(self._waiting))
                    if not self._journal_due():
                        await self._pause()
                        continue
                    self._start_journaling()
                else:
                    batch = self._settle(batch, outcome.rejected, outcome.retry)
                    self.stats.inc_value("pipeline/inserted", outcome.inserted)
                    self.stats.inc_value("pipeline/updated", outcome.updated)
                    self._in_flight[lane] = batch
                    continue
            if await self._journal_items(batch):
                break
            await self._pause()  # neither MongoDB nor the disk: hold on and try both again
        del self._in_flight[lane]
        self._wake.set()  # observations held back for this batch's keys may go now

    async def _write(self, records: list[Record]) -> WriteOutcome:
        assert self._writer is not None
        outcome = await asyncio.to_thread(self._writer.write, records)
        self.stats.inc_value("pipeline/batches")
        self._succeeded()
        return outcome

    def _settle(
        self, batch: list[_Waiting], rejected: dict[int, str], retry: list[int]
    ) -> list[_Waiting]:
        """Resolve the items of a written batch; return those to write again."""
        again = set(retry)
        retry_batch: list[_Waiting] = []
        written = 0
        for index, waiting in enumerate(batch):
            if waiting.future.done():
                continue
            if index in again:
                waiting.attempts += 1
                if waiting.attempts < MAX_RECORD_ATTEMPTS:
                    retry_batch.append(waiting)
                    continue
                rejected = {**rejected, index: "the write kept conflicting"}
            if index in rejected:
                self.stats.inc_value("pipeline/dropped/rejected")
                reason = f"MongoDB refused the product on {waiting.record.page}: {rejected[index]}"
                waiting.future.set_exception(DropItem(reason))
            else:
                written += 1
                waiting.future.set_result(None)
        self.stats.inc_value("pipeline/written", written)
        return retry_batch

    # ------------------------------------------------------------------ outages

    def _failed(
        self, exc: BaseException, *, waiting: int, what: str = "MongoDB write failed"
    ) -> None:
        self.stats.inc_value("pipeline/retries")
        if self._outage is None:
            self._outage = _Outage()
            logger.warning(
                "%s (%s: %s); holding %d products and retrying with backoff",
                what,
                type(exc).__name__,
                _short(exc),
                waiting,
            )
            self._probe = asyncio.create_task(self._probe_until_up())
        self._outage.attempts += 1

    def _succeeded(self) -> None:
        if self._outage is None:
            return
        logger.info(
            "MongoDB writes succeed again after %.1f s (%d failed attempts)",
            time.monotonic() - self._outage.since,
            self._outage.attempts,
        )
        self._outage = None
        self._journaling = False
        if self._probe is not None and self._probe is not asyncio.current_task():
            self._probe.cancel()
        self._probe = None
        if self._journal is not None and self._journal.segments():
            self._journal.rotate()  # our own segment becomes replayable
            self._replay_wanted = True
        self._nudge.set()
        self._wake.set()

    def _journal_due(self) -> bool:
        if self._closing and time.monotonic() >= self._deadline:
            return True
        return (
            self._outage is not None and time.monotonic() - self._outage.since >= self.journal_after
        )

    def _start_journaling(self) -> None:
        if self._journaling:
            return
        self._journaling = True
        assert self._outage is not None
        logger.warning(
            "MongoDB unreachable for %.0f s: products go to the journal %s until it answers",
            time.monotonic() - self._outage.since,
            self.journal_path,
        )

    def _backoff(self) -> float:
        attempts = self._outage.attempts if self._outage else 1
        delay = min(self.retry_backoff * 2.0 ** max(0, attempts - 1), self.retry_backoff_max)
        return delay * random.uniform(0.75, 1.0)  # nodes that failed together spread out

    async def _pause(self) -> None:
        """Sleep the backoff, waking early when MongoDB answers again or the node closes."""
        delay = self._backoff()
        if self._closing:
            delay = min(delay, max(0.0, self._deadline - time.monotonic()))
        self._nudge.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._nudge.wait(), delay)

    async def _probe_until_up(self) -> None:
        """During an outage, ping with backoff; the first answer ends the outage."""
        assert self._writer is not None
        while self._outage is not None:
            await asyncio.sleep(self._backoff())
            if await asyncio.to_thread(self._writer.ping):
                self._succeeded()
                return

    async def _journal_items(self, items: list[_Waiting]) -> bool:
        """Journal the unresolved *items* and resolve them; False if the disk failed too."""
        assert self._journal is not None
        pending = [w for w in items if not w.future.done()]
        if not pending:
            return True
        try:
            async with self._journal_lock:
                await asyncio.to_thread(self._journal.append, [w.record for w in pending])
        except OSError as exc:
            logger.error(
                "Cannot journal %d products to %s: %s", len(pending), self.journal_path, exc
            )
            return False
        self.stats.inc_value("pipeline/journaled", len(pending))
        for waiting in pending:
            if not waiting.future.done():
                waiting.future.set_result(None)
        return True

    # ------------------------------------------------------------------ journal replay

    def _can_replay(self) -> bool:
        if self._outage is not None:
            return False
        return not (self._closing and time.monotonic() >= self._deadline)

    async def _replay_step(self) -> None:
        """Replay one batch of the journal (live items go first between batches)."""
        assert self._journal is not None
        if self._replaying is None:
            self._replaying = await asyncio.to_thread(self._journal.claim)
            self._replayed_from_segment = 0
            if self._replaying is None:
                self._replay_wanted = False
                return
        segment = self._replaying
        records = await asyncio.to_thread(segment.read, self.batch_size)
        if not records:
            await asyncio.to_thread(segment.finish)
            self._replaying = None
            if segment.damaged:
                self.stats.inc_value("pipeline/journal_damaged", segment.damaged)
            logger.info(
                "Replayed %d products from the journal %s",
                self._replayed_from_segment,
                segment.path,
            )
            return
        for group in _distinct_rounds(records):
            attempts = 0
            while group:
                try:
                    outcome = await self._write(group)
                except Exception as exc:
                    # Keep the segment: a later replay starts it over (upserts are idempotent).
                    self._failed(exc, waiting=len(self._waiting))
                    segment.release()
                    self._replaying = None
                    return
                for index, message in outcome.rejected.items():
                    self.stats.inc_value("pipeline/dropped/rejected")
                    logger.warning(
                        "MongoDB refused the journaled product on %s: %s",
                        group[index].page,
                        message,
                    )
                done = len(group) - len(outcome.rejected) - len(outcome.retry)
                self.stats.inc_value("pipeline/replayed", done)
                self._replayed_from_segment += done
                attempts += 1
                group = [group[i] for i in outcome.retry] if attempts < MAX_RECORD_ATTEMPTS else []


def _distinct_rounds(records: list[Record]) -> list[list[Record]]:
    """*records* split into groups of distinct keys, each product's observations in order."""
    rounds: list[list[Record]] = []
    seen: dict[str, int] = {}
    for record in records:
        index = seen.get(record.token, -1) + 1
        seen[record.token] = index
        if index == len(rounds):
            rounds.append([])
        rounds[index].append(record)
    return rounds


def _uri_database(uri: str) -> str:
    try:
        return unquote(urlsplit(uri).path.lstrip("/"))
    except ValueError:
        return ""


def _write_concern(value: Any) -> WriteConcern | None:
    """``MONGO_WRITE_CONCERN``: a dict (or JSON object) of WriteConcern arguments, or ``w``."""
    if value is None or value == "":
        return None
    if isinstance(value, str) and value.strip().startswith("{"):
        value = json.loads(value)
    if isinstance(value, dict):
        return WriteConcern(**value)
    if isinstance(value, str) and value.isdigit():
        value = int(value)
    return WriteConcern(w=value, j=True)


def _short(exc: BaseException) -> str:
    """The gist of a driver error, without the timeouts and topology it appends."""
    text = (str(exc).splitlines() or [""])[0]
    for tail in (" (configured timeouts", ", Timeout:", ", full error:"):
        text = text.split(tail, 1)[0]
    return mask_url(text[:200]) if "://" in text else text[:200]
