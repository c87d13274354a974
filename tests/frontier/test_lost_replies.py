"""Replies lost after the command ran (the fault proxy runs it and drops the reply, as a
connection reset after Redis answered would): nothing the command did is stranded, the node
finds it again with its next call."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from distcrawl.frontier.store import FrontierKeys, FrontierStore
from distcrawl.servers.faultproxy import Fault, FaultProxy


@pytest.fixture
def proxy(redis_url: str) -> Iterator[FaultProxy]:
    with FaultProxy(redis_url) as p:
        yield p


@pytest.fixture(params=[1, 16], ids=["1-shard", "16-shards"])
def store(proxy: FaultProxy, request: pytest.FixtureRequest) -> Iterator[FrontierStore]:
    client = redis.Redis.from_url(proxy.url, socket_timeout=30)
    yield FrontierStore(client, FrontierKeys("l", "l:start_urls", shards=request.param))
    client.close()


def test_seeds_a_lost_take_moved_come_back_with_the_next_take(
    store: FrontierStore, proxy: FaultProxy, redis_url: str
) -> None:
    direct = redis.Redis.from_url(redis_url)
    direct.lpush("l:start_urls", "http://a.test/", "http://b.test/")
    proxy.add(Fault("drop", match=("FCALL distcrawl_*_take_seeds",), count=1))
    with pytest.raises(redis.ConnectionError):
        store.take_seeds("n1", 1)
    # the take ran: the seed waits in the node's taken list, which the node knows nothing of
    assert direct.llen(store.keys.seeds.taken("n1")) == 1
    # a node with no seed pending takes what its taken list holds first (its requests may be
    # in the crawl: they go through the dupefilter), then more
    taken = store.take_seeds("n1", 1, resume=True)
    assert (taken.again, taken.fresh) == ([b"http://a.test/"], [b"http://b.test/"])
    # a node whose taken seeds are pending reads none of them again
    assert store.take_seeds("n1", 1, resume=False) == ([], [])
    direct.close()
