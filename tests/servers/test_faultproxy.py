"""The fault-injecting Redis proxy against a real valkey-server: without faults every reply
passes intact (pipelines, transactions, pub/sub, scripts and functions, RESP2 and RESP3, the
frontier's own calls); each fault does what it says; on a Redis Cluster clients keep going
through the proxies."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from distcrawl.frontier import connection
from distcrawl.frontier.store import Child, FrontierKeys, FrontierStore
from distcrawl.servers.cluster import LocalRedisCluster
from distcrawl.servers.faultproxy import ERRORS, ClusterFaultProxy, Fault, FaultProxy
from distcrawl.servers.process import RedisServer


@pytest.fixture
def proxy(redis_url: str) -> Iterator[FaultProxy]:
    with FaultProxy(redis_url, seed=1) as p:
        yield p


@pytest.fixture(params=[2, 3], ids=["resp2", "resp3"])
def client(proxy: FaultProxy, request: pytest.FixtureRequest) -> Iterator[redis.Redis]:
    c = redis.Redis.from_url(proxy.url, protocol=request.param, socket_timeout=30)
    try:
        yield c
    finally:
        c.close()


@pytest.fixture
def direct(redis_url: str) -> Iterator[redis.Redis]:
    c = redis.Redis.from_url(redis_url, socket_timeout=30)
    try:
        yield c
    finally:
        c.close()


def wait_for(condition: Callable[[], Any], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met"
        time.sleep(0.01)


# -- without faults: every reply intact --------------------------------------------------------

OPS = st.lists(
    st.one_of(
        st.tuples(st.just("SET"), st.sampled_from("abc"), st.binary(max_size=300)),
        st.tuples(st.just("GET"), st.sampled_from("abc")),
        st.tuples(st.just("HSET"), st.just("h"), st.binary(max_size=8), st.binary(max_size=50)),
        st.tuples(st.just("HGETALL"), st.just("h")),
        st.tuples(st.just("ZADD"), st.just("z"), st.integers(-5, 5), st.binary(max_size=8)),
        st.tuples(st.just("ZRANGE"), st.just("z"), st.just(0), st.just(-1), st.just("WITHSCORES")),
        st.tuples(st.just("RPUSH"), st.just("l"), st.binary(max_size=30)),
        st.tuples(st.just("LRANGE"), st.just("l"), st.just(0), st.just(-1)),
        st.tuples(st.just("INCRBYFLOAT"), st.just("f"), st.floats(-10, 10, allow_nan=False)),
        st.tuples(st.just("EXISTS"), st.sampled_from("abchzlf")),
        st.tuples(st.just("LPOP"), st.just("nothing")),
        st.tuples(st.just("HGET"), st.just("h"), st.just("missing")),
        st.tuples(st.just("INCR"), st.just("a")),  # an error reply when a holds no integer
    ),
    min_size=1,
    max_size=25,
)


def _run(c: redis.Redis, ops: list[tuple[Any, ...]]) -> list[Any]:
    pipe = c.pipeline(transaction=False)
    for op in ops:
        pipe.execute_command(*op)
    return [repr(r) if isinstance(r, Exception) else r for r in pipe.execute(raise_on_error=False)]


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(ops=OPS, protocol=st.sampled_from([2, 3]))
def test_replies_through_the_proxy_are_the_servers_own(
    proxy: FaultProxy, redis_url: str, ops: list[tuple[Any, ...]], protocol: int
) -> None:
    """The same pipeline on database 1 through the proxy and on database 2 directly."""
    base = redis_url.rsplit("/", 1)[0]
    via = redis.Redis.from_url(f"redis://127.0.0.1:{proxy.port}/1", protocol=protocol)
    plain = redis.Redis.from_url(f"{base}/2", protocol=protocol)
    try:
        via.flushdb()
        plain.flushdb()
        assert _run(via, ops) == _run(plain, ops)
    finally:
        via.close()
        plain.close()


def test_large_values_transactions_scripts_and_functions_pass_intact(
    client: redis.Redis, direct: redis.Redis
) -> None:
    big = bytes(range(256)) * 8192  # 2 MiB, every byte value
    assert client.set("big", big)
    assert client.get("big") == big
    pipe = client.pipeline(transaction=True)
    pipe.incr("n").incr("n").get("n")
    assert pipe.execute() == [1, 2, b"2"]
    script = "return {KEYS[1], ARGV[1], redis.call('INCR', KEYS[1])}"
    sha = client.script_load(script)
    assert client.evalsha(sha, 1, "n", "x") == [b"n", b"x", 3]
    client.function_load(
        "#!lua name=t\nredis.register_function('t_echo', function(k, a) return a[1] end)",
        replace=True,
    )
    assert client.fcall("t_echo", 0, "hello") == b"hello"
    assert direct.get("n") == b"3"


def test_pub_sub_passes_through(client: redis.Redis, direct: redis.Redis) -> None:
    sub = client.pubsub()
    sub.subscribe("wake")
    assert sub.get_message(timeout=30)["type"] == "subscribe"
    direct.publish("wake", "0")
    message = sub.get_message(timeout=30)
    assert message is not None and message["data"] == b"0"
    sub.close()


def test_the_frontier_runs_through_the_proxy(proxy: FaultProxy) -> None:
    store = FrontierStore(redis.Redis.from_url(proxy.url), FrontierKeys("p", "p:start_urls"))
    payload = json.dumps({"url": "http://a.test/x"})
    assert store.sync("n1", children=[Child("x", 100, False, 0, "a.test", payload)]).added == 1
    leased = store.sync("n1", lease=5).leased
    assert [json.loads(item.payload)["url"] for item in leased] == ["http://a.test/x"]
    assert store.sync("n1", acks=[item.lease for item in leased]).acked == 1
    assert store.drained() == [0, 0, 0, 0, 0]


# -- each fault does what it says --------------------------------------------------------------


@pytest.mark.parametrize("error", sorted(ERRORS))
def test_an_error_fault_answers_its_class_and_runs_nothing(
    proxy: FaultProxy, client: redis.Redis, direct: redis.Redis, error: str
) -> None:
    direct.set("k", "old")
    fault = proxy.add(Fault("error", error=error))
    with pytest.raises(redis.RedisError) as refused:
        client.set("k", "new")
    assert direct.get("k") == b"old"
    expected = ERRORS[error][0].split(" ", 1)
    text = str(refused.value)
    # redis-py strips the class word of the classes it knows (OOM, LOADING, ...)
    assert text.startswith(expected[0]) or expected[1].format(command="set").startswith(text)
    _, scope = ERRORS[error]
    if scope != "all":
        assert client.info("server")  # the server's own commands are served
    if scope == "writes":
        assert client.get("k") == b"old"  # a read is served
    else:
        with pytest.raises(redis.RedisError):
            client.get("k")
    assert fault.hits >= 1
    proxy.remove(fault)
    assert client.set("k", "new")
    assert direct.get("k") == b"new"


def test_a_refused_command_inside_a_transaction_aborts_it(
    proxy: FaultProxy, client: redis.Redis, direct: redis.Redis
) -> None:
    proxy.add(Fault("error", error="OOM", match=("SET",), count=1))
    pipe = client.pipeline(transaction=True)
    pipe.incr("n").set("k", "v").incr("n")
    with pytest.raises(redis.RedisError):
        pipe.execute()
    assert direct.get("n") is None and direct.get("k") is None
    # the connection is usable after it
    assert client.incr("n") == 1


def test_a_dropped_reply_was_written_and_the_client_never_heard(
    proxy: FaultProxy, client: redis.Redis, direct: redis.Redis
) -> None:
    fault = proxy.add(Fault("drop", match=("INCRBY",), count=1))
    with pytest.raises(redis.ConnectionError):
        client.incrby("n", 5)
    assert direct.get("n") == b"5"
    assert fault.hits == 1 and not proxy.faults  # spent
    assert client.incrby("n", 1) == 6


def test_a_cut_reply_closes_the_connection_half_way(
    proxy: FaultProxy, client: redis.Redis, direct: redis.Redis
) -> None:
    direct.set("k", "x" * 1000)
    proxy.add(Fault("cut", match=("GET",), count=1))
    with pytest.raises(redis.ConnectionError):
        client.get("k")
    assert client.get("k") == b"x" * 1000


def test_a_delayed_reply_comes_late_and_whole(proxy: FaultProxy, redis_url: str) -> None:
    proxy.add(Fault("delay", match=("GET",), seconds=1.0))
    impatient = redis.Redis.from_url(proxy.url, socket_timeout=0.2)
    patient = redis.Redis.from_url(proxy.url, socket_timeout=60)
    try:
        patient.set("k", "v")
        with pytest.raises(redis.TimeoutError):
            impatient.get("k")
        assert patient.get("k") == b"v"
    finally:
        impatient.close()
        patient.close()


def test_a_stalled_reply_waits_until_the_fault_is_removed(
    proxy: FaultProxy, client: redis.Redis, direct: redis.Redis
) -> None:
    fault = proxy.add(Fault("stall", match=("INCRBY",)))
    got: list[int] = []
    worker = threading.Thread(target=lambda: got.append(client.incrby("n", 1)))
    worker.start()
    wait_for(lambda: direct.get("n") == b"1")  # it ran; its reply waits in the proxy
    assert worker.is_alive() and not got
    proxy.remove(fault)
    worker.join(30)
    assert got == [1]


def test_a_stalled_proxy_moves_nothing_either_way_until_resumed(
    proxy: FaultProxy, client: redis.Redis, direct: redis.Redis
) -> None:
    client.ping()
    proxy.stall()
    got: list[Any] = []
    worker = threading.Thread(target=lambda: got.append(client.incrby("n", 1)))
    worker.start()
    wait_for(lambda: proxy.stats().get("commands", 0) >= 2)  # the proxy has the command
    assert direct.get("n") is None and worker.is_alive()
    proxy.resume()
    worker.join(30)
    assert got == [1]


def test_disconnect_and_refuse(proxy: FaultProxy, client: redis.Redis) -> None:
    client.ping()
    proxy.refuse()
    proxy.disconnect()
    with pytest.raises(redis.ConnectionError):
        client.ping()
    proxy.refuse(False)
    assert client.ping()


def test_a_fault_with_a_count_and_a_probability_picks_that_many(
    proxy: FaultProxy, client: redis.Redis
) -> None:
    client.ping()  # the connection made before the fault
    fault = proxy.add(Fault("error", error="BUSY", match=("SET",), probability=0.5, count=5))
    refused = 0
    for _ in range(200):
        try:
            client.set("k", "v")
        except redis.RedisError:
            refused += 1
    assert refused == 5 == fault.hits
    assert proxy.stats()["faults/BUSY"] == 5


def test_a_fault_matches_a_frontier_command_by_its_function(redis_url: str) -> None:
    with FaultProxy(redis_url) as proxy:
        store = FrontierStore(redis.Redis.from_url(proxy.url), FrontierKeys("p", "p:start_urls"))
        store.heartbeat("n1", "{}")
        fault = proxy.add(Fault("error", error="MISCONF", match=("FCALL distcrawl_*_heartbeat",)))
        payload = json.dumps({"url": "http://a.test/x"})
        assert store.sync("n1", children=[Child("x", 1, False, 0, "a.test", payload)]).added == 1
        with pytest.raises(redis.ResponseError, match="MISCONF"):
            store.heartbeat("n1", "{}")
        assert fault.hits == 1


def test_a_server_out_of_reach_closes_the_clients_connection(tmp_path: Any) -> None:
    server = RedisServer(data_dir=tmp_path / "data", log_path=tmp_path / "redis.log")
    server.start()
    try:
        with FaultProxy(server.url) as proxy:
            c = redis.Redis.from_url(proxy.url, socket_timeout=30)
            assert c.set("k", "v")
            server.stop()
            with pytest.raises(redis.ConnectionError):
                c.get("k")
            server.start()
            assert c.get("k") == b"v"  # the append-only file brought it back
            c.close()
    finally:
        server.stop()


# -- a Redis Cluster ---------------------------------------------------------------------------


def test_a_cluster_client_keeps_going_through_the_proxies(
    redis_cluster: LocalRedisCluster, redis_cluster_url: str
) -> None:
    masters = [(m.host, m.port) for m in redis_cluster.masters]
    with ClusterFaultProxy(masters, seed=3) as proxies:
        c = connection.client(proxies.url)
        try:
            for i in range(60):
                c.set(f"k{i}", i)
            ports = {p.port for p in proxies.proxies}
            assert {n.port for n in c.get_nodes()} == ports
            # a redirect names a proxy too
            first = redis.Redis(host="127.0.0.1", port=proxies.proxies[0].port)
            moved = [e for e in (_error(first, f"k{i}") for i in range(60)) if e]
            assert moved and all(int(m.rsplit(":", 1)[1]) in ports for m in moved)
            first.close()
            # every key is on the masters behind them
            assert sum(int(m.client().dbsize()) for m in redis_cluster.masters) == 60
            # a fault on every proxy reaches a cluster client wherever its key lives
            faults = proxies.add(Fault("error", error="CLUSTERDOWN"))
            with pytest.raises(redis.RedisError):
                c.get("k1")
            proxies.remove(faults)
            assert c.get("k1") == b"1"
            proxies.clear()
        finally:
            c.close()


def _error(c: redis.Redis, key: str) -> str | None:
    try:
        c.get(key)
    except redis.exceptions.ResponseError as exc:
        return str(exc)
    return None


def test_an_error_fault_of_several_classes_answers_each_command_with_one_of_them(
    proxy: FaultProxy, client: redis.Redis, direct: redis.Redis
) -> None:
    client.ping()
    fault = proxy.add(Fault("error", error="OOM,LOADING,UNKNOWN", match=("SET",)))
    seen = set()
    for _ in range(60):
        with pytest.raises(redis.RedisError) as refused:
            client.set("k", "v")
        seen.add(str(refused.value).split(" ", 1)[0])
    assert direct.get("k") is None
    assert fault.hits == 60
    stats = proxy.stats()
    assert {k for k in stats if k.startswith("faults/")} == {
        "faults/OOM",
        "faults/LOADING",
        "faults/UNKNOWN",
    }
    assert len(seen) == 3  # OOM and LOADING with their class word stripped by redis-py
