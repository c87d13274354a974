"""Error replies of a class no node knows (the fault proxy answers them for every data
command), for longer than the heartbeat timeout: the nodes retry, and once Redis serves again
none of them takes another for dead, since everyone's heartbeats failed alike."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
import redis
from crawl_nodes import assert_each_product_once, start_nodes, stop_all, wait_for
from frontier_state import KEYS, leased

from distcrawl.demo.server import DemoShop
from distcrawl.servers.faultproxy import Fault, FaultProxy

pytestmark = pytest.mark.slow

#: DISTCRAWL_HEARTBEAT_TIMEOUT of the nodes (s): room for a loaded machine, and the fault
#: outlasts it
TIMEOUT = 8.0


def test_unknown_error_replies_longer_than_the_heartbeat_timeout_recover_no_live_node(
    redis_url: str, mongo_uri: str, shop_factory: Callable[..., DemoShop], tmp_path: Path
) -> None:
    shop = shop_factory(products=200, latency_ms=100)
    direct = redis.Redis.from_url(redis_url)
    settings = {"DISTCRAWL_HEARTBEAT_TIMEOUT": str(TIMEOUT), "CONCURRENT_REQUESTS": "4"}
    with FaultProxy(redis_url) as proxy:
        nodes = start_nodes(
            ("e1", "e2"),
            redis_url=proxy.url,
            mongo_uri=mongo_uri,
            log_dir=tmp_path,
            settings=settings,
        )
        try:
            direct.lpush(KEYS.start_urls, shop.url)
            assert wait_for(lambda: leased(direct, "e1") > 0 and leased(direct, "e2") > 0, 120)
            fault = proxy.add(Fault("error", error="UNKNOWN"))
            time.sleep(TIMEOUT * 1.5)  # the fault: every heartbeat fails meanwhile
            proxy.remove(fault)
            assert [n.wait() for n in nodes] == [0, 0]
        finally:
            stop_all(nodes)
    assert fault.hits > 0
    logs = "".join(n.log() for n in nodes)
    assert "Frontier loop error" in logs and "works again" in logs
    assert "Recovered" not in logs
    assert direct.hget(KEYS.counters, "recovered_nodes") is None
    fetched = Counter(
        e["path"] for e in shop.request_log() if e["status"] == 200 and "robots" not in e["path"]
    )
    assert fetched and max(fetched.values()) == 1, fetched.most_common(3)
    assert_each_product_once(mongo_uri, shop)
    direct.close()
