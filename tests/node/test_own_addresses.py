"""A node never fetches its own Redis, its MongoDB or a dashboard of its crawl, whatever
DISTCRAWL_ALLOW_PRIVATE allows: generated URLs (Hypothesis) name them in every notation an
address takes, against real servers and the system's resolver; the same hosts on other ports
stay allowed."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scrapy.statscollectors import MemoryStatsCollector
from scrapy.utils.test import get_crawler

from distcrawl.frontier.keys import FrontierKeys
from distcrawl.frontier.store import FrontierStore
from distcrawl.node.middlewares.own import OwnAddresses, endpoints
from distcrawl.node.middlewares.safety import AddressGuardMiddleware, Refused
from distcrawl.web.app import WebConfig
from distcrawl.web.server import DashboardServer

KEYS = FrontierKeys("own", "own:start_urls")

#: ways to write a loopback address in a URL (the system's resolver reads the names)
LOOPBACK = (
    "127.0.0.1",
    "localhost",
    "LOCALHOST",
    "127.1",
    "2130706433",
    "0x7f000001",
    "0177.0.0.1",
    "[::1]",
    "[::ffff:127.0.0.1]",
    "0.0.0.0",
    "127.0.0.2",
)


async def system_resolver(host: str, port: int) -> list[str]:
    """The system's answer, as the reactor's resolver gives it (nothing for an unknown name)."""
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror:
        return []
    return [str(info[4][0]) for info in infos]


@pytest.fixture
def dashboard(redis_url: str) -> Iterator[DashboardServer]:
    config = WebConfig(
        keys=KEYS,
        redis_url=redis_url,
        heartbeat_timeout=30.0,
        token=None,
        allow_private=frozenset(),
    )
    server = DashboardServer(config, host="127.0.0.1").start()
    try:
        yield server
    finally:
        server.stop()


def guard(redis_url: str, mongo_uri: str) -> tuple[AddressGuardMiddleware, OwnAddresses]:
    own = OwnAddresses(endpoints(redis_url, mongo_uri), resolve=system_resolver)
    stats = MemoryStatsCollector(get_crawler())
    mw = AddressGuardMiddleware(stats=stats, allow_private=True, resolve=system_resolver, own=own)
    return mw, own


def outcome(mw: AddressGuardMiddleware, own: OwnAddresses, redis_url: str, url: str) -> str:
    """``own_address``, another refusal's reason, or ``fetched``."""

    async def run() -> str:
        import redis.asyncio as aioredis

        client = aioredis.from_url(redis_url)
        own.open(client, KEYS)
        try:
            await mw.check(url)
        except Refused as exc:
            return exc.reason
        finally:
            own.close()
            await client.aclose()
        return "fetched"

    return asyncio.run(run())


def test_the_node_knows_its_servers_from_its_settings() -> None:
    assert endpoints(
        "redis+cluster://10.0.0.1:7000,10.0.0.2:7001/0",
        "mongodb://user:pw@db1:27018,db2/catalog?replicaSet=rs",
    ) == [
        ("10.0.0.1", 7000, "Redis"),
        ("10.0.0.2", 7001, "Redis"),
        ("db1", 27018, "MongoDB"),
        ("db2", 27017, "MongoDB"),
    ]
    assert endpoints("redis://:secret@[::1]/0", "") == [("::1", 6379, "Redis")]


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    host=st.sampled_from(LOOPBACK),
    target=st.sampled_from(["Redis", "MongoDB", "dashboard"]),
    scheme=st.sampled_from(["http", "https"]),
    userinfo=st.sampled_from(["", "user@", "user:pw@"]),
    path=st.text(alphabet="abc/?=&%.", max_size=12),
    other_port=st.booleans(),
)
def test_own_servers_are_never_fetched_in_any_notation(
    redis_url: str,
    mongo_uri: str,
    dashboard: DashboardServer,
    host: str,
    target: str,
    scheme: str,
    userinfo: str,
    path: str,
    other_port: bool,
) -> None:
    ports = {
        "Redis": urlsplit(redis_url).port,
        "MongoDB": urlsplit(mongo_uri).port,
        "dashboard": dashboard.port,
    }
    asyncio.run(_announce(redis_url, dashboard))
    mw, own = guard(redis_url, mongo_uri)
    port = ports[target]
    if other_port:
        port = max(ports.values()) + 1  # nothing of the node's own there
    url = f"{scheme}://{userinfo}{host}:{port}/{path.lstrip('/')}"
    got = outcome(mw, own, redis_url, url)
    # DISTCRAWL_ALLOW_PRIVATE allows any address here: only the node's own are refused
    assert got == ("fetched" if other_port else "own_address"), url


async def _announce(redis_url: str, dashboard: DashboardServer) -> None:
    """What the running dashboard records every few seconds, recorded now."""
    import redis.asyncio as aioredis

    client = aioredis.from_url(redis_url)
    try:
        await FrontierStore(client, KEYS).announce_dashboard([f"127.0.0.1:{dashboard.port}"])
    finally:
        await client.aclose()


def test_a_dashboard_records_where_it_listens(redis_url: str, dashboard: DashboardServer) -> None:
    import redis

    r = redis.Redis.from_url(redis_url)
    store = FrontierStore(r, KEYS)
    try:
        deadline = time.monotonic() + 60
        while not store.dashboards() and time.monotonic() < deadline:
            time.sleep(0.05)  # its first record comes with its start
        assert store.dashboards() == [f"127.0.0.1:{dashboard.port}"]
    finally:
        r.close()
