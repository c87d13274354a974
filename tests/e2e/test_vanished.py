"""A crawl whose state vanished from Redis mid-crawl (FLUSHALL, Redis restarted empty, the
database swapped for another) is noticed by its start marker: each node says so in one ERROR
line and exits 6, no page is fetched again, later nodes and commands refuse the crawl in one
line until `control reset`, and after the reset and a new seed the crawl runs again.
(Redis back with older data is a rewind, crawled on: tests/e2e/test_rewind.py.)"""

from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from crawl_nodes import Node, start_nodes, stats_of, stop_all, wait_for
from frontier_state import leased

from distcrawl.commands.crawl import EXIT_STATE_LOST
from distcrawl.servers.process import RedisServer

pytestmark = pytest.mark.slow


def vanish(server: RedisServer, how: str) -> None:
    """The crawl's state goes, the way it goes in production."""
    if how == "restart empty":
        server.kill()
        shutil.rmtree(server.data_dir)
        server.start()
        return
    r = server.client()
    try:
        if how == "flushall":
            r.flushall()
        else:  # another database: what REDIS_URL names now holds something else (nothing)
            r.swapdb(0, 1)
    finally:
        r.close()


def page_fetches(shop: Any) -> Counter[str]:
    return Counter(
        e["path"] for e in shop.request_log() if e["status"] == 200 and "robots" not in e["path"]
    )


@pytest.mark.parametrize("how", ["flushall", "restart empty", "another database"])
def test_a_crawl_whose_state_vanished_is_told_and_never_crawled_again(
    redis_server: RedisServer,
    mongo_uri: str,
    shop_factory: Any,
    tmp_path: Path,
    cli_in_process: Any,
    how: str,
) -> None:
    if not redis_server.running:
        redis_server.start()
    r = redis_server.client()
    r.flushall()
    shop = shop_factory(products=200, latency_ms=100)
    settings = {"CONCURRENT_REQUESTS": "4"}
    nodes = start_nodes(
        ("v1", "v2"),
        redis_url=redis_server.url,
        mongo_uri=mongo_uri,
        log_dir=tmp_path,
        settings=settings,
    )
    try:
        r.lpush("catalog:start_urls", shop.url)
        assert wait_for(lambda: leased(r, "v1") > 0 and leased(r, "v2") > 0, 120)
        assert wait_for(lambda: len(shop.request_log()) >= 30, 120)
        r.close()
        vanish(redis_server, how)
        codes = [n.wait() for n in nodes]
    finally:
        stop_all(nodes)
    assert codes == [EXIT_STATE_LOST, EXIT_STATE_LOST], [n.log()[-2000:] for n in nodes]
    for node in nodes:
        log = node.log()
        # the outage of a restart says so on its own (Redis out of reach, a page budget
        # not counted meanwhile); the state gone is one line
        errors = [
            line
            for line in log.splitlines()
            if " ERROR: " in line
            and "Redis unavailable (unreachable" not in line
            and "Page budget unavailable" not in line
        ]
        assert len(errors) == 1, errors
        assert "The state of crawl 'catalog' is gone from Redis" in errors[0]
        assert "distcrawl control catalog reset --yes-really" in errors[0]
        assert "Traceback" not in log
        assert "Redis lost this node's last writes" not in log  # not taken for a rewind
        assert "(finished)" not in log
        assert stats_of(log)["frontier/state_lost"] == 1
    # nothing was crawled again: no page fetched twice
    fetched = page_fetches(shop)
    assert max(fetched.values()) == 1, fetched.most_common(3)

    # a node started now refuses the crawl in one line, touching nothing
    late = Node(redis_url=redis_server.url, mongo_uri=mongo_uri, log_dir=tmp_path, node_id="v3")
    try:
        assert late.wait() == EXIT_STATE_LOST
    finally:
        late.kill()
    refused = [line for line in late.log().splitlines() if " ERROR: " in line]
    assert len(refused) == 1 and "is gone from Redis" in refused[0], refused
    # so do the commands, in one line, exit 2; the reset that clears it goes through
    for argv in (
        ("status", "catalog"),
        ("seed", "catalog", shop.url),
        ("control", "catalog", "pause"),
    ):
        code, out, err = cli_in_process(redis_server.url, *argv)
        assert code == 2, (argv, out, err)
        assert err.count("error: ") == 1 and "is gone from Redis" in err, err
    code, out, err = cli_in_process(redis_server.url, "control", "catalog", "reset", "--yes-really")
    assert code == 0, err
    # and the crawl runs again from nothing once seeded
    code, out, err = cli_in_process(redis_server.url, "seed", "catalog", shop.url)
    assert code == 0, err
    again = Node(redis_url=redis_server.url, mongo_uri=mongo_uri, log_dir=tmp_path, node_id="v4")
    try:
        assert again.wait() == 0, again.log()[-3000:]
    finally:
        again.kill()
    r = redis_server.client()
    if how == "another database":
        r.swapdb(0, 1)  # back as it was, for the next test
        r.flushall()
    r.close()


@pytest.fixture
def cli_in_process(capsys: pytest.CaptureFixture[str]) -> Any:
    from distcrawl.cli import main

    def call(redis_url: str, *argv: str) -> tuple[int, str, str]:
        code = main([*argv, "-s", f"REDIS_URL={redis_url}", "-s", "DISTCRAWL_ALLOW_PRIVATE=1"])
        out, err = capsys.readouterr()
        return code, out, err

    return call
