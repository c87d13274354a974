"""What a test reads of the frontier's state in Redis, summed over the crawl's shards.

The number of shards comes from ``DISTCRAWL_SHARDS`` as it does for the nodes the tests start,
so a test reads the layout its nodes write.
"""

from __future__ import annotations

import json
import time
from typing import Any

import redis

from distcrawl.frontier.keys import FrontierKeys
from distcrawl.frontier.protocol.spec import queued_in

__all__ = [
    "KEYS",
    "clear_frontier",
    "dead_records",
    "delayed",
    "leased",
    "leases_left",
    "queued",
    "queued_values",
    "site_shard",
    "wait_for_uptime",
]

KEYS = FrontierKeys("catalog", "catalog:start_urls")


def clear_frontier(r: redis.Redis, keys: FrontierKeys) -> None:
    """Delete every key of the crawl ``keys`` names (its start list aside)."""
    for pattern in keys.patterns():
        for key in r.scan_iter(pattern):
            r.delete(key)


def _sum(r: redis.Redis, verb: str, key: Any, keys: FrontierKeys) -> int:
    return sum(int(getattr(r, verb)(key(shard))) for shard in keys.all_shards())


def queued(r: redis.Redis, keys: FrontierKeys = KEYS) -> int:
    """The requests the shards' queues hold, as their levels count them."""
    return sum(queued_in(r.zrange(s.levels, 0, -1, withscores=True)) for s in keys.all_shards())


def queue_entries(r: redis.Redis, shard: Any) -> list[bytes]:
    """The entries of ``shard``'s queue in the order they leave it: its best priority's first."""
    out: list[bytes] = []
    for level in r.zrange(shard.levels, 0, -1):
        out += r.lrange(shard.queue(level.decode()), 0, -1)
    return out


def queued_rids(r: redis.Redis, shard: Any) -> list[str]:
    """The rids of ``shard``'s queue in the order they leave it."""
    return [entry.partition(b"\t")[0].decode() for entry in queue_entries(r, shard)]


def queued_values(r: redis.Redis, shard: Any) -> dict[str, bytes]:
    """rid -> Q:req value of every request in ``shard``'s queue: an inline entry holds it
    ("<rid>\t<value>"), a bare rid's is in the ``req`` hash."""
    out: dict[str, bytes] = {}
    bare = []
    for entry in queue_entries(r, shard):
        rid, tab, value = entry.partition(b"\t")
        if tab:
            out[rid.decode()] = value
        else:
            bare.append(rid)
    for rid, value in zip(bare, r.hmget(shard.requests, bare) if bare else [], strict=True):
        if value is not None:
            out[rid.decode()] = value
    return out


def delayed(r: redis.Redis, keys: FrontierKeys = KEYS) -> int:
    return _sum(r, "zcard", lambda s: s.delayed, keys)


def payloads(r: redis.Redis, keys: FrontierKeys = KEYS) -> int:
    return _sum(r, "hlen", lambda s: s.requests, keys)


def leased(r: redis.Redis, node: str, keys: FrontierKeys = KEYS) -> int:
    """The leases ``node`` holds, in every shard."""
    return _sum(r, "hlen", lambda s: s.held(node), keys)


def leases_left(r: redis.Redis, keys: FrontierKeys = KEYS) -> list[bytes]:
    """Every leases key of any node in any shard."""
    return [k for s in keys.all_shards() for k in r.keys(s.held("*"))]


def dead_records(r: redis.Redis, keys: FrontierKeys = KEYS) -> list[dict[str, Any]]:
    return [json.loads(v) for s in keys.all_shards() for v in r.hvals(s.dead)]


def site_shard(site: str) -> Any:
    """The keys of the shard that holds ``site``."""
    return KEYS.site_keys(site)


def wait_for_uptime(client: redis.Redis, seconds: int) -> None:
    """Silence counts from the server's start only (``recover`` in the script): wait until it
    has been up for ``seconds``."""
    deadline = time.monotonic() + 60
    while client.info("server")["uptime_in_seconds"] < seconds:
        assert time.monotonic() < deadline
        time.sleep(0.05)
