"""Journal replay in one go: every segment of a journal that no live process holds, written
to MongoDB batch by batch, each segment deleted once all of it is in. A closing node runs it
(in a worker thread) and so does ``distcrawl journal replay``; a crawl replays between its
live batches instead (:mod:`distcrawl.storage.store`).

A replayed observation never overwrites a newer one: the update compares crawl times (see
:func:`distcrawl.storage.documents.update_pipeline`), so replaying an old journal late, or
twice, is harmless.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable

    from distcrawl.storage.documents import Record
    from distcrawl.storage.journal import Journal
    from distcrawl.storage.writer import MongoWriter

__all__ = ["ReplaySummary", "distinct_rounds", "replay_journal"]

#: a record whose write keeps racing this many times is refused rather than retried forever
MAX_RECORD_ATTEMPTS = 10


@dataclass
class ReplaySummary:
    """What a replay did: segments finished (deleted), products written, refused by MongoDB
    for good (with the first messages), and damaged lines skipped."""

    segments: int = 0
    replayed: int = 0
    rejected: int = 0
    damaged: int = 0
    messages: list[str] | None = None

    def note_rejected(self, page: str, message: str) -> None:
        self.rejected += 1
        if self.messages is None:
            self.messages = []
        if len(self.messages) < 10:
            self.messages.append(f"{page}: {message}")


def replay_journal(
    journal: Journal,
    writer: MongoWriter,
    *,
    batch_size: int,
    progress: Callable[[ReplaySummary], None] | None = None,
) -> ReplaySummary:
    """Replay every segment of *journal* nobody holds; blocks. A MongoDB failure is raised
    as the driver's exception, with the segment in hand kept for a later replay (which
    starts it over: the writes are idempotent). *progress* is called after every batch."""
    summary = ReplaySummary()
    while (segment := journal.claim()) is not None:
        try:
            while records := segment.read(max(1, batch_size)):
                for group in distinct_rounds(records):
                    _write_group(writer, group, summary)
                if progress is not None:
                    progress(summary)
        except BaseException:
            segment.release()
            raise
        summary.damaged += segment.damaged
        segment.finish()
        summary.segments += 1
        if progress is not None:
            progress(summary)
    return summary


def _write_group(writer: MongoWriter, group: list[Record], summary: ReplaySummary) -> None:
    for _ in range(MAX_RECORD_ATTEMPTS):
        outcome = writer.write(group)
        for index, message in outcome.rejected.items():
            summary.note_rejected(group[index].page, message)
        summary.replayed += len(group) - len(outcome.rejected) - len(outcome.retry)
        group = [group[i] for i in outcome.retry]
        if not group:
            return
    for record in group:
        summary.note_rejected(record.page, "the write kept conflicting")


def distinct_rounds(records: list[Record]) -> list[list[Record]]:
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
