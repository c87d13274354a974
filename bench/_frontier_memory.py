"""Memory per URL for bench/frontier.py: URLs bulk-loaded through the real push path (and
scrapy-redis' keys loaded the same way), then INFO and MEMORY USAGE."""

from __future__ import annotations

import json
import random
import time
from typing import Any

from _frontier_load import (
    _SPIDER,
    LOAD_BATCH,
    Payloads,
    child,
    hex_fingerprint,
    make_store,
    pick_kind,
    queue_payload,
    revisit_of,
    url_of,
)
from _frontier_nodes import SR_DUPEFILTER, SR_QUEUE
from scrapy_redis.queue import PriorityQueue

from distcrawl.frontier import connection
from distcrawl.frontier.batch import new_rid_tag
from distcrawl.frontier.store import Child, FrontierStore, Revisit


def _memory(client: Any) -> int:
    return int(client.info("memory")["used_memory"])


def _usage(client: Any, key: str) -> int:
    return int(client.memory_usage(key, samples=0) or 0)


def _queue_bytes(client: Any, shard: Any) -> int:
    """MEMORY USAGE of a shard's queue: its lists, its levels and the payloads of bare rids."""
    lists = [shard.queue(level.decode()) for level in client.zrange(shard.levels, 0, -1)]
    keys = [*lists, shard.levels, shard.requests]
    return sum(_usage(client, key) for key in keys)


def _load(store: FrontierStore, payloads: Payloads, first: int, n: int, sites: int) -> int:
    """Push URLs ``first .. first + n - 1`` through ``sync``; returns how many were filtered."""
    rng = random.Random(first)
    # fenced, with a rid tag, as a node's pushes are: the tag is part of every queued rid
    tag = new_rid_tag()
    filtered = 0
    batch: list[Child] = []
    for i in range(first, first + n):
        site = i % sites
        kind, prio = pick_kind(rng)
        batch.append(child(payloads, url_of(site, i), kind, prio, url_of(site, 0)))
        if len(batch) == LOAD_BATCH:
            filtered += store.sync("loader", children=batch, tag=tag).filtered
            batch = []
    if batch:
        filtered += store.sync("loader", children=batch, tag=tag).filtered
    return filtered


def distcrawl_memory(url: str, n: int, args: dict[str, Any]) -> dict[str, Any]:
    """Bytes per URL seen and per URL queued, with *n* URLs pushed through ``sync``; with the
    Bloom dupefilter (sized for *n*), its bytes per URL and the false positives measured on
    fresh URLs pushed after it."""
    client = connection.client(url, socket_timeout=600)
    client.execute_command("FLUSHALL", "SYNC")  # memory freed before the baseline
    base = _memory(client)
    store = make_store(client, {**args, "capacity": n})
    payloads = Payloads(queue_payload)
    t0 = time.perf_counter()
    _load(store, payloads, 0, n, args["sites"])
    load_s = time.perf_counter() - t0
    total = _memory(client) - base
    shards = store.keys.all_shards()
    # what a queued request costs: its queue entry and payload (the keys of each shard that
    # grow with the queue: a list per priority, the levels, the payloads of bare rids); the
    # rest of what the load added is the dupefilter
    queued = sum(_queue_bytes(client, s) for s in shards)
    bloom = sum(_usage(client, s.bloom) for s in shards)
    seen = total - queued - bloom
    out: dict[str, Any] = {
        "urls": n,
        "shards": store.keys.shards,
        "load_seconds": round(load_s, 1),
        "queued_bytes_per_url": round(queued / n, 1),
        "used_memory_bytes": total,
    }
    if args["dupefilter"] == "bloom":
        probes = max(10_000, n // 20)
        false_positives = _load(store, payloads, 10**9, probes, args["sites"])
        out["bloom_bytes_per_url"] = round(bloom / n, 2)
        out["bloom_false_positive_rate"] = round(false_positives / probes, 5)
        out["bloom_probes"] = probes
    else:
        out["seen_bytes_per_url"] = round(seen / n, 1)
    if args.get("revisit_ms"):
        out.update(_revisit_pass(client, store, n))
    client.close()
    return out


def _revisit_pass(client: Any, store: FrontierStore, n: int) -> dict[str, Any]:
    """Lease every queued URL once and schedule it again: what a scheduled page costs, and
    the dupefilter after every URL was recorded again by its revisit."""
    t0 = time.perf_counter()
    scheduled = 0
    pending: list[Revisit] = []
    while True:
        reply = store.sync("loader", revisits=pending, lease=LOAD_BATCH)
        scheduled += reply.revisited
        pending = [revisit_of(x, 6 * 3600 * 1000, json.loads(x.payload)["u"]) for x in reply.leased]
        if not pending and not store.drained()[0]:
            break
    shards = store.keys.all_shards()
    revisit = sum(_usage(client, s.revisit) + _usage(client, s.requests) for s in shards)
    return {
        "revisit_scheduled": scheduled,
        "revisit_pass_seconds": round(time.perf_counter() - t0, 1),
        "revisit_bytes_per_url": round(revisit / max(1, scheduled), 1),
        "seen_bytes_per_url_after_revisits": round(int(store.dupefilter_bytes()) / n, 1),
    }


def scrapy_redis_memory(url: str, n: int, sites: int) -> dict[str, Any]:
    import redis

    client = redis.Redis.from_url(url, socket_timeout=600)
    client.execute_command("FLUSHALL", "SYNC")  # memory freed before the baseline
    base = _memory(client)
    queue = PriorityQueue(client, _SPIDER, SR_QUEUE)
    payloads = Payloads(queue._encode_request)
    rng = random.Random(2)
    pipe = client.pipeline(transaction=False)
    for i in range(n):
        site = i % sites
        u = url_of(site, i)
        kind, prio = pick_kind(rng)
        pipe.sadd(SR_DUPEFILTER, hex_fingerprint(u))
        pipe.execute_command("ZADD", SR_QUEUE, -prio, payloads.make(u, kind, prio, url_of(site, 0)))
        if (i + 1) % LOAD_BATCH == 0:
            pipe.execute()
    pipe.execute()
    total = _memory(client) - base
    seen = _usage(client, SR_DUPEFILTER)
    client.close()
    return {
        "seen_bytes_per_url": round(seen / n, 1),
        "queued_bytes_per_url": round((total - seen) / n, 1),
    }
