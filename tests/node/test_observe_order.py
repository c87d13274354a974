"""A site's field coverage judged over random schedules of nodes storing its products, on a
real Redis: however the products fall to the nodes, however far each node's pipeline lags and
whenever the nodes' heartbeats come, a fall of a field's share is found once, and a share that
only moves by chance is not found at all.

Each node is what the scheduler runs: its :class:`Observations` counts the products it
stores, its :class:`Membership` ticks after each of them (as the scheduler's loop does after
each round trip) and its :class:`Watch` judges what comes back. Only the clock is left out:
the heartbeat interval is an hour, and the schedule says when a node beats on its interval.
"""

from __future__ import annotations

import asyncio
import random
from collections import deque
from dataclasses import dataclass, field

import pytest
import redis
from scrapy.utils.test import get_crawler

from distcrawl.base.coverage import step_of
from distcrawl.frontier.store import FrontierKeys, FrontierStore
from distcrawl.node.observe.buffer import Observations
from distcrawl.node.observe.watch import AlertSettings, Watch
from distcrawl.node.scheduler.membership import Membership

WINDOW = 40
STEP = step_of(WINDOW)
SITE = "shop.test"
#: schedules per case
SCHEDULES = 50


@dataclass
class Node:
    observations: Observations
    membership: Membership
    watch: Watch
    lag: int
    #: products fetched, waiting for the pipeline to store them (oldest first)
    pending: deque[bool] = field(default_factory=deque)

    async def store_one(self) -> None:
        priced = self.pending.popleft()
        self.observations.stored(SITE, {"name": "x", "price": 9.5 if priced else None})
        await self.membership.tick({})
        await self.judge()

    async def beat(self) -> None:
        await self.membership.heartbeat({})
        await self.judge()

    async def judge(self) -> None:
        waiting = self.observations.to_judge
        while waiting:
            await self.watch.judge(*waiting.popitem())


def _node(client: redis.asyncio.Redis, keys: FrontierKeys, name: str, lag: int) -> Node:
    made = get_crawler(settings_dict={"DISTCRAWL_QUALITY_WINDOW": WINDOW})
    made._apply_settings()
    observations = Observations.of(made)
    store = FrontierStore(client, keys)
    membership = Membership(
        store=store,
        node_id=name,
        stats=made.stats,
        heartbeat_interval=3600.0,
        heartbeat_timeout=7200.0,
        observations=observations,
        early_spacing=0.0,
    )
    watch = Watch(
        store=store,
        observations=observations,
        stats=made.stats,
        spider=keys.spider,
        node_id=name,
        drop=0.2,
        alerts=AlertSettings(),
        mongo=("", "catalog"),
    )
    return Node(observations, membership, watch, lag)


async def _crawl(redis_url: str, seed: int, *, fall: bool) -> tuple[list[dict], int, int]:
    """One schedule: the findings of the crawl, the products it counted and those stored."""
    rng = random.Random(seed)
    keys = FrontierKeys(f"c{seed}-{fall}", f"c{seed}-{fall}:start_urls", shards=2)
    client = redis.asyncio.Redis.from_url(redis_url)
    try:
        nodes = [
            _node(client, keys, f"n{i}", lag=rng.randint(0, 2 * STEP))
            for i in range(rng.randint(2, 4))
        ]
        products = rng.randint(3 * WINDOW, 8 * WINDOW)
        switch = int(products * rng.uniform(0.3, 0.7))
        # a node's chance to beat on its interval per product (none: a crawl within a beat)
        beats = rng.choice([0.0, 0.002, 0.01, 0.05])
        for served in range(products):
            priced = served < switch if fall else rng.random() < 0.7
            rng.choice(nodes).pending.append(priced)
            for node in nodes:
                while len(node.pending) > node.lag or (node.pending and rng.random() < 0.3):
                    await node.store_one()
            if rng.random() < beats:
                await rng.choice(nodes).beat()
        for node in nodes:  # the pipelines drain, and each node leaves with a last beat
            while node.pending:
                await node.store_one()
            await node.beat()
        store = FrontierStore(client, keys)
        found, _ = await store.read_findings()
        counted = (await store.read_quality())[SITE].products
        return found, counted, products
    finally:
        await client.aclose()


@pytest.mark.parametrize("seed", range(SCHEDULES))
def test_a_fields_fall_is_found_once_whatever_the_nodes_schedule(redis_url: str, seed: int) -> None:
    found, counted, products = asyncio.run(_crawl(redis_url, seed, fall=True))
    assert counted == products
    assert [(f["site"], f["field"], f["baseline"]) for f in found] == [(SITE, "price", "earlier")]


@pytest.mark.parametrize("seed", range(SCHEDULES))
def test_a_share_that_moves_by_chance_is_no_finding(redis_url: str, seed: int) -> None:
    found, counted, products = asyncio.run(_crawl(redis_url, seed, fall=False))
    assert counted == products
    assert found == []
