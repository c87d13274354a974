"""The frontier's format version (spec.FORMAT): the first node of a crawl writes it into the
crawl's keys; a node or an operator command meeting another version refuses the crawl with a
message naming both, and changes nothing."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from crawl_nodes import Node, stop_all

from distcrawl.cli import main
from distcrawl.frontier.store import FORMAT, CrawlFormatError, FrontierKeys, FrontierStore

KEYS = FrontierKeys("catalog", "catalog:start_urls", shards=4)
OTHER = FORMAT + 1


@pytest.fixture
def r(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url)
    client.flushall()
    yield client
    client.flushall()
    client.close()


def test_the_first_claim_writes_the_format_and_later_ones_accept_it(r: redis.Redis) -> None:
    store = FrontierStore(r, KEYS)
    assert store.check_format() is None  # no node yet: nothing to check against
    assert store.claim("n1", json.dumps({"run": "1"}), 60_000).claimed
    assert r.get(KEYS.format) == str(FORMAT).encode()
    assert store.claim("n2", json.dumps({"run": "2"}), 60_000).claimed
    assert store.check_format() == FORMAT


def test_a_node_claim_in_a_crawl_of_another_format_is_refused_naming_both(r: redis.Redis) -> None:
    r.set(KEYS.format, OTHER)
    store = FrontierStore(r, KEYS)
    with pytest.raises(CrawlFormatError) as info:
        store.claim("n1", json.dumps({"run": "1"}), 60_000)
    message = str(info.value)
    assert f"format {OTHER}" in message and f"format {FORMAT}" in message
    assert "'catalog'" in message
    with pytest.raises(CrawlFormatError):
        store.check_format()
    # refused before anything was written: the node is no member, its id has no owner
    assert sorted(r.keys("*")) == [KEYS.format.encode()]


@pytest.mark.parametrize(
    "argv",
    [
        ("status", "catalog"),
        ("deadletters", "catalog", "list"),
        ("control", "catalog", "pause"),
        ("control", "catalog", "reset", "--yes-really", "--force"),
        ("migrate", "catalog"),
        ("seed", "catalog", "https://shop.test/other"),
        # without its token the dashboard may not listen there: it would exit 2, not refuse
        ("web", "catalog", "--no-store", "--host", "0.0.0.0"),
    ],
)
def test_operator_commands_refuse_a_crawl_of_another_format(
    r: redis.Redis, redis_url: str, capsys: pytest.CaptureFixture[str], argv: tuple[str, ...]
) -> None:
    r.set(KEYS.format, OTHER)
    r.lpush(KEYS.start_urls, "https://shop.test/")
    code = main([*argv, "-s", f"REDIS_URL={redis_url}", "-s", "DISTCRAWL_SHARDS=4"])
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert code == 2, errors  # refused, as a crawl of other crawl-wide settings is
    [message] = errors
    assert message.startswith("error: crawl 'catalog' is stored in frontier format")
    assert f"format {OTHER}" in message and f"format {FORMAT}" in message
    # nothing paused, nothing reset, nothing seeded
    assert sorted(r.keys("*")) == sorted([KEYS.format.encode(), KEYS.start_urls.encode()])
    assert r.llen(KEYS.start_urls) == 1


@pytest.mark.slow
def test_a_node_refuses_to_open_a_crawl_of_another_format(
    r: redis.Redis, redis_url: str, mongo_uri: str, tmp_path: Path
) -> None:
    keys = FrontierKeys("catalog", "catalog:start_urls")  # as the node names them
    r.set(keys.format, OTHER)
    r.lpush(keys.start_urls, "http://127.0.0.1:9/")
    node = Node(redis_url=redis_url, mongo_uri=mongo_uri, log_dir=tmp_path, node_id="late")
    try:
        assert node.wait(120) == 5  # EXIT_REFUSED
    finally:
        stop_all([node])
    log = node.log()
    assert "Node refuses to start" in log, log[-3000:]
    # one clear line, no traceback: the spider closes with the refusal as its reason
    assert len([line for line in log.splitlines() if " ERROR: " in line]) == 1, log[-3000:]
    assert "Traceback" not in log and "Spider closed (other_frontier_format)" in log
    assert f"frontier format {OTHER}; this distcrawl reads and writes format {FORMAT}" in log
    # it took nothing and wrote nothing: the seed waits, the crawl is as it was
    assert r.lrange(keys.start_urls, 0, -1) == [b"http://127.0.0.1:9/"]
    assert sorted(r.keys("*")) == sorted([keys.format.encode(), keys.start_urls.encode()])
