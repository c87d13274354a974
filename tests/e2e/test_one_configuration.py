"""One source of configuration, end to end with real ``scrapy crawl`` nodes and a real Redis:
the environment and ``-s`` give a setting alike, a misspelt ``DISTCRAWL_*`` name is reported
at start with the nearest name, and a node or an operator command whose crawl-wide settings
differ from the crawl's is refused, naming both values, until the crawl is reset."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import redis
from crawl_nodes import TESTS, Node, stop_all

from distcrawl.frontier.keys import FrontierKeys, default_shards
from distcrawl.frontier.tags import shard_tags

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
REVISIT = "*:1h"


def crawl(
    redis_url: str,
    mongo_uri: str,
    log_dir: Path,
    node_id: str,
    *,
    settings: dict[str, Any] | None = None,
    env: dict[str, str] | None = None,
    settings_module: str = "distcrawl.settings",
) -> Node:
    """A node crawling until the crawl is drained, as every test here runs one."""
    node = Node(
        redis_url=redis_url,
        mongo_uri=mongo_uri,
        log_dir=log_dir,
        node_id=node_id,
        settings=settings,
        env=env,
        settings_module=settings_module,
    )
    try:
        node.wait()
    finally:
        stop_all([node])
    return node


def revisits_scheduled(r: redis.Redis, shards: int | None = None) -> int:
    keys = FrontierKeys("catalog", "catalog:start_urls", **({"shards": shards} if shards else {}))
    return sum(int(r.zcard(shard.revisit)) for shard in keys.all_shards())


def revisit_line(log: str) -> str:
    found = re.search(r"Revisit mode: (.*)", log)
    assert found, log[-3000:]
    return found.group(1)


def test_revisit_from_the_environment_and_from_dash_s_behave_the_same(
    redis_url, mongo_uri, shop_factory, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    """``export DISTCRAWL_REVISIT=...`` then ``scrapy crawl`` runs in revisit mode, as
    ``-s DISTCRAWL_REVISIT=...`` does: every fetched page is scheduled again."""
    shop = shop_factory(products=12, latency_ms=5)
    r = redis.Redis.from_url(redis_url)
    outcomes = {}
    for source in ("env", "-s"):
        r.flushall()
        r.lpush("catalog:start_urls", shop.url)
        since = shop.request_log()[-1]["t"] if shop.request_log() else 0.0
        run_dir = tmp_path / source.strip("-")
        run_dir.mkdir()
        node = crawl(
            redis_url,
            mongo_uri,
            run_dir,
            "n",
            env={"DISTCRAWL_REVISIT": REVISIT} if source == "env" else None,
            settings={"DISTCRAWL_REVISIT": REVISIT} if source == "-s" else None,
        )
        assert node.proc.returncode == 0, node.log()[-3000:]
        pages = {e["path"] for e in shop.request_log(since=since) if e["path"] != "/robots.txt"}
        outcomes[source] = (revisit_line(node.log()), revisits_scheduled(r), len(pages))
    assert outcomes["env"] == outcomes["-s"]
    line, scheduled, fetched = outcomes["env"]
    assert line.startswith("* every 3600s")
    assert scheduled == fetched > 12  # every page fetched is due again, the products and more


def test_a_misspelt_setting_is_reported_at_start(
    redis_url, mongo_uri, shop_factory, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    """In the environment, in -s and in a project's settings module: one WARNING line each,
    with the nearest setting name; the node runs on. An operator command says the same."""
    shop = shop_factory(products=3, latency_ms=5)
    redis.Redis.from_url(redis_url).lpush("catalog:start_urls", shop.url)
    (tmp_path / "misspelt_settings.py").write_text(
        "from distcrawl.settings import *  # noqa: F403\nDISTCRAWL_SHARDZ = 4\n"
    )
    path = os.pathsep.join([str(tmp_path), str(TESTS), os.environ.get("PYTHONPATH", "")])
    node = crawl(
        redis_url,
        mongo_uri,
        tmp_path,
        "typo",
        env={"DISTCRAWL_REVISTI": REVISIT, "PYTHONPATH": path},
        settings={"DISTCRAWL_SITE_RATEE": "2"},
        settings_module="misspelt_settings",
    )
    log = node.log()
    assert node.proc.returncode == 0, log[-3000:]
    warned = [line for line in log.splitlines() if "WARNING: Unknown setting" in line]
    assert [line.split("WARNING: ", 1)[1] for line in warned] == [
        "Unknown setting DISTCRAWL_REVISTI (environment) is ignored; did you mean "
        "DISTCRAWL_REVISIT?",
        "Unknown setting DISTCRAWL_SHARDZ (the project settings) is ignored; did you mean "
        "DISTCRAWL_SHARDS?",
        "Unknown setting DISTCRAWL_SITE_RATEE (-s) is ignored; did you mean DISTCRAWL_SITE_RATE?",
    ]
    done = operator(
        redis_url, "status", "catalog", "--json", "--no-store", "-s", "DISTCRAWL_SITE_RATEE=2",
        env={"DISTCRAWL_REVISTI": REVISIT},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == [
        "warning: Unknown setting DISTCRAWL_REVISTI (environment) is ignored; did you mean "
        "DISTCRAWL_REVISIT?",
        "warning: Unknown setting DISTCRAWL_SITE_RATEE (-s) is ignored; did you mean "
        "DISTCRAWL_SITE_RATE?",
    ]


def operator(
    redis_url: str, *argv: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``distcrawl <command>`` as an operator runs it next to the nodes."""
    full = {**os.environ, "REDIS_URL": redis_url, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "distcrawl.cli", *argv],
        capture_output=True,
        text=True,
        env=full,
        cwd=ROOT,
        timeout=120,
    )


