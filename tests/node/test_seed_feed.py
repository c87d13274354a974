"""A node that found the seed list empty does not look again for ``recheck`` seconds: a busy
node whose leases come back empty is woken by every answer, and each look would be a round
trip. Whatever the schedule of pushes, takes and time, every seed pushed is taken, once."""

from __future__ import annotations

import asyncio
import random
import uuid
from collections.abc import Awaitable, Callable

import pytest
import redis
import redis.asyncio
from scrapy import Request, Spider
from scrapy.utils.test import get_crawler

from distcrawl.frontier.store import FrontierKeys, FrontierStore
from distcrawl.node.scheduler.buffers import WriteBuffers
from distcrawl.node.scheduler.drain import DrainWatch
from distcrawl.node.scheduler.seeds import SeedFeed
from distcrawl.node.seeds.sources import SeedSource


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class _Feed:
    """A seed feed on a real Redis, its clock in the test's hands."""

    def __init__(self, redis_url: str, recheck: float = 1.0) -> None:
        name = f"sf{uuid.uuid4().hex[:8]}"  # a crawl of its own: no test sees another's keys
        self.start = f"{name}:start_urls"
        self.sync = redis.Redis.from_url(redis_url)
        self.keys = FrontierKeys(name, self.start, shards=4)
        self.client = redis.asyncio.Redis.from_url(redis_url)  # made in the test's loop
        self.store = store = FrontierStore(self.client, self.keys)
        crawler = get_crawler(Spider)
        self.clock = _Clock()
        self.queued: list[str] = []
        self.feed = SeedFeed(
            store=store,
            client=self.client,
            source=SeedSource(key=self.start, kind="list", list_key=self.start),
            spider=Spider(name=name),
            node_id="n1",
            batch=5,
            allow_private=True,
            stats=crawler.stats,  # type: ignore[arg-type]
            writes=WriteBuffers(latency_target=1.0),
            drain=DrainWatch(store=store, node_id="n1", drain_grace=1.0),
            enqueue=self._enqueue,
            recheck=recheck,
            clock=self.clock,
        )

    def _enqueue(self, request: Request) -> bool:
        self.queued.append(request.url)
        return True

    def push(self, url: str) -> None:
        self.sync.lpush(self.start, url)

    def waiting(self) -> int:
        return int(self.sync.llen(self.start))

    async def take(self) -> bool:
        taken = await self.feed.take()
        if taken:  # the flush that queues their requests: the seeds leave the taken list
            await self.store.sync("n1", seeds_done=True)
            self.feed.writes.seeds_pending = False
        return taken

    async def close(self) -> None:
        await self.client.aclose()
        self.sync.close()


def _run(redis_url: str, scenario: Callable[[_Feed], Awaitable[None]]) -> _Feed:
    async def main() -> _Feed:
        feed = _Feed(redis_url)
        try:
            await scenario(feed)
        finally:
            await feed.close()
        return feed

    return asyncio.run(main())


def test_an_empty_list_is_left_alone_for_recheck_seconds_then_looked_at_again(
    redis_url: str,
) -> None:
    async def scenario(feed: _Feed) -> None:
        assert not await feed.take()  # empty: a look, then none for a second
        feed.push("http://s.test/a")
        feed.clock.now += 0.5
        assert not await feed.take()
        assert feed.waiting() == 1  # not looked at: the seed is still in the list
        feed.clock.now += 0.5
        assert await feed.take()
        assert feed.queued == ["http://s.test/a"] and feed.waiting() == 0

    _run(redis_url, scenario)


def test_a_list_that_had_seeds_is_looked_at_again_at_once(redis_url: str) -> None:
    async def scenario(feed: _Feed) -> None:
        for i in range(7):
            feed.push(f"http://s.test/{i}")
        assert await feed.take()  # 5 of 7 (the batch)
        assert await feed.take()  # the other 2, no wait
        assert not await feed.take()
        assert sorted(feed.queued) == sorted(f"http://s.test/{i}" for i in range(7))

    _run(redis_url, scenario)


@pytest.mark.parametrize("seed", range(20))
def test_random_schedules_take_every_seed_once_and_look_no_sooner_than_recheck(
    redis_url: str, seed: int
) -> None:
    rng = random.Random(seed)
    pushed: list[str] = []

    async def scenario(feed: _Feed) -> None:
        empty_at: float | None = None
        for step in range(60):
            action = rng.random()
            if action < 0.3:
                for _ in range(rng.randint(1, 7)):
                    url = f"http://s{seed}.test/{len(pushed)}"
                    pushed.append(url)
                    feed.push(url)
            elif action < 0.5:
                feed.clock.now += rng.choice([0.05, 0.3, 0.7, 1.0, 2.5])
            else:
                before = feed.waiting()
                took = await feed.take()
                if empty_at is not None and feed.clock.now < empty_at + 1.0:
                    # within recheck of an empty look: no look, the list untouched
                    assert not took and feed.waiting() == before, step
                elif before:
                    assert took and feed.waiting() == max(0, before - 5), step
                    empty_at = None
                else:
                    assert not took, step
                    empty_at = feed.clock.now
        # time passes: every seed left is taken
        for _ in range(len(pushed)):
            feed.clock.now += 1.0
            await feed.take()

    feed = _run(redis_url, scenario)
    assert sorted(feed.queued) == sorted(pushed)  # each once: none lost, none twice
    assert int(redis.Redis.from_url(redis_url).llen(feed.start)) == 0
