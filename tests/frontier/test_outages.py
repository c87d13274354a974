"""Every way a real Redis refuses the frontier's writes is an outage of its class, decided in
one place (:func:`distcrawl.frontier.outages.classify`): each class made by a real server as
production makes it, and any error reply of any class, as redis-py parses it, classified by
its class alone (Hypothesis)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
import redis.asyncio as aioredis
from hypothesis import given
from hypothesis import strategies as st
from redis._parsers.base import BaseParser
from redis_refusals import NODE_CLASSES, RefusingRedis, node_url, refusing

from distcrawl.frontier.batch import Child
from distcrawl.frontier.outages import OUTAGE_REPLIES, UNREACHABLE, classify, error_code
from distcrawl.frontier.store import FrontierKeys, FrontierStore
from distcrawl.servers.cluster import LocalRedisCluster

KEYS = FrontierKeys("o", "o:start_urls")
#: the classes a cluster answers (test_a_cluster_refusing_is_an_outage_of_its_class)
CLUSTER_CLASSES = ("CLUSTERDOWN", "TRYAGAIN")


def child(url: str) -> Child:
    return Child(url, 100, False, 0, "", json.dumps({"url": url}))


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RefusingRedis]:
    home = tmp_path_factory.mktemp("refusing")
    server = RefusingRedis(data_dir=home / "data", log_path=home / "redis.log").start()
    try:
        yield server
    finally:
        server.stop()


async def node_calls(url: str) -> list[BaseException]:
    """What a node sends: a heartbeat, a round trip with a link and a lease, a read of the
    crawl's state, and a plain read as ``status`` makes; the errors Redis answered (none: it
    served them all)."""
    client = aioredis.from_url(url, socket_timeout=10, socket_connect_timeout=5)
    store = FrontierStore(client, KEYS)
    errors: list[BaseException] = []
    calls = (
        lambda: store.heartbeat("n", "{}"),
        lambda: store.sync("n", children=[child(f"http://a.test/{time.monotonic()}")], lease=1),
        store.drained,
        lambda: client.hgetall("{o}:counters"),
    )
    try:
        for call in calls:
            try:
                await call()
            except Exception as exc:
                errors.append(exc)
    finally:
        await client.aclose()
    return errors


def test_every_outage_class_has_a_real_server_test() -> None:
    assert set(NODE_CLASSES) | set(CLUSTER_CLASSES) == set(OUTAGE_REPLIES)


@pytest.mark.parametrize("code", NODE_CLASSES)
def test_each_way_a_real_redis_refuses_the_frontier_is_an_outage_of_its_class(
    server: RefusingRedis, code: str
) -> None:
    assert asyncio.run(node_calls(node_url(server, code))) == []
    with refusing(server, code) as url:
        errors = asyncio.run(node_calls(url))
    assert errors, f"{code}: Redis served every call"
    seen = {error_code(e) for e in errors}
    # a replica of a master out of reach refuses writes as READONLY, reads as MASTERDOWN
    assert code in seen, (code, errors)
    for exc in errors:
        outage = classify(exc)
        assert outage is not None and outage.code in (code, "READONLY"), (code, exc)
        assert outage is OUTAGE_REPLIES[outage.code]
    # the refusal is over: Redis serves the node again
    assert asyncio.run(node_calls(node_url(server, code))) == []


def test_a_runner_whose_acl_refuses_fcall_uses_evalsha_and_a_refused_load_is_an_outage(
    server: RefusingRedis,
) -> None:
    admin = server.admin()
    try:
        admin.execute_command("FUNCTION", "FLUSH")
        admin.execute_command("ACL", "SETUSER", "crawler", "-fcall", "-function")
        client = redis.Redis.from_url(node_url(server))
        store = FrontierStore(client, KEYS)
        assert store.sync("n", children=[child("http://a.test/acl")]).added == 1
        assert not store.runner.functions
        client.close()
        admin.execute_command("ACL", "SETUSER", "crawler", "+@all")
        # a fresh server that cannot take the library now (out of memory): an outage, and
        # the node keeps its functions for when it is over
        admin.execute_command("FUNCTION", "FLUSH")
        with refusing(server, "OOM") as url:
            client = redis.Redis.from_url(url)
            store = FrontierStore(client, KEYS)
            with pytest.raises(redis.RedisError) as refused:
                store.sync("n", children=[child("http://a.test/oom")])
            assert error_code(refused.value) == "OOM"
        assert store.sync("n", children=[child("http://a.test/oom")]).added == 1
        assert store.runner.functions
        client.close()
    finally:
        admin.execute_command("ACL", "SETUSER", "crawler", "+@all")
        admin.close()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalRedisCluster]:
    cluster = LocalRedisCluster(Path(tmp_path_factory.mktemp("refusing-cluster")), masters=2)
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


def test_a_cluster_refusing_is_an_outage_of_its_class(cluster: LocalRedisCluster) -> None:
    m0, m1 = cluster.masters
    c0 = m0.client()
    slot = int(c0.execute_command("CLUSTER", "KEYSLOT", "{t}a"))
    c0.close()
    owner, other = (m0, m1) if slot < 8192 else (m1, m0)
    oc = owner.client()
    try:
        # a slot moving to another master: a request for several keys, some gone, must wait
        oc.set("{t}a", 1)
        oc.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", cluster._myid(other))
        with pytest.raises(redis.RedisError) as moving:
            oc.mget("{t}a", "{t}b")
        oc.execute_command("CLUSTER", "SETSLOT", slot, "STABLE")
        assert classify(moving.value) is OUTAGE_REPLIES["TRYAGAIN"]
        # a slot no master serves: the whole cluster is down
        oc.execute_command("CLUSTER", "DELSLOTS", slot)
        down: list[BaseException] = []

        def refused() -> bool:
            try:
                oc.set("{t}a", 2)
            except redis.RedisError as exc:
                down.append(exc)
                return True
            return False

        deadline = time.monotonic() + 60
        while not refused() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert down and classify(down[0]) is OUTAGE_REPLIES["CLUSTERDOWN"]
    finally:
        oc.execute_command("CLUSTER", "ADDSLOTS", slot)
        oc.close()
    cluster.wait_ready()


# -- any error reply, as redis-py parses it ---------------------------------------------------

codes = st.one_of(
    st.sampled_from(sorted(OUTAGE_REPLIES)),
    # ASK and MOVED carry a slot and an address (a cluster client follows them); ERR: below
    st.from_regex(r"[A-Z][A-Z0-9_]{0,15}", fullmatch=True).filter(
        lambda c: c not in ("ASK", "MOVED", "ERR")
    ),
)
#: an error's text, after its class (free text; none starts with a word of capitals)
messages = st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc")), max_size=80).map(
    lambda t: "x" + t.strip()
)


def parsed(reply: str) -> redis.RedisError:
    """The exception redis-py raises for the error reply *reply* (its own parser)."""
    exc = BaseParser.parse_error(reply)
    assert isinstance(exc, redis.RedisError)
    return exc


@given(code=codes, message=messages, number=st.integers(1, 99))
def test_an_error_reply_is_classified_by_its_class_wherever_it_comes_from(
    code: str, message: str, number: int
) -> None:
    want = OUTAGE_REPLIES.get(code)
    exc = parsed(f"{code} {message}")
    assert classify(exc) == want
    # the same reply met by a command of a pipeline (redis-py notes which command), on a
    # redis-py that kept no class (it strips the class of the replies it has a class for)
    noted = parsed(f"{code} {message}")
    noted.status_code = None
    noted.args = (f"Command # {number} (EVALSHA abc 1 {{o}}) of pipeline caused error: "
                  f"{noted.args[0]}",)  # fmt: skip
    if isinstance(noted, redis.AuthenticationError):
        # one class for both in redis-py: without the reply's first word, an auth error
        assert classify(noted) in (OUTAGE_REPLIES["NOAUTH"], OUTAGE_REPLIES["WRONGPASS"])
    else:
        assert classify(noted) == want
    # the same reply met by a script on a Redis before 7, inside its ERR
    wrapped = parsed(
        f"ERR Error running script (call to f_0): @user_script:{number}: "
        f"@user_script: {number}: -{code} {message}"
    )
    assert classify(wrapped) == want


def test_an_err_reply_is_no_outage_unless_it_wraps_one() -> None:
    assert classify(parsed("ERR unknown command 'FOO'")) is None
    assert classify(parsed("ERR max number of clients reached")) is UNREACHABLE
    # redis-py's own classes of ERR replies about passwords: the auth outage
    assert classify(parsed("ERR invalid password")) is OUTAGE_REPLIES["WRONGPASS"]
    assert classify(redis.ConnectionError("refused")) is UNREACHABLE
    assert classify(redis.TimeoutError("timed out")) is UNREACHABLE
    assert classify(OSError("reset")) is UNREACHABLE
    assert classify(ValueError("bad payload")) is None
    assert classify(parsed("WRONGTYPE Operation against a key")) is None
