"""What a test reads of the frontier's state in Redis, summed over the crawl's shards.

The number of shards comes from ``DISTCRAWL_SHARDS`` as it does for the nodes the tests start,
so a test reads the layout its nodes write.
"""

from __future__ import annotations

import json
from typing import Any

import redis

from distcrawl.frontier.keys import FrontierKeys

__all__ = ["KEYS", "dead_records", "delayed", "leased", "leases_left", "queued", "site_shard"]

KEYS = FrontierKeys("catalog", "catalog:start_urls")


def _sum(r: redis.Redis, verb: str, key: Any, keys: FrontierKeys) -> int:
    return sum(int(getattr(r, verb)(key(shard))) for shard in keys.all_shards())


def queued(r: redis.Redis, keys: FrontierKeys = KEYS) -> int:
    return _sum(r, "zcard", lambda s: s.queue, keys)


def delayed(r: redis.Redis, keys: FrontierKeys = KEYS) -> int:
    return _sum(r, "zcard", lambda s: s.delayed, keys)


def payloads(r: redis.Redis, keys: FrontierKeys = KEYS) -> int:
    return _sum(r, "hlen", lambda s: s.requests, keys)


def leased(r: redis.Redis, node: str, keys: FrontierKeys = KEYS) -> int:
    return _sum(r, "zcard", lambda s: s.leases(node), keys)


def leases_left(r: redis.Redis, keys: FrontierKeys = KEYS) -> list[bytes]:
    """Every leases key of any node in any shard."""
    return [k for s in keys.all_shards() for k in r.keys(s.leases("*"))]


def dead_records(r: redis.Redis, keys: FrontierKeys = KEYS) -> list[dict[str, Any]]:
    return [json.loads(v) for s in keys.all_shards() for v in r.hvals(s.dead)]


def site_shard(site: str) -> Any:
    """The keys of the shard that holds ``site``."""
    return KEYS.site_keys(site)
