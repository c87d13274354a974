"""What tests write into a crawl's keys, as the frontier and the nodes write them: queue
entries, heartbeats, children, leases and dead letters."""

from __future__ import annotations

import json
import time
from typing import Any

import redis
from scrapy import Request

from distcrawl.frontier.keys import FrontierKeys, ShardKeys
from distcrawl.frontier.protocol.spec import level_score
from distcrawl.frontier.store import FrontierStore
from distcrawl.node.requests import codec

__all__ = ["beat", "dead_letter", "kids", "lease", "queue", "queue_raw"]


def queue_raw(r: redis.Redis, shard: ShardKeys, priority: int, *entries: str | bytes) -> None:
    """Entries at the end of ``shard``'s queue of ``priority``, counted in its levels, as
    anyone with access to Redis could write them (one transaction)."""
    pipe = r.pipeline(transaction=True)
    pipe.rpush(shard.queue(priority), *entries)
    pipe.zadd(shard.levels, {str(priority): level_score(priority, 0)}, nx=True)
    pipe.zincrby(shard.levels, len(entries), str(priority))
    pipe.execute()


def queue(r: redis.Redis, keys: FrontierKeys, *priorities: int) -> None:
    """Queue entries (bare rids of the first shard) of these priorities, one each."""
    for prio in priorities:
        seq = r.incr(keys.shard(0).seq)
        queue_raw(r, keys.shard(0), prio, str(seq))


def beat(r: redis.Redis, keys: FrontierKeys, node: str, stats: dict, **info: Any) -> None:
    """A heartbeat of *node* publishing *stats* (and *info*)."""
    FrontierStore(r, keys).heartbeat(
        node, json.dumps({"pid": 1, "host": "h", **info, "stats": stats})
    )


def kids(site: str, n: int, tag: str = "fp") -> list[tuple[str, int, bool, int, str, str]]:
    """*n* children of *site* at priority 100, as a node pushes them."""
    return [
        (f"{tag}{i}", 100, False, 0, site, json.dumps({"url": f"http://{site}/{tag}{i}"}))
        for i in range(n)
    ]


def lease(store: FrontierStore, node: str, n: int, **options: Any) -> list[Any]:
    """Lease from every shard until *n* are leased or no shard gives more (a node's first
    leases spread over shards it does not know yet)."""
    got: list[Any] = []
    for _ in range(3 * store.keys.shards):
        store.views.poke()
        got += store.sync(node, lease=n - len(got), **options).leased
        if len(got) >= n:
            break
    return got


def dead_letter(
    r: redis.Redis, keys: FrontierKeys, dead_id: str, url: str, reason: str, priority: int = 100
) -> None:
    """A dead letter of *url* as a node records it after the last try, in its site's shard."""
    site = url.split("/")[2]
    record = {
        "request": codec.encode(Request(url, priority=priority, dont_filter=True), None),
        "url": url,
        "priority": priority,
        "site": site,
        "reason": reason,
        "node": "n1",
        "at": time.time(),
        "attempts": 4,
        "first_attempt": time.time() - 10,
        "last_attempt": time.time(),
        "status": 503,
    }
    r.hset(keys.site_keys(site).dead, dead_id, json.dumps(record))
