"""The README's five-minute multi-node start on one machine: its shell lines, run as written
(the shop's port 8000 replaced by a free one), store every product of the demo shop once."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pymongo
import pytest
import redis
from crawl_nodes import Node, wait_for

from distcrawl.base.processes import free_port
from distcrawl.demo.catalog import Catalog
from distcrawl.servers.embedded import ensure_mongo, stop_services

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
#: the mark of the README block this test runs (<!-- run: readme-multinode -->)
RUN_ID = "readme-multinode"


def readme_lines() -> str:
    text = (ROOT / "README.md").read_text()
    block = re.search(
        r"<!-- multi-node-one-machine -->\n```bash\n(.*?)```\n<!-- /multi-node-one-machine -->",
        text,
        re.S,
    )
    assert block, "README lost its one-machine multi-node block"
    return block.group(1)


@pytest.mark.slow
def test_readme_multi_node_lines_store_every_product_once(tmp_path) -> None:
    lines = readme_lines()
    assert "8000" in lines
    port = free_port()
    script = "\n".join(
        [
            "set -e",
            # the script's own background jobs (shop, node) end with it, whatever happens
            "trap 'kill $(jobs -p) 2>/dev/null || true' EXIT TERM",
            lines.replace("8000", str(port)),
        ]
    )
    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("REDIS_", "MONGO_"))}
    env.update(
        PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}",
        DISTCRAWL_HOME=str(home),
        DISTCRAWL_HEARTBEAT_INTERVAL="0.5",
    )
    env.pop("DISTCRAWL_ALLOW_PRIVATE", None)
    env.pop("SCRAPY_SETTINGS_MODULE", None)  # the project directory's scrapy.cfg says it
    try:
        done = subprocess.run(
            ["bash", "-c", script],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-3000:])
        assert re.search(r"stored products\s+200\b", done.stdout), done.stdout
        assert "drained" in done.stdout
        # the store outlives its server: start it again on the same data and look
        mongo: pymongo.MongoClient[Any] = pymongo.MongoClient(ensure_mongo(home))
        urls = [d["url"] for d in mongo.get_default_database()["products"].find({}, {"url": 1})]
        mongo.close()
        base = f"http://127.0.0.1:{port}"
        assert sorted(urls) == sorted(base + p.path for p in Catalog(products=200).products())
    finally:
        stop_services(home)


@pytest.mark.slow
def test_a_node_that_closes_when_drained_waits_for_the_first_seed(
    redis_url, mongo_uri, shop_factory, tmp_path
) -> None:
    shop = shop_factory(products=20)
    node = Node(redis_url=redis_url, mongo_uri=mongo_uri, log_dir=tmp_path, node_id="early")
    try:
        assert wait_for(
            lambda: (
                node.log_file.exists() and "waits for the first seed" in node.log_file.read_text()
            ),
            timeout=120,
        ), "the node never said it waits for a seed"
        assert node.proc.poll() is None  # still running, not drained
        redis.Redis.from_url(redis_url).lpush("catalog:start_urls", shop.url)
        assert node.wait() == 0
        client: pymongo.MongoClient[Any] = pymongo.MongoClient(mongo_uri)
        stored = client.get_default_database()["products"].count_documents({})
        client.close()
        assert stored == 20
    finally:
        node.kill()
