"""The requests a node leased and has not handed to the engine yet: those it may start now, and
those held back, each under the reason it waits for (its robots.txt, its share of the node's
download slots, its server's budget, a hold of its site), until that reason is released."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Hashable, Iterable, Iterator
from typing import TYPE_CHECKING
from weakref import WeakKeyDictionary

if TYPE_CHECKING:
    from scrapy import Request

__all__ = ["SHARE", "ReadyQueue"]

#: the kind of key (its first item) of requests held at their site's share of the node's slots:
#: they still wait for a slot, and count as their site's work
SHARE = "share"


class ReadyQueue:
    """Leased requests not started yet. ``startable`` holds those the engine may start, in
    the order they came (a paced one first); the others wait under a key until it is
    released. Its length, truth and iteration cover both: all of them are leases the node
    holds and has not started.

    Each request is stamped with the start of the round trip that leased it
    (``round_started``, set by the I/O loop): a request leased before something changed
    (its site's Crawl-delay reached the frontier) can be told apart. A request whose lease
    spent its site's rate token (``paced``) and that was then held has a *stale* token: the
    site's budget let it go at lease time, not at the later time it is released."""

    def __init__(self) -> None:
        self.startable: deque[Request] = deque()
        self._held: dict[Hashable, deque[Request]] = {}
        self._held_n = 0
        #: monotonic time the round trip now under way began (the I/O loop sets it)
        self.round_started = 0.0
        self._stamps: WeakKeyDictionary[Request, float] = WeakKeyDictionary()
        #: requests whose lease spent a rate token: False, True once held since (stale)
        self._tokens: WeakKeyDictionary[Request, bool] = WeakKeyDictionary()
        #: told +1 / -1 as a request starts or stops waiting for a slot (startable, or held
        #: at its share)
        self.on_queued: Callable[[Request, int], None] = lambda request, delta: None

    def __len__(self) -> int:
        return len(self.startable) + self._held_n

    def __bool__(self) -> bool:
        return bool(self.startable) or self._held_n > 0

    def __iter__(self) -> Iterator[Request]:
        yield from self.startable
        for held in self._held.values():
            yield from held

    def __getitem__(self, index: int) -> Request:
        return self.startable[index]

    @property
    def held(self) -> int:
        """Requests held back (not startable)."""
        return self._held_n

    def append(self, request: Request) -> None:
        self._stamps.setdefault(request, self.round_started)
        self.startable.append(request)
        self.on_queued(request, 1)

    def appendleft(self, request: Request) -> None:
        self._stamps.setdefault(request, self.round_started)
        self.startable.appendleft(request)
        self.on_queued(request, 1)

    def paced(self, request: Request) -> None:
        """``request``'s lease spent a rate token of its site (it starts first)."""
        self._tokens[request] = False
        self.appendleft(request)

    def stale_token(self, request: Request) -> bool:
        """Whether ``request`` spent a rate token at its lease and was held since."""
        return self._tokens.get(request, False)

    def extend(self, requests: Iterable[Request]) -> None:
        for request in requests:
            self.append(request)

    def popleft(self) -> Request:
        request = self.startable.popleft()
        self.on_queued(request, -1)
        return request

    def clear(self) -> None:
        for request in self.startable:
            self.on_queued(request, -1)
        for key, held in self._held.items():
            if _queued(key):
                for request in held:
                    self.on_queued(request, -1)
        self.startable.clear()
        self._held.clear()
        self._held_n = 0

    def leased_at(self, request: Request) -> float:
        """When the round trip that leased ``request`` began (0: unknown)."""
        return self._stamps.get(request, 0.0)

    # -- held requests -----------------------------------------------------------------------

    def hold(self, key: Hashable, request: Request) -> None:
        """``request`` waits under ``key`` until it is released."""
        self._held.setdefault(key, deque()).append(request)
        self._held_n += 1
        if request in self._tokens:
            self._tokens[request] = True
        if _queued(key):
            self.on_queued(request, 1)

    def holding(self, key: Hashable) -> int:
        held = self._held.get(key)
        return len(held) if held is not None else 0

    def held_keys(self) -> list[Hashable]:
        return list(self._held)

    def release(self, key: Hashable, n: int | None = None) -> int:
        """The first ``n`` (all) requests held under ``key`` become startable again, ahead of
        the others, in their order. Returns how many."""
        held = self._held.get(key)
        if not held:
            return 0
        count = len(held) if n is None else min(n, len(held))
        moved = [held.popleft() for _ in range(count)]
        if not held:
            del self._held[key]
        self._held_n -= count
        self.startable.extendleft(reversed(moved))
        if not _queued(key):  # (one held at its share was counted as waiting all along)
            for request in moved:
                self.on_queued(request, 1)
        return count


def _queued(key: Hashable) -> bool:
    return isinstance(key, tuple) and bool(key) and key[0] == SHARE
