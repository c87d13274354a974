"""The frontier store every test of the frontier's API runs against."""

from __future__ import annotations

import pytest
import redis
from frontier_state import clear_frontier

from distcrawl.frontier.store import FrontierKeys, FrontierStore


@pytest.fixture(
    params=[(1, True), (16, True), (16, False)], ids=["1-shard", "16-shards", "16-shards-eval"]
)
def store(redis_url: str, request: pytest.FixtureRequest) -> FrontierStore:
    """The script as a function library (FCALL) where the server has FUNCTION, and as an EVAL
    script (what Redis before 7 and Redis Cluster clients run)."""
    shards, functions = request.param
    client = redis.Redis.from_url(redis_url)
    keys = FrontierKeys("t", "t:start_urls", shards=shards)
    clear_frontier(client, keys)
    client.delete(keys.start_urls)
    return FrontierStore(client, keys, refresh=0.0, functions=functions)
