"""The simulated nodes of bench/frontier.py: a distcrawl node's flushes (one ``sync`` per round
trip, as its I/O loop makes them) and vanilla scrapy-redis' scheduler calls, each preceded by
the preload of every site's first URLs."""

from __future__ import annotations

import json
import random
import time
from typing import Any

from _frontier_load import (
    _SPIDER,
    LOAD_BATCH,
    PRELOAD_PER_SITE,
    Payloads,
    _site_of,
    child,
    fingerprint,
    hex_fingerprint,
    make_store,
    pick_kind,
    queue_payload,
    request_of,
    revisit_of,
    url_of,
)
from scrapy.http import Request
from scrapy_redis.dupefilter import RFPDupeFilter
from scrapy_redis.queue import PriorityQueue

from distcrawl.base.recent import RecentKeys
from distcrawl.frontier import connection
from distcrawl.frontier.batch import new_rid_tag
from distcrawl.frontier.store import Child, Revisit


def preload(url: str, sites: int, args: dict[str, Any]) -> None:
    """``PRELOAD_PER_SITE`` URLs of every site queued (and so in the dupefilter)."""
    client = connection.client(url)
    store = make_store(client, args)
    payloads = Payloads(queue_payload)
    rng = random.Random(1)
    children = []
    for page in range(PRELOAD_PER_SITE):
        for site in range(sites):
            kind, prio = pick_kind(rng)
            children.append(child(payloads, url_of(site, page), kind, prio, url_of(site, 0)))
    for at in range(0, len(children), LOAD_BATCH):
        store.sync("loader", children=children[at : at + LOAD_BATCH])
    client.close()


def distcrawl_node(
    url: str, name: str, args: dict[str, Any], start: Any, stop: Any, out: Any
) -> None:
    client = connection.client(url, socket_timeout=60)
    store = make_store(client, args)
    rng = random.Random(name)
    payloads = Payloads(queue_payload)
    links, seen_share, lease_n = args["links"], args["seen"], args["lease"]
    pace = float(args.get("pace") or 0.0)
    # as the scheduler: fenced calls (a rid tag, a mark per shard) and the fingerprints the
    # node already sent, whose links it drops without asking Redis (None: every link is sent)
    tag = new_rid_tag()
    # (a node in revisit mode wipes it once a dupefilter generation: never within a run)
    known = RecentKeys(args["known"]) if args["known"] > 0 else None
    fresh = sent = 0
    # as the scheduler: a page's links are probed first and the new ones pushed with the next
    # flush; its ack waits for that flush
    links_found: list[Child] = []
    children: list[Child] = []
    acks: list[Any] = []
    acks_waiting: list[Any] = []
    revisits: list[Revisit] = []
    revisit_ms = int(args.get("revisit_ms") or 0)
    pages = roundtrips = inversions = shard_calls = 0
    store.heartbeat(name, "{}")
    start.wait()
    t0 = last_beat = time.perf_counter()
    while not stop.is_set():
        if links_found:
            acks, acks_waiting = acks_waiting, acks
        else:
            acks, acks_waiting = acks_waiting + acks, []
        reply = store.sync(
            name,
            children=children,
            probes=links_found,
            acks=acks,
            lease=lease_n,
            tag=tag,
            revisits=revisits,
        )
        if reply.rewound is not None:  # a fresh server that nobody restarts
            raise RuntimeError("the bench's Redis lost writes")
        roundtrips += 1
        shard_calls += reply.shards_called
        inversions += reply.priority_inversions
        sent += len(links_found)
        children, links_found, acks, revisits = reply.probed, [], [], []
        for leased in reply.leased:
            data = json.loads(leased.payload)
            page_url = data["u"]
            if revisit_ms:
                revisits.append(revisit_of(leased, revisit_ms, page_url))
            else:
                acks.append(leased.lease)
            site = _site_of(page_url)
            for _ in range(links):
                if rng.random() < seen_share:
                    u = url_of(site, rng.randrange(PRELOAD_PER_SITE))
                    kind, prio = "product", 100
                else:
                    fresh += 1
                    u = url_of(site, 10**9 + args["index"] * 10**8 + fresh)
                    kind, prio = pick_kind(rng)
                if known is not None:
                    key = fingerprint(u).hex()
                    if key in known:
                        continue
                    known.add(key)
                links_found.append(child(payloads, u, kind, prio, page_url))
        pages += len(reply.leased)
        if pace > 0:  # a node held to `pace` pages/s (the single Redis at a master's rate)
            stop.wait(max(0.0, t0 + pages / pace - time.perf_counter()))
        if time.perf_counter() - last_beat > 2.0:  # as a node does: learns the live nodes
            store.heartbeat(name, "{}")
            roundtrips += 1
            last_beat = time.perf_counter()
    if acks or acks_waiting or revisits or children:
        store.sync(name, children=children, acks=acks + acks_waiting, tag=tag, revisits=revisits)
        roundtrips += 1
    out.put(
        {
            "pages": pages,
            "children_sent": sent,
            "roundtrips": roundtrips,
            "seconds": time.perf_counter() - t0,
            "inversions": inversions,
            "shard_calls": shard_calls,
        }
    )
    client.close()


