"""The local journal: products that could not reach MongoDB, kept on disk until they can.

A journal is a directory of segment files, one JSON object per line (extended JSON, so
Decimal128 prices and datetimes come back exactly). The first line names the database and
collection the segment belongs to; a node replays only its own target's segments. Lines are
fsync'd before :meth:`Journal.append` returns, so a journaled product is as durable as a
written one.

Several nodes on one machine may share the directory: each holds an exclusive ``flock`` on the
segment it writes, and replays only segments nobody holds, which are those of stopped or dead
nodes and the ones it rotated out itself. A segment is deleted once every line is in MongoDB;
a crash mid-replay leaves it to be replayed again, which the idempotent upserts make harmless.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import socket
import time
from itertools import count
from pathlib import Path
from typing import IO, TYPE_CHECKING

from distcrawl.storage.documents import record_from_json, record_to_json

if TYPE_CHECKING:
    from collections.abc import Iterable

    from distcrawl.storage.documents import Record

__all__ = ["Journal", "Segment"]

logger = logging.getLogger(__name__)

#: journal format version, in every segment's header line
FORMAT = 1
#: segment file suffix
SUFFIX = ".jsonl"


class Segment:
    """A segment claimed for replay: read it in chunks, then :meth:`finish` (delete it) or
    :meth:`release` it (keep it for a later replay)."""

    def __init__(self, path: Path, handle: IO[str]) -> None:
        self.path = path
        self._handle = handle
        self.damaged = 0

    def read(self, limit: int) -> list[Record]:
        """Up to *limit* records; damaged lines (a crash mid-write) are counted and skipped."""
        records: list[Record] = []
        while len(records) < limit:
            line = self._handle.readline()
            if not line:
                break
            if not line.endswith("\n"):
                # The last line of a node that died while writing it: never acknowledged.
                self.damaged += 1
                break
            try:
                records.append(record_from_json(line))
            except ValueError:
                self.damaged += 1
        return records

    def finish(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        self._handle.close()

    def release(self) -> None:
        self._handle.close()


class Journal:
    """The journal directory of one target collection. Every method blocks (disk I/O); the
    pipeline calls them in a worker thread."""

    def __init__(self, directory: Path, *, database: str, collection: str) -> None:
        self.directory = directory
        self.header = {"distcrawl_journal": FORMAT, "database": database, "collection": collection}
        self._current: IO[str] | None = None
        self._current_path: Path | None = None
        self._sequence = count(1)

    def append(self, records: Iterable[Record]) -> int:
        """Write *records* to this node's segment and fsync it; return how many."""
        handle = self._current or self._open_segment()
        lines = [record_to_json(record) + "\n" for record in records]
        handle.write("".join(lines))
        handle.flush()
        os.fsync(handle.fileno())
        return len(lines)

    def _open_segment(self) -> IO[str]:
        self.directory.mkdir(parents=True, exist_ok=True)
        name = f"{time.time_ns()}-{socket.gethostname()}-{os.getpid()}-{next(self._sequence)}"
        path = self.directory / f"{name}{SUFFIX}"
        handle = open(path, "x", encoding="utf-8")  # noqa: SIM115 (held open until rotate())
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        handle.write(json.dumps(self.header) + "\n")
        handle.flush()
        os.fsync(handle.fileno())
        _fsync_directory(self.directory)  # the new file's name must survive a power loss too
        self._current, self._current_path = handle, path
        logger.info("Journaling products to %s", path)
        return handle

    def rotate(self) -> None:
        """Close this node's segment, so it can be replayed; the next append opens a new one."""
        if self._current is not None:
            self._current.close()
            self._current = self._current_path = None

    def segments(self) -> list[Path]:
        """Segment files present now, oldest first (including ones other nodes hold)."""
        try:
            paths = [p for p in self.directory.iterdir() if p.name.endswith(SUFFIX)]
        except FileNotFoundError:
            return []
        return sorted(paths, key=lambda p: p.name)

    def claim(self) -> Segment | None:
        """The oldest segment of this target that no live process holds, locked for replay."""
        for path in self.segments():
            handle = self._lock(path)
            if handle is not None:
                return Segment(path, handle)
        return None

    def held(self) -> tuple[int, int]:
        """``(segments, products)`` of this target that no live process holds: what is left
        for a replay to write (a line cut by a crash is not counted)."""
        segments = products = 0
        for path in self.segments():
            handle = self._lock(path)
            if handle is None:
                continue
            with handle:
                segments += 1
                products += sum(1 for line in handle if line.endswith("\n") and line.strip())
        return segments, products

    def _lock(self, path: Path) -> IO[str] | None:
        """*path* opened and exclusively locked, past its header, if it is a segment of this
        target that no live process holds; else None."""
        if path == self._current_path:
            return None
        try:
            handle = open(path, encoding="utf-8")  # noqa: SIM115 (owned by the caller)
        except FileNotFoundError:
            return None  # replayed and deleted by another node meanwhile
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()  # its writer is alive, or another node is replaying it
            return None
        if os.fstat(handle.fileno()).st_nlink == 0:
            handle.close()  # deleted between our open and our lock
            return None
        try:
            header = json.loads(handle.readline())
        except ValueError:
            header = None
        if header == self.header:
            return handle
        handle.close()
        if header is None and path.stat().st_size == 0:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()  # created by a node that died before writing its header
        return None

    @staticmethod
    def targets(directory: Path) -> list[tuple[str, str]]:
        """The ``(database, collection)`` pairs the segments in *directory* belong to."""
        found: dict[tuple[str, str], None] = {}
        try:
            paths = sorted(p for p in directory.iterdir() if p.name.endswith(SUFFIX))
        except FileNotFoundError:
            return []
        for path in paths:
            try:
                with open(path, encoding="utf-8") as handle:
                    header = json.loads(handle.readline())
            except (OSError, ValueError):
                continue
            if isinstance(header, dict) and header.get("distcrawl_journal") == FORMAT:
                found[(str(header.get("database")), str(header.get("collection")))] = None
        return list(found)

    def close(self) -> None:
        self.rotate()


def _fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
