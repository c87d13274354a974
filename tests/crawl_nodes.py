"""Run real ``scrapy crawl catalog`` node processes from tests, and check what they stored."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pymongo

if TYPE_CHECKING:
    from distcrawl.demo.shop import DemoShop

TESTS = Path(__file__).resolve().parent

#: generous upper bound for one test crawl; a hang fails the test instead of blocking CI
NODE_TIMEOUT = 300.0
#: DISTCRAWL_HEARTBEAT_TIMEOUT of test nodes, in seconds
HEARTBEAT_TIMEOUT = 20


class Node:
    """One ``scrapy crawl catalog`` process with its own log file."""

    def __init__(
        self,
        *,
        redis_url: str,
        mongo_uri: str,
        log_dir: Path,
        node_id: str,
        settings: dict[str, Any] | None = None,
        env: dict[str, str] | None = None,
        spider: str = "catalog",
        spider_args: dict[str, str] | None = None,
        settings_module: str = "distcrawl.settings",
    ) -> None:
        self.node_id = node_id
        self.log_file = log_dir / f"{node_id}.log"
        merged = {
            "DISTCRAWL_CLOSE_WHEN_DRAINED": "1",
            "DISTCRAWL_DRAIN_GRACE": "1.5",
            "DISTCRAWL_HEARTBEAT_INTERVAL": "0.5",
            # room for a node starved of CPU on a loaded machine: a live node must never be
            # taken for dead; tests that kill one wait for its recovery as a condition
            "DISTCRAWL_HEARTBEAT_TIMEOUT": str(HEARTBEAT_TIMEOUT),
            "LOG_FILE": str(self.log_file),
            "LOG_LEVEL": "INFO",
            **(settings or {}),
        }
        cmd = [sys.executable, "-m", "scrapy", "crawl", spider]
        for key, value in merged.items():
            cmd += ["-s", f"{key}={value}"]
        for key, value in (spider_args or {}).items():
            cmd += ["-a", f"{key}={value}"]
        full_env = dict(os.environ)
        full_env.update(
            {
                "SCRAPY_SETTINGS_MODULE": settings_module,
                "REDIS_URL": redis_url,
                "MONGO_URI": mongo_uri,
                "DISTCRAWL_NODE_ID": node_id,
                "DISTCRAWL_ALLOW_PRIVATE": "127.0.0.1,127.0.0.2,localhost",
                "PYTHONPATH": os.pathsep.join(
                    filter(None, [str(TESTS), os.environ.get("PYTHONPATH")])
                ),
                # a test's own environment wins, PYTHONPATH included
                **(env or {}),
            }
        )
        self.proc = subprocess.Popen(
            cmd, env=full_env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )

    def wait(self, timeout: float = NODE_TIMEOUT) -> int:
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"node {self.node_id} did not finish in {timeout}s") from None
        return self.proc.returncode

    def terminate(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def log(self) -> str:
        return self.log_file.read_text() if self.log_file.exists() else ""


def stop_all(nodes: Iterable[Node]) -> None:
    for node in nodes:
        node.kill()


def stored_urls(mongo_uri: str) -> list[str]:
    client: pymongo.MongoClient[Any] = pymongo.MongoClient(mongo_uri)
    try:
        db = client.get_default_database()
        return [d["url"] for d in db["products"].find({}, {"url": 1, "_id": 0})]
    finally:
        client.close()


def stored_products(mongo_uri: str, shop: DemoShop) -> Counter[str]:
    """Documents per product identity (the shop's SKU of the page the document names, else
    its ``sku`` field): a product stored under two URLs counts twice, which ``_id`` (the URL)
    can never show."""
    client: pymongo.MongoClient[Any] = pymongo.MongoClient(mongo_uri)
    try:
        db = client.get_default_database()
        docs = list(db["products"].find({}, {"url": 1, "sku": 1, "_id": 0}))
    finally:
        client.close()
    return Counter(
        shop.product_sku(str(d.get("url", ""))) or str(d.get("sku") or d.get("url")) for d in docs
    )


def product_fetches(shop: DemoShop) -> Counter[str]:
    """Fetches of product pages per product identity (SKU), from the shop's own request log:
    the same product fetched through two URLs counts twice."""
    skus = (shop.product_sku(e["path"]) for e in shop.request_log())
    return Counter(sku for sku in skus if sku is not None)


def expected_skus(shop: DemoShop) -> set[str]:
    return {sku for url in shop.expected_product_urls() if (sku := shop.product_sku(url))}


def assert_each_product_once(mongo_uri: str, shop: DemoShop) -> None:
    """Every product the shop has is stored, each in exactly one document."""
    stored = stored_products(mongo_uri, shop)
    twice = {sku: n for sku, n in stored.items() if n > 1}
    assert not twice, f"products stored more than once: {sorted(twice.items())[:5]}"
    assert set(stored) == expected_skus(shop)


class ShopClock:
    """A changing demo shop's time (``shop_factory(clock=...)``): unix time plus ``skew``, so a
    test starts the shop's change epochs when it says so (set ``skew`` to jump ahead)."""

    def __init__(self) -> None:
        self.skew = 0.0

    def __call__(self) -> float:
        return time.time() + self.skew


def start_nodes(
    names: Iterable[str],
    *,
    redis_url: str,
    mongo_uri: str,
    log_dir: Path,
    settings: dict[str, Any] | None = None,
) -> list[Node]:
    """One :class:`Node` per name, all with the same Redis, MongoDB and settings."""
    return [
        Node(
            redis_url=redis_url,
            mongo_uri=mongo_uri,
            log_dir=log_dir,
            node_id=name,
            settings=settings,
        )
        for name in names
    ]


def wait_for(predicate: Any, timeout: float, interval: float = 0.1) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return False


def stats_of(log: str) -> dict[str, Any]:
    """The stats a node dumped at its end (Scrapy logs them as a Python dict literal)."""
    dump = log[log.rindex("Dumping Scrapy stats:") :]
    body = dump[dump.index("{") : dump.index("}\n") + 1]
    return {k: int(v) for k, v in re.findall(r"'([^']+)': (\d+),?\n", body)}


def assert_clean_log(text: str) -> None:
    """No deprecation warnings and no tracebacks in a node's log."""
    assert "Deprecat" not in text, [x for x in text.splitlines() if "Deprecat" in x][:3]
    assert "Traceback" not in text, text[text.index("Traceback") :][:2000]
