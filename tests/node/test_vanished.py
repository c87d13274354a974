"""A node tells a crawl whose state vanished from one Redis came back with older data: random
sequences of round trips, snapshots, rewinds to them, flushes and database swaps on a real
Redis (a Hypothesis state machine), checked after each step against a small model: the crawl
is lost once its start marker was missing when the node looked, and never because of a
rewind to data that holds the marker."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import redis
import redis.asyncio as aioredis
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, initialize, invariant, rule
from scrapy.statscollectors import MemoryStatsCollector
from scrapy.utils.test import get_crawler

from distcrawl.frontier.batch import Child
from distcrawl.frontier.store import FrontierKeys, FrontierStore
from distcrawl.node.scheduler.vanished import CrawlOrigin

KEYS = FrontierKeys("v", "v:start_urls", shards=4)

#: (key, ttl, dump) of every key of database 0 at one moment, and whether the marker was in it
Snapshot = tuple[list[tuple[bytes, int, bytes]], bool]


class VanishedOrRewound(RuleBasedStateMachine):
    """One node's view (a :class:`CrawlOrigin` on a store of its own) of a Redis that the
    rules rewind, flush and swap."""

    url = ""
    snapshots = Bundle("snapshots")

    def _run(self, step: Callable[[FrontierStore], Awaitable[Any]]) -> Any:
        async def go() -> Any:
            client = aioredis.from_url(self.url)
            self.store.client = client
            self.store.runner.client = client
            try:
                return await step(self.store)
            finally:
                await client.aclose()

        return asyncio.run(go())

    @initialize()
    def open_the_crawl(self) -> None:
        self.plain = redis.Redis.from_url(self.url)
        self.plain.flushall()
        self.store = FrontierStore(aioredis.from_url(self.url), KEYS)
        self.stats = MemoryStatsCollector(get_crawler())
        self.told: list[bool] = []
        self.origin = CrawlOrigin(
            self.store, node_id="n", stats=self.stats, on_lost=lambda: self.told.append(True)
        )
        assert self._run(lambda store: self.origin.open()) is None
        self.marker_in = {0: True, 1: False}  # which database holds the crawl's marker
        self.lost = False  # the model: the node found the marker missing once
        self.seq = 0

    def _expect_check(self, got: bool) -> None:
        if not self.lost and not self.marker_in[0]:
            self.lost = True
        assert got == self.lost

    @rule(n=st.integers(1, 5))
    def round_trip(self, n: int) -> None:
        children = []
        for _ in range(n):
            self.seq += 1
            url = f"http://s{self.seq % 3}.test/{self.seq}"
            children.append(
                Child(url, 100, False, 0, f"s{self.seq % 3}.test", json.dumps({"url": url}))
            )
        self._run(lambda store: store.sync("n", children=children, lease=2))

    @rule(target=snapshots)
    def snapshot(self) -> Snapshot:
        keys = self.plain.keys("*")
        dumped = [(k, max(0, int(self.plain.pttl(k))), self.plain.dump(k)) for k in keys]
        return [(k, t, d) for k, t, d in dumped if d is not None], self.marker_in[0]

    @rule(snap=snapshots)
    def rewind_to(self, snap: Snapshot) -> None:
        """Redis back with the data of an earlier moment (a crash between fsyncs, a lagging
        replica promoted)."""
        data, had_marker = snap
        self.plain.flushdb()
        for key, ttl, dump in data:
            self.plain.restore(key, ttl, dump, replace=True)
        self.marker_in[0] = had_marker

    @rule()
    def flushall(self) -> None:
        self.plain.flushall()
        self.marker_in = {0: False, 1: False}

    @rule()
    def swap_databases(self) -> None:
        self.plain.swapdb(0, 1)
        self.marker_in = {0: self.marker_in[1], 1: self.marker_in[0]}

    @rule()
    def node_looks(self) -> None:
        self._expect_check(self._run(lambda store: self.origin.check(read=True)))
        if self.lost and not self.marker_in[0]:
            # it said so in the crawl: later nodes and commands see a lost marker
            self.marker_in[0] = False

    @rule()
    def node_heart_beats(self) -> None:
        async def beat(store: FrontierStore) -> bool:
            await store.heartbeat("n", "{}")
            return await self.origin.check()

        self._expect_check(self._run(beat))

    @invariant()
    def told_once_when_lost(self) -> None:
        if hasattr(self, "told"):
            assert len(self.told) == (1 if self.lost else 0)

    def teardown(self) -> None:
        if hasattr(self, "plain"):
            self.plain.flushall()
            self.plain.close()


@pytest.mark.parametrize("examples", [25])
def test_a_vanished_crawl_is_told_from_a_rewound_one(redis_url: str, examples: int) -> None:
    VanishedOrRewound.url = redis_url
    run = VanishedOrRewound.TestCase
    run.settings = settings(
        max_examples=examples,
        stateful_step_count=12,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture],
    )
    run().runTest()