def test_a_node_with_other_shards_refuses_to_start_naming_both_values(
    redis_url, mongo_uri, shop_factory, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    shop = shop_factory(products=3, latency_ms=5)
    r = redis.Redis.from_url(redis_url)
    r.lpush("catalog:start_urls", shop.url)
    crawl_shards = default_shards()
    other = 4 if crawl_shards != 4 else 8
    first = crawl(redis_url, mongo_uri, tmp_path, "first")
    assert first.proc.returncode == 0, first.log()[-3000:]
    record = r.hgetall("{catalog}:config")
    assert record[b"DISTCRAWL_SHARDS"] == str(crawl_shards).encode()

    (tmp_path / "late").mkdir()
    env = {"DISTCRAWL_SHARDS": str(other)}
    late = crawl(redis_url, mongo_uri, tmp_path / "late", "late", env=env)
    log = late.log()
    assert late.proc.returncode == 2, log[-3000:]
    refused = [line for line in log.splitlines() if "Node refuses to start" in line]
    assert len(refused) == 1, log[-3000:]
    assert (
        f"DISTCRAWL_SHARDS is {other} here, but crawl catalog runs with {crawl_shards} "
        "(recorded by node first in {catalog}:config)"
    ) in refused[0]
    assert "Traceback" not in log
    # it touched none of the crawl: no key under its shard tags, the record as it was
    tags = shard_tags("catalog", other) if other > 1 else ()
    assert not [k for t in tags for k in r.scan_iter(match="{" + t + "}*")]
    assert r.hgetall("{catalog}:config") == record
    assert not r.hexists("{catalog}:nodes", "late") and r.zscore("{catalog}:nodes", "late") is None

    # an operator command that would compute other shards is refused the same way
    for argv in (("status", "catalog", "--no-store"), ("deadletters", "catalog", "list")):
        done = operator(redis_url, *argv, env=env)
        assert done.returncode == 2, done.stderr
        assert f"error: DISTCRAWL_SHARDS is {other} here, but crawl catalog runs with" in (
            done.stderr
        )
    done = operator(
        redis_url, "seed", "catalog", shop.url, env={**env, "DISTCRAWL_ALLOW_PRIVATE": "127.0.0.1"}
    )
    assert done.returncode == 2 and "DISTCRAWL_SHARDS" in done.stderr, done.stderr

    # reset clears the record with the crawl: the node with other shards now starts
    shards_env = {"DISTCRAWL_SHARDS": str(crawl_shards)}
    reset = operator(redis_url, "control", "catalog", "reset", "--yes-really", env=shards_env)
    assert reset.returncode == 0, reset.stderr
    assert not r.exists("{catalog}:config")
    r.lpush("catalog:start_urls", shop.url)
    (tmp_path / "again").mkdir()
    again = crawl(redis_url, mongo_uri, tmp_path / "again", "again", env=env)
    assert again.proc.returncode == 0, again.log()[-3000:]
    assert r.hget("{catalog}:config", "DISTCRAWL_SHARDS") == str(other).encode()
