"""A lease hands requests out in queue order (best priority first, then first in, first out),
whatever form their entries take: a pushed request's entry carries its payload, one returned
to the queue (a release, a recovery) is a bare id whose payload waits beside the queue."""

from __future__ import annotations

import hashlib
import json

import pytest
import redis
from frontier_state import clear_frontier

from distcrawl.frontier.store import Child, FrontierKeys, FrontierStore

SITE = "o.test"


@pytest.fixture(params=[1, 16], ids=["1-shard", "16-shards"])
def store(redis_url: str, request: pytest.FixtureRequest) -> FrontierStore:
    client = redis.Redis.from_url(redis_url)
    keys = FrontierKeys("lo", "lo:start_urls", shards=request.param)
    clear_frontier(client, keys)
    return FrontierStore(client, keys, refresh=0.0)


def child(path: str, priority: int) -> Child:
    """A request as a node pushes it: a digest, its site, a compact payload naming it."""
    url = f"http://{SITE}/{path}"
    payload = json.dumps({"u": url}, separators=(",", ":"))
    return Child(hashlib.sha1(url.encode()).digest(), priority, False, 0, SITE, payload)


def paths(store: FrontierStore, node: str, n: int) -> list[str]:
    """What ``node`` leases, asking for ``n`` at a time until nothing is left, in order."""
    out: list[str] = []
    while leased := store.sync(node, lease=n).leased:
        out += [json.loads(x.payload)["u"].rsplit("/", 1)[1] for x in leased]
    return out


@pytest.mark.parametrize("returned_priority", [0, 100], ids=["same-priority", "higher"])
def test_a_returned_request_is_handed_out_in_its_place(
    store: FrontierStore, returned_priority: int
) -> None:
    store.sync("a", children=[child("old", returned_priority)])
    (old,) = store.sync("a", lease=1).leased
    store.sync("a", children=[child("new1", 0), child("new2", 0)])
    assert store.release("a", [old.lease]) == 1  # back in the queue, ahead of the newer ones
    assert paths(store, "b", 3) == ["old", "new1", "new2"]