# --------------------------------------------------------------------------- scrapy-redis


class _FpDupeFilter(RFPDupeFilter):  # type: ignore[misc]
    """scrapy-redis' dupefilter with the same fingerprints as the distcrawl run."""

    def request_fingerprint(self, request: Request) -> str:
        return hex_fingerprint(request.url)


SR_QUEUE, SR_DUPEFILTER = "catalog:requests", "catalog:dupefilter"


def scrapy_redis_preload(url: str, sites: int) -> None:
    import redis

    client = redis.Redis.from_url(url)
    queue = PriorityQueue(client, _SPIDER, SR_QUEUE)
    payloads = Payloads(queue._encode_request)
    rng = random.Random(1)
    pipe = client.pipeline(transaction=False)
    for page in range(PRELOAD_PER_SITE):
        for site in range(sites):
            u = url_of(site, page)
            kind, prio = pick_kind(rng)
            pipe.sadd(SR_DUPEFILTER, hex_fingerprint(u))
            pipe.execute_command(
                "ZADD", SR_QUEUE, -prio, payloads.make(u, kind, prio, url_of(site, 0))
            )
        pipe.execute()
    client.close()


def scrapy_redis_node(
    url: str, name: str, args: dict[str, Any], start: Any, stop: Any, out: Any
) -> None:
    """scrapy-redis' scheduler per page: one pop, then per link ``request_seen`` (SADD) and,
    when new, ``push`` (ZADD) — each a blocking call, as its ``enqueue_request`` makes them."""
    import redis

    client = redis.Redis.from_url(url, socket_timeout=60)
    queue = PriorityQueue(client, _SPIDER, SR_QUEUE)
    dupefilter = _FpDupeFilter(client, SR_DUPEFILTER)
    rng = random.Random(name)
    links, seen_share = args["links"], args["seen"]
    fresh = pages = roundtrips = 0
    start.wait()
    t0 = time.perf_counter()
    while not stop.is_set():
        request = queue.pop()
        roundtrips += 1
        if request is None:
            continue
        pages += 1
        site = _site_of(request.url)
        for _ in range(links):
            if rng.random() < seen_share:
                u, kind, prio = url_of(site, rng.randrange(PRELOAD_PER_SITE)), "product", 100
            else:
                fresh += 1
                u = url_of(site, 10**9 + args["index"] * 10**8 + fresh)
                kind, prio = pick_kind(rng)
            child = request_of(u, kind, prio, request.url)
            roundtrips += 1
            if not dupefilter.request_seen(child):
                queue.push(child)
                roundtrips += 1
    out.put({"pages": pages, "roundtrips": roundtrips, "seconds": time.perf_counter() - t0})
    client.close()
