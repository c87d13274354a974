"""The durable side of the MongoDB pipeline: products wait here until they are in MongoDB or,
while MongoDB is unreachable, in the local journal; only then does :meth:`ProductStore.put`
return.

Two writing lanes take batches from the waiting products (group commit: a lane writes what
has gathered as soon as it is free, so batches grow with the load). A failed write is retried
with exponential backoff while the products wait, which holds their requests and so slows the
crawl down. When the outage outlasts ``journal_after``, or more than ``buffer_max_items``
products wait, they go to the journal instead, and new ones straight there until a probe
finds MongoDB again; the journal is then replayed, between live batches. Every lane's write
runs in a worker thread (:class:`~distcrawl.storage.writer.MongoWriter`), so the reactor
never waits on the network.

Writes are idempotent, so a product written twice (a retried batch that had been applied, a
replayed segment) is still one document. Order is kept per product within a node's live
writes; a replayed observation lands after whatever was written meanwhile (last writer wins).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from distcrawl.base.names.commands import REPLAY_JOURNAL
from distcrawl.base.urls import mask_url
from distcrawl.storage.replay import distinct_rounds, replay_journal

if TYPE_CHECKING:
    from collections.abc import Callable

    from distcrawl.storage.documents import Record
    from distcrawl.storage.journal import Journal, Segment
    from distcrawl.storage.writer import MongoWriter, WriteOutcome

__all__ = ["ProductStore", "Rejected", "stranded_journals"]

logger = logging.getLogger(__name__)

#: bulk writes in flight at once: a second lane writes only full batches, while the first
#: is busy with a partial one (products of one key never go to both at once)
LANES = 2
#: a record whose write keeps racing (duplicate _id, transient per-document errors) this many
#: times is refused rather than retried forever
MAX_RECORD_ATTEMPTS = 10
#: seconds between the log lines of a closing node waiting for MongoDB to replay its journal
WAIT_NOTE_INTERVAL = 5.0

#: seconds between two looks at whether the node was stopped, while a close waits for MongoDB
_STOP_POLL = 0.2
#: journal directory -> products a store of this process left there at close, unreplayed
_STRANDED: dict[str, int] = {}


def stranded_journals() -> dict[str, int]:
    """Journals that stores of this process closed with products still in them (directory ->
    products): a node must not report success while its products are not in MongoDB."""
    return dict(_STRANDED)


class Rejected(Exception):
    """MongoDB refused a product for good (the message says why); it is not stored."""


@dataclass(slots=True)
class _Waiting:
    """A product waiting to be durable; its ``put`` awaits ``future``."""

    record: Record
    future: asyncio.Future[None]
    since: float
    attempts: int = 0


@dataclass(slots=True)
class _Outage:
    since: float = field(default_factory=time.monotonic)
    attempts: int = 0


class ProductStore:
    """Makes products durable in MongoDB through *writer*, or in *journal* during outages.

    ``count(name, n)`` receives the counters (``written``, ``inserted``, ``updated``,
    ``changes``, ``not_modified``, ``gone``, ``revisit_unknown``, ``batches``, ``retries``,
    ``journaled``, ``replayed``, ``journal_damaged``, ``dropped/rejected``), and
    ``gauge(name, n)`` the gauge ``journal_held`` (products in the journal that no live node
    holds, counted at open and close, estimated in between).
    """

    def __init__(
        self,
        *,
        writer: MongoWriter,
        journal: Journal,
        count: Callable[[str, int], None],
        gauge: Callable[[str, int], None] | None = None,
        batch_size: int,
        flush_interval: float,
        buffer_max_items: int,
        journal_after: float,
        close_timeout: float,
        journal_close_timeout: float,
        retry_backoff: float,
        retry_backoff_max: float,
        stopped: Callable[[], bool] | None = None,
    ) -> None:
        self._writer = writer
        #: the node was asked to stop (ends a close's wait for MongoDB that began before)
        self._stopped = stopped or (lambda: False)
        self._journal = journal
        self._count = count
        self._gauge = gauge or (lambda name, value: None)
        self._held = 0  # products in the journal, for the journal_held gauge
        self.batch_size = max(1, batch_size)
        self.flush_interval = max(0.0, flush_interval)
        self.buffer_max_items = max(1, buffer_max_items)
        self.journal_after = max(0.0, journal_after)
        self.close_timeout = max(0.0, close_timeout)
        self.journal_close_timeout = max(0.0, journal_close_timeout)
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
        self._lanes: list[asyncio.Task[None]] = []
        self._probe: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()  # products arrived, a lane finished, or closing
        self._nudge = asyncio.Event()  # MongoDB answers again, or closing
        self._journal_lock = asyncio.Lock()
        self._rotation: asyncio.Task[None] | None = None

    @property
    def journal_path(self) -> str:
        return str(self._journal.directory)

    async def open(self) -> None:
        """Connect, create the collection if needed, and start the lanes; a journal left by an
        earlier run is replayed as soon as MongoDB answers."""
        self._replay_wanted = bool(await asyncio.to_thread(self._journal.segments))
        if self._replay_wanted:
            _, held = await asyncio.to_thread(self._journal.held)
            self._set_held(held)
        try:
            await asyncio.to_thread(self._writer.ensure_collection)
        except Exception as exc:
            # Not fatal: products wait (or go to the journal) until MongoDB answers.
            self._failed(exc, waiting=0, what="MongoDB unreachable at open")
        self._lanes = [asyncio.create_task(self._flush_forever(lane)) for lane in range(LANES)]

    async def put(self, record: Record) -> None:
        """Return once *record* is durable; raise :class:`Rejected` if MongoDB refuses it."""
        waiting = _Waiting(record, asyncio.get_running_loop().create_future(), time.monotonic())
        self._waiting.append(waiting)
        if len(self._waiting) == 1 or len(self._waiting) >= self.batch_size:
            self._wake.set()  # an idle lane has work; a busy lane looks when it is done
        if self._outage is not None and len(self._waiting) > self.buffer_max_items:
            spill = list(self._waiting)
            self._waiting.clear()
            if not await self._journal_items(spill):
                self._waiting.extendleft(reversed(spill))  # no disk either: keep waiting
        await waiting.future

    async def close(self) -> int:
        """Write what waits, waiting for MongoDB up to ``close_timeout`` seconds, then journal
        the rest; then, while the journal holds products, wait up to
        ``journal_close_timeout`` seconds for MongoDB and replay them. Release everything;
        return the products left in the journal (0: every product is in MongoDB)."""
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
        if self._rotation is not None:
            with contextlib.suppress(Exception):
                await self._rotation
        await asyncio.to_thread(self._journal.close)
        left = await self._drain_journal()
        if left:
            _STRANDED[self.journal_path] = left
        else:
            _STRANDED.pop(self.journal_path, None)
        await asyncio.to_thread(self._writer.close)
        return left

    def _set_held(self, products: int) -> None:
        self._held = max(0, products)
        self._gauge("journal_held", self._held)

    async def _drain_journal(self) -> int:
        """At close: while the journal holds products, wait for MongoDB (up to
        ``journal_close_timeout`` seconds, a log line every few) and replay them. Return the
        products left, after saying exactly where they are."""
        began = next_note = time.monotonic()
        deadline = began + self.journal_close_timeout
        failure = ""
        stopped_before = self._stopped()
        while True:
            segments, products = await asyncio.to_thread(self._journal.held)
            self._set_held(products)
            if not segments:
                _STRANDED.pop(self.journal_path, None)
                return 0
            # held until replayed: a process stopped under this wait exits saying so (status 3)
            _STRANDED[self.journal_path] = products
            if await asyncio.to_thread(self._writer.ping):
                if self._outage is not None:
                    self._end_outage()
                try:
                    summary = await asyncio.to_thread(
                        replay_journal, self._journal, self._writer, batch_size=self.batch_size
                    )
                except Exception as exc:
                    failure = f"{type(exc).__name__}: {_short(exc)}"
                    summary = None
                if summary is not None:
                    self._count("replayed", summary.replayed)
                    self._count("dropped/rejected", summary.rejected)
                    self._count("journal_damaged", summary.damaged)
                    for message in summary.messages or ():
                        logger.warning("MongoDB refused the journaled product on %s", message)
                    if summary.segments:
                        logger.info(
                            "Replayed %d products from the journal %s before closing",
                            summary.replayed,
                            self.journal_path,
                        )
                        continue
            else:
                failure = "MongoDB does not answer"
            now = time.monotonic()
            if now >= deadline:
                break
            if self._stopped() and not stopped_before:
                failure += "; the node was stopped while it waited"
                break
            if now >= next_note:
                logger.warning(
                    "Waiting for MongoDB to replay %d journaled products from %s before "
                    "closing (%s; %.0f s left, MONGO_JOURNAL_CLOSE_TIMEOUT)",
                    products,
                    self.journal_path,
                    failure or "other nodes hold the segments",
                    deadline - now,
                )
                next_note = now + WAIT_NOTE_INTERVAL
            until = now + min(self._backoff(), max(0.0, deadline - now))
            while time.monotonic() < until and (stopped_before or not self._stopped()):
                await asyncio.sleep(_STOP_POLL)
        paths = await asyncio.to_thread(self._journal.segments)
        logger.error(
            "%d products are NOT in MongoDB: they wait in the journal %s (%d segments: %s); "
            "MongoDB did not take them within %.0f s (%s). Replay them with "
            "`%s`, or start a node on this journal",
            products,
            self.journal_path,
            len(paths),
            ", ".join(p.name for p in paths),
            min(self.journal_close_timeout, time.monotonic() - began),
            failure,
            REPLAY_JOURNAL.line(directory=self.journal_path),
        )
        return products

    # ------------------------------------------------------------------ the writer task

    async def _flush_forever(self, lane: int) -> None:
        """One writing lane: it writes what has gathered whenever it is free, except that while
        another lane is writing it waits for a full batch. Lanes never hold the same product at
        once. Lane 0 also replays the journal, a batch at a time between live batches."""
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
        if self.flush_interval <= 0 or not self._waiting:
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
        if self._in_flight and len(self._waiting) < self.batch_size and not self._closing:
            # Another lane is writing: let a partial batch grow until that write is done (its
            # lane takes it then), so batches get larger as the load does.
            return []
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
                    self._count_outcome(outcome)
                    self._in_flight[lane] = batch
                    continue
            if await self._journal_items(batch):
                break
            await self._pause()  # neither MongoDB nor the disk: hold on and try both again
        del self._in_flight[lane]
        self._wake.set()  # observations held back for this batch's keys may go now

    def _count_outcome(self, outcome: WriteOutcome) -> None:
        self._count("inserted", outcome.inserted)
        self._count("updated", outcome.updated)
        self._count("changes", outcome.changes)
        self._count("not_modified", outcome.not_modified)
        self._count("gone", outcome.gone)
        self._count("revisit_unknown", outcome.unknown)

    async def _write(self, records: list[Record]) -> WriteOutcome:
        outcome = await asyncio.to_thread(self._writer.write, records)
        self._count("batches", 1)
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
                self._count("dropped/rejected", 1)
                reason = f"MongoDB refused the product on {waiting.record.page}: {rejected[index]}"
                waiting.future.set_exception(Rejected(reason))
            else:
                written += 1
                waiting.future.set_result(None)
        self._count("written", written)
        return retry_batch

    # ------------------------------------------------------------------ outages

    def _failed(
        self, exc: BaseException, *, waiting: int, what: str = "MongoDB write failed"
    ) -> None:
        self._count("retries", 1)
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
        self._end_outage()
        self._rotation = asyncio.create_task(self._rotate_journal())
        self._nudge.set()
        self._wake.set()

    def _end_outage(self) -> None:
        assert self._outage is not None
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

    async def _rotate_journal(self) -> None:
        """Make our own journal segment replayable, off the reactor thread and never while a
        lane or a spill is appending to it."""
        async with self._journal_lock:
            if await asyncio.to_thread(self._journal.segments):
                await asyncio.to_thread(self._journal.rotate)
                self._replay_wanted = True
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
        if self._outage is None:
            return  # it answered while we were writing to the journal
        delay = self._backoff()
        if self._closing:
            delay = min(delay, max(0.0, self._deadline - time.monotonic()))
        self._nudge.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._nudge.wait(), delay)

    async def _probe_until_up(self) -> None:
        """During an outage, ping with backoff; the first answer ends the outage."""
        while self._outage is not None:
            await asyncio.sleep(self._backoff())
            if await asyncio.to_thread(self._writer.ping):
                self._succeeded()
                return

    async def _journal_items(self, items: list[_Waiting]) -> bool:
        """Journal the unresolved *items* and resolve them; False if the disk failed too."""
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
        self._count("journaled", len(pending))
        self._set_held(self._held + len(pending))
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
                self._count("journal_damaged", segment.damaged)
            logger.info(
                "Replayed %d products from the journal %s",
                self._replayed_from_segment,
                segment.path,
            )
            return
        for group in distinct_rounds(records):
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
                    self._count("dropped/rejected", 1)
                    logger.warning(
                        "MongoDB refused the journaled product on %s: %s",
                        group[index].page,
                        message,
                    )
                done = len(group) - len(outcome.rejected) - len(outcome.retry)
                self._count("replayed", done)
                self._count("changes", outcome.changes)
                self._set_held(self._held - done)
                self._replayed_from_segment += done
                attempts += 1
                group = [group[i] for i in outcome.retry] if attempts < MAX_RECORD_ATTEMPTS else []


def _short(exc: BaseException) -> str:
    """The gist of a driver error, without the timeouts and topology it appends."""
    text = (str(exc).splitlines() or [""])[0]
    for tail in (" (configured timeouts", ", Timeout:", ", full error:"):
        text = text.split(tail, 1)[0]
    return mask_url(text[:200]) if "://" in text else text[:200]
