"""The demo's nodes: the ``scrapy crawl catalog`` command each runs, and its environment."""

from __future__ import annotations

import os
import sys
from pathlib import Path

__all__ = ["allowed_hosts", "node_command", "node_env", "shop_hosts"]


def node_command(index: int, log_file: Path, extra: list[str]) -> list[str]:
    cmd = [
        sys.executable,
        "-m",
        "scrapy",
        "crawl",
        "catalog",
        "-s",
        "DISTCRAWL_CLOSE_WHEN_DRAINED=1",
        "-s",
        f"LOG_FILE={log_file}",
    ]
    for setting in extra:
        cmd += ["-s", setting]
    return cmd


def shop_hosts(sites: int) -> list[str]:
    """The loopback address of each demo shop."""
    return [f"127.0.0.{i + 1}" for i in range(sites)]


def allowed_hosts(sites: int) -> str:
    """``DISTCRAWL_ALLOW_PRIVATE`` for the nodes: every demo shop's host."""
    return ",".join(dict.fromkeys([*shop_hosts(max(2, sites)), "localhost"]))


def node_env(
    redis_url: str,
    mongo_uri: str,
    home: Path,
    node_id: str,
    profiles: str = "",
    *,
    sites: int = 1,
    shards: int | None = None,
) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        SCRAPY_SETTINGS_MODULE="distcrawl.settings",
        REDIS_URL=redis_url,
        MONGO_URI=mongo_uri,
        DISTCRAWL_HOME=str(home),
        DISTCRAWL_NODE_ID=node_id,
        DISTCRAWL_ALLOW_PRIVATE=allowed_hosts(sites),
    )
    if shards is not None:
        env["DISTCRAWL_SHARDS"] = str(shards)
    if profiles:
        env["DISTCRAWL_SITE_PROFILES"] = profiles
    return env
