"""``status`` finds a crawl where its nodes put it: a crawl started with another shard count is
read with the one it recorded, unless the command is given one (then it refuses, naming both);
and a figure it cannot read says why."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import redis.asyncio as aioredis

from distcrawl.frontier import crawlconf
from distcrawl.frontier.batch import Child
from distcrawl.frontier.store import FrontierKeys, FrontierStore

ROOT = Path(__file__).resolve().parents[2]
EIGHT = FrontierKeys(spider="sharded", start_urls="sharded:start_urls", shards=8)


def _status(redis_url: str, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("REDIS_", "DISTCRAWL_",
                                                                       "MONGO_"))}  # fmt: skip
    return subprocess.run(
        [sys.executable, "-m", "distcrawl.cli", "status", *args, "-s", f"REDIS_URL={redis_url}"],
        capture_output=True, text=True, cwd=ROOT, env={**clean, **env}, timeout=120,
    )  # fmt: skip


def _record(redis_url: str, keys: FrontierKeys) -> None:
    async def run() -> None:
        client = aioredis.Redis.from_url(redis_url)
        try:
            layout = crawlconf.layout(keys)
            await crawlconf.record(client, keys, layout, by="node-8", at_ms=1)
        finally:
            await client.aclose()

    asyncio.run(run())


def test_a_crawl_of_eight_shards_is_read_with_its_own_shard_count(redis_url: str, r) -> None:
    _record(redis_url, EIGHT)
    sites = [f"shop{i}.test" for i in range(6)]
    children = [
        Child(f"fp-{i}", 100, False, 0, site, json.dumps({"url": f"http://{site}/p/{i}"}))
        for i, site in enumerate(sites)
    ]
    FrontierStore(r, EIGHT).sync("n1", children=children)
    assert len({EIGHT.shard_of(site) for site in sites}) > 1  # spread over several shards

    plain = _status(redis_url, "sharded", "--json", "--no-store", "--sample", "0")
    assert plain.returncode == 0, plain.stderr
    assert json.loads(plain.stdout)["frontier"]["queued"] == len(children)

    given = _status(redis_url, "sharded", "--json", "--no-store", "-s", "DISTCRAWL_SHARDS=4")
    assert given.returncode == 2, given.stderr
    assert given.stderr.startswith("error: DISTCRAWL_SHARDS is 4 here, but crawl sharded runs "
                                   "with 8"), given.stderr  # fmt: skip
    from_env = _status(redis_url, "sharded", "--json", "--no-store", DISTCRAWL_SHARDS="4")
    assert from_env.returncode == 2 and "DISTCRAWL_SHARDS is 4 here" in from_env.stderr


def test_stored_products_without_a_mongodb_say_why(redis_url: str, r, tmp_path: Path) -> None:
    FrontierStore(r, FrontierKeys(spider="catalog", start_urls="catalog:start_urls")).heartbeat(
        "n1", "{}"
    )
    home = tmp_path / "home"
    done = _status(redis_url, "catalog", "--json", "--sample", "0", DISTCRAWL_HOME=str(home))
    assert done.returncode == 0, done.stderr
    store = json.loads(done.stdout)["store"]
    assert store["this_crawl"] is None and store["in_collection"] is None
    assert store["error"] == f"MONGO_URI is not set and no embedded MongoDB runs under {home}"
    screen = _status(redis_url, "catalog", "--sample", "0", DISTCRAWL_HOME=str(home))
    assert "stored by this crawl  -  MONGO_URI is not set and no embedded MongoDB runs" in (
        " ".join(screen.stdout.split()).replace(" - ", "  -  ")
    ), screen.stdout
