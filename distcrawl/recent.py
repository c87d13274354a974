"""A bounded, insertion-ordered set of keys a process saw recently."""

from __future__ import annotations

import itertools

__all__ = ["RecentKeys"]


class RecentKeys:
    """Keys (fingerprints, URLs) remembered up to ``limit``; when full, the oldest half is
    forgotten, so a crawl that runs for days holds a bounded amount of memory."""

    def __init__(self, limit: int) -> None:
        self.limit = max(2, limit)
        self._seen: dict[str, None] = {}  # insertion ordered

    def __contains__(self, key: str) -> bool:
        return key in self._seen

    def __len__(self) -> int:
        return len(self._seen)

    def add(self, key: str) -> None:
        self._seen[key] = None
        if len(self._seen) > self.limit:
            for old in list(itertools.islice(self._seen, len(self._seen) // 2)):
                del self._seen[old]

    def clear(self) -> None:
        self._seen.clear()
