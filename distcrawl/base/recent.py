"""Bounded, insertion-ordered sets and maps of what a process saw recently."""

from __future__ import annotations

import itertools
from typing import Generic, TypeVar

__all__ = ["RecentKeys", "RecentMap"]

K = TypeVar("K")
V = TypeVar("V")


class RecentMap(Generic[K, V]):
    """A map of up to ``limit`` entries; when full, the oldest half is forgotten, so a crawl
    that runs for days holds a bounded amount of memory."""

    def __init__(self, limit: int) -> None:
        self.limit = max(2, limit)
        self._items: dict[K, V] = {}  # insertion ordered

    def __len__(self) -> int:
        return len(self._items)

    def put(self, key: K, value: V) -> None:
        self._items[key] = value
        if len(self._items) > self.limit:
            for old in list(itertools.islice(self._items, len(self._items) // 2)):
                del self._items[old]

    def pop(self, key: K) -> V | None:
        return self._items.pop(key, None)

    def clear(self) -> None:
        self._items.clear()


class RecentKeys(RecentMap[str, None]):
    """Keys (fingerprints, URLs) remembered up to ``limit``, as :class:`RecentMap`."""

    def __contains__(self, key: str) -> bool:
        return key in self._items

    def add(self, key: str) -> None:
        self.put(key, None)
