"""DirectPipe (wire.py) against redis-py's pipeline on a real server: every command the frontier
sends, in generated round trips, answers the same (values, error replies in their places, the
client's response callbacks); a connection killed between round trips is reconnected as the
pipeline reconnects it; clients it does not serve keep the pipeline."""

from __future__ import annotations

import asyncio
from typing import Any

import redis
import redis.asyncio as aioredis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from distcrawl.frontier.protocol.runner import Runner
from distcrawl.frontier.protocol.wire import DirectPipe

_SCRIPT = "return {KEYS[1], ARGV[1], #ARGV, redis.call('INCR', KEYS[1])}"
_texts = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
_values = st.one_of(_texts, st.binary(max_size=12), st.integers(-(2**40), 2**40))
_keys = st.sampled_from(["k:a", "k:b", "k:h", "k:z", "k:l", "k:s"])


def _commands(sha: str) -> st.SearchStrategy[tuple[Any, ...]]:
    """The commands the frontier sends (runner.redis_command's names, FCALL and EVALSHA), with
    values that fit them and values that do not (error replies)."""
    return st.one_of(
        st.tuples(st.sampled_from(["GET", "EXISTS", "DEL", "ZCARD", "HKEYS", "HGETALL"]), _keys),
        st.tuples(st.just("SET"), _keys, _values),
        st.tuples(st.sampled_from(["HSET", "HSETNX"]), _keys, _texts, _values),
        st.tuples(st.sampled_from(["HGET", "HDEL", "ZSCORE"]), _keys, _texts),
        st.tuples(st.just("HMGET"), _keys, _texts, _texts),
        st.tuples(st.just("HINCRBY"), _keys, _texts, st.integers(-5, 5)),
        st.tuples(st.just("ZADD"), _keys, st.integers(-9, 9), _texts),
        st.tuples(st.just("ZREVRANGE"), _keys, st.just(0), st.just(-1)),
        st.tuples(st.just("ZCOUNT"), _keys, st.just("-inf"), st.just("+inf")),
        st.tuples(st.just("LRANGE"), _keys, st.just(0), st.just(-1)),
        st.tuples(st.just("SMISMEMBER"), _keys, _texts, _texts),
        st.tuples(st.just("PUBLISH"), st.just("wake"), _texts),
        st.tuples(st.just("TIME")),
        st.tuples(st.just("EVALSHA"), st.sampled_from([sha, "0" * 40]), st.just(1), _keys, _values),
        st.tuples(st.just("NOSUCHCOMMAND"), _values),
    )


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, Exception) or isinstance(b, Exception):
        return type(a) is type(b) and str(a) == str(b)
    if a == b:
        return True
    # TIME moves between the two round trips
    return isinstance(a, tuple) and isinstance(b, tuple) and len(a) == len(b) == 2


def _sha(url: str) -> str:
    c = redis.Redis.from_url(url)
    try:
        return str(c.script_load(_SCRIPT))
    finally:
        c.close()


async def _both(url: str, rounds: list[list[tuple[Any, ...]]]) -> list[tuple[list, list]]:
    direct_client = aioredis.from_url(url)
    pipe_client = aioredis.from_url(url)
    direct = DirectPipe.of(direct_client)
    assert direct is not None
    out = []
    try:
        await direct_client.flushdb()
        for commands in rounds:
            got = await direct.execute(commands)
            await pipe_client.flushdb()  # the same state before each
            await direct_client.flushdb()
            pipe = pipe_client.pipeline(transaction=False)
            for command in commands:
                pipe.execute_command(*command)
            want = await pipe.execute(raise_on_error=False)
            await pipe_client.flushdb()
            again = await direct.execute(commands)
            await pipe_client.flushdb()
            assert got == again or all(map(_same, got or [], again or []))
            out.append((again, list(want)))
    finally:
        await direct_client.aclose()
        await pipe_client.aclose()
    return out


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_a_direct_round_trip_answers_as_the_pipeline(redis_url: str, data: st.DataObject) -> None:
    sha = _sha(redis_url)
    rounds = data.draw(st.lists(st.lists(_commands(sha), min_size=1, max_size=8), max_size=4))
    for got, want in asyncio.run(_both(redis_url, rounds)):
        assert len(got) == len(want)
        assert all(_same(g, w) for g, w in zip(got, want, strict=True)), (got, want)


def test_a_killed_connection_fails_as_the_pipeline_and_the_next_round_trip_reconnects(
    redis_url: str,
) -> None:
    """The client's retry policy decides, as for the pipeline (redis-py's default: none, so
    the round trip raises ConnectionError and the I/O loop reconciles)."""

    def kill() -> None:
        admin = redis.Redis.from_url(redis_url)
        try:
            admin.execute_command("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")
        finally:
            admin.close()

    async def run() -> tuple[list[str], list[Any]]:
        client = aioredis.from_url(redis_url)
        direct = DirectPipe.of(client)
        assert direct is not None
        errors = []
        try:
            for way in ("pipeline", "direct"):
                await client.set("k", "1")  # the pool's one connection is connected
                kill()
                try:
                    if way == "pipeline":
                        pipe = client.pipeline(transaction=False)
                        pipe.get("k")
                        await pipe.execute(raise_on_error=False)
                    else:
                        await direct.execute([("GET", "k")])
                except redis.ConnectionError as exc:
                    errors.append(f"{way}: {type(exc).__name__}")
            replies = await direct.execute([("GET", "k"), ("HGETALL", "k:none")])
            assert replies is not None
            return errors, replies
        finally:
            await client.aclose()

    errors, replies = asyncio.run(run())
    assert errors == ["pipeline: ConnectionError", "direct: ConnectionError"]
    assert replies == [b"1", {}]


def test_only_a_plain_client_of_one_server_goes_direct(redis_url: str) -> None:
    async def run() -> None:
        plain = aioredis.from_url(redis_url)
        texts = aioredis.from_url(redis_url, decode_responses=True)
        resp3 = aioredis.from_url(redis_url, protocol=3)
        latin = aioredis.from_url(redis_url, encoding="latin-1")
        try:
            assert DirectPipe.of(plain) is not None
            assert Runner(plain).direct is not None
            for client in (texts, resp3, latin):
                assert DirectPipe.of(client) is None
                assert Runner(client).direct is None
            assert DirectPipe.of(redis.Redis.from_url(redis_url)) is None  # blocking
            runner = Runner(plain)
            first = runner.direct
            runner.client = texts  # a client replaced (a test's new event loop)
            assert runner.direct is None
            runner.client = plain
            assert runner.direct is not None and runner.direct is not first
        finally:
            for c in (plain, texts, resp3, latin):
                await c.aclose()

    asyncio.run(run())
