"""Drain detection against a real Redis: a crawl is drained only once it began, nothing is
queued, leased or seeding anywhere, this node holds nothing, and that lasted the grace."""

from __future__ import annotations

import asyncio
import json
import logging

import pytest
import redis
from frontier_state import clear_frontier

from distcrawl.frontier import connection
from distcrawl.frontier.store import Child, FrontierKeys, FrontierStore
from distcrawl.node.scheduler.drain import DrainWatch

KEYS = FrontierKeys("d", "d:start_urls")


@pytest.fixture
def admin(redis_url: str) -> redis.Redis:
    client = redis.Redis.from_url(redis_url)
    clear_frontier(client, KEYS)
    client.delete(KEYS.start_urls)
    return client


def run_with_watch(redis_url: str, scenario, *, grace: float = 0.0) -> None:  # type: ignore[no-untyped-def]
    async def main() -> None:
        client = connection.async_client(redis_url)
        try:
            store = FrontierStore(client, KEYS, refresh=0.0)
            await scenario(store, DrainWatch(store=store, node_id="n1", drain_grace=grace))
        finally:
            await client.aclose()

    asyncio.run(main())


def push(admin: redis.Redis, path: str) -> FrontierStore:
    store = FrontierStore(admin, KEYS, refresh=0.0)
    store.sync("n0", children=[Child(path, 100, False, 0, "d.test", json.dumps({"url": path}))])
    return store


def test_an_empty_frontier_never_seeded_is_a_crawl_not_begun(
    redis_url: str, admin: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    async def scenario(store: FrontierStore, watch: DrainWatch) -> None:
        for _ in range(3):
            assert not await watch.check(busy=False)

    with caplog.at_level(logging.INFO, logger="distcrawl.node.scheduler.drain"):
        run_with_watch(redis_url, scenario)
    waiting = [r for r in caplog.records if "waits for the first seed" in r.getMessage()]
    assert len(waiting) == 1  # said once, not at every check


def test_a_crawl_that_began_is_drained_once_empty_for_the_grace(
    redis_url: str, admin: redis.Redis
) -> None:
    async def scenario(store: FrontierStore, watch: DrainWatch) -> None:
        watch.crawl_begun()
        assert not await watch.check(busy=False)  # the grace starts now
        assert await watch.check(busy=False)  # a grace of 0 s is over at the next look

    run_with_watch(redis_url, scenario)


def test_work_anywhere_or_on_this_node_restarts_the_grace(
    redis_url: str, admin: redis.Redis
) -> None:
    async def scenario(store: FrontierStore, watch: DrainWatch) -> None:
        watch.crawl_begun()
        assert not await watch.check(busy=False)
        assert not await watch.check(busy=True)  # this node still holds work or writes
        assert not await watch.check(busy=False)  # so the grace starts again
        other = push(admin, "http://d.test/a")  # another node queued work
        assert not await watch.check(busy=False)
        assert not await watch.check(busy=False)
        other.heartbeat("n2", "{}")  # a member: its leases count
        (lease,) = [entry.lease for entry in other.sync("n2", lease=1).leased]
        assert not await watch.check(busy=False)  # leased by n2: not done yet
        assert not await watch.check(busy=False)
        other.sync("n2", acks=[lease])
        assert not await watch.check(busy=False)
        assert await watch.check(busy=False)

    run_with_watch(redis_url, scenario)


def test_a_frontier_that_held_work_before_this_node_started_has_begun(
    redis_url: str, admin: redis.Redis
) -> None:
    store = push(admin, "http://d.test/a")
    (entry,) = store.sync("n0", lease=1).leased
    store.sync("n0", acks=[entry.lease])

    async def scenario(store: FrontierStore, watch: DrainWatch) -> None:
        assert not await watch.check(busy=False)  # (it took no seed itself)
        assert await watch.check(busy=False)

    run_with_watch(redis_url, scenario)
