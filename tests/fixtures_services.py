"""Fixtures with real servers: a Redis-protocol server (valkey-server, append-only file on) and a
SecantusDB MongoDB-wire-protocol server, each on a free 127.0.0.1 port in a temporary directory,
started once per test module and killed by PID after it, even when a test failed.

- ``redis_server``: a :class:`distcrawl.servers.process.RedisServer` with ``.url``, ``.port``,
  ``.client()`` (redis-py, ``decode_responses=False``), ``.stop()``, ``.start()`` (same port,
  same data directory: the append-only file brings the data back), ``.restart()``, ``.kill()``.
- ``redis_url``: the URL, with the server running and emptied (FLUSHALL) for this test.
- ``mongo_server``: a :class:`distcrawl.servers.process.MongoServer` with ``.uri``
  (``directConnection=true``), ``.uri_for(db)``, ``.client()``, ``.stop()``, ``.start()``,
  ``.restart()``, ``.kill()``.
- ``mongo_uri``: a URI naming a database of its own for this test.
- ``redis_cli``: the path of the real ``redis-cli`` binary.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from distcrawl.servers.process import MongoServer, RedisServer, redis_cli_binary
from distcrawl.storage.writer import MongoWriter

_database_numbers = itertools.count(1)


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    home = tmp_path_factory.mktemp("redis")
    server = RedisServer(data_dir=home / "data", log_path=home / "redis.log")
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def redis_url(redis_server: RedisServer) -> str:
    """The URL of a running, empty Redis (a test that stopped the server gets it started)."""
    if not redis_server.running:
        redis_server.start()
    client = redis_server.client()
    try:
        client.flushall()
    finally:
        client.close()
    return redis_server.url


@pytest.fixture(scope="module")
def mongo_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MongoServer]:
    home = tmp_path_factory.mktemp("mongo")
    server = MongoServer(data_dir=home / "data", log_path=home / "mongo.log")
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def mongo_uri(mongo_server: MongoServer, request: pytest.FixtureRequest) -> str:
    """A URI on the module's MongoDB naming a fresh database (``t<n>_<test name>``)."""
    if not mongo_server.running:
        mongo_server.start()
    name = "".join(c if c.isalnum() else "_" for c in request.node.name)
    return mongo_server.uri_for(f"t{next(_database_numbers)}_{name}"[:60])


@pytest.fixture(scope="session")
def redis_cli() -> Path:
    return redis_cli_binary()


def mongo_writer(mongo_uri: str, **options: Any) -> MongoWriter:
    """A writer on the database *mongo_uri* names, collection ``products``; *options* override
    the defaults (history 20, majority and journal write concern, 5 s timeout)."""
    from pymongo.write_concern import WriteConcern

    defaults: dict[str, Any] = {
        "collection": "products",
        "history": 20,
        "write_concern": WriteConcern(w="majority", j=True),
        "timeout": 5.0,
    }
    database = mongo_uri.rsplit("/", 1)[1].split("?")[0]
    return MongoWriter(uri=mongo_uri, database=database, **{**defaults, **options})
