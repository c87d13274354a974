"""The frontier's own capacity: no HTTP, no Scrapy engine, only the real store and script code.

Simulated nodes (processes) drive the frontier exactly as a node's I/O loop does: one ``sync``
per flush that acks the pages of the last lease, pushes their links and leases the next
batch. Each leased page pushes ``--links`` links (default 20) of which ``--seen`` (default
95 %) are already in the dupefilter, so about one new URL per page as in a steady crawl, over
``--sites`` sites (default 1,000). Payloads are made by the real codec from the requests a
catalog page yields (Referer header, page kind, depth), fingerprints as Scrapy's (40 hex).

Measured against a fresh single Redis (valkey-server, append-only file on), and with
``--cluster 3`` against a local 3-master Redis Cluster, the two loads alternating in
``--rounds`` windows (default 3) so both see the same machine load; the same load also runs through
vanilla scrapy-redis 0.9.1's ``PriorityQueue`` and ``RFPDupeFilter`` as a baseline
(``scrapy_redis_*`` keys). Memory per URL is measured at ``--urls N`` (default 1,000,000)
URLs, bulk-loaded through the real push path in large batches.

    .venv/bin/python bench/frontier.py --json
    .venv/bin/python bench/frontier.py --cluster 3 --json
    .venv/bin/python bench/frontier.py --urls 4000000 --seconds 0 --json   # memory only

With ``--revisit`` the frontier runs in revisit mode (DISTCRAWL_REVISIT): the dupefilter
forgets (generations of ``--forget`` seconds), every ack schedules its page again after
``--revisit-interval`` seconds with a payload carrying an ETag, a Last-Modified date and a
content hash, and the memory run also leases every loaded URL once and schedules it again:
``revisit_bytes_per_url`` is what a scheduled page costs (its due entry and its payload).
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import multiprocessing as mp
import random
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import scrapy
from scrapy.http import Request
from scrapy_redis.dupefilter import RFPDupeFilter
from scrapy_redis.queue import PriorityQueue

from distcrawl.base.config import SETTINGS
from distcrawl.base.recent import RecentKeys
from distcrawl.frontier import connection
from distcrawl.frontier.batch import new_rid_tag
from distcrawl.frontier.keys import DEFAULT_SHARDS
from distcrawl.frontier.store import Child, Dupefilter, FrontierKeys, FrontierStore, Revisit
from distcrawl.node.requests import codec
from distcrawl.node.revisit.schedule import revisit_payload
from distcrawl.node.scheduler.tracking import DEFAULT_KNOWN_FINGERPRINTS
from distcrawl.servers.cluster import LocalRedisCluster

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _accounting import redis_delta, redis_snapshot
from _processes import Services
from _results import print_report

SPIDER = "catalog"
#: the seed list inside the control slot, as on a Redis Cluster
START_KEY = "{catalog}:start_urls"
#: page kinds of the links a page yields, with their priority and share of new URLs
KINDS = (("category", 300, 0.02), ("listing", 200, 0.18), ("product", 100, 0.80))
#: URLs of each site in the frontier before the run: the pool the "already seen" links
#: are drawn from, and the first pages to lease
PRELOAD_PER_SITE = 20
#: children per push when bulk-loading ``--urls``
LOAD_BATCH = 5000
HEADLINE = (
    "pages_per_second",
    "redis_cpu_us_per_page",
    "commands_per_page",
    "roundtrips_per_page",
    "seen_bytes_per_url",
    "queued_bytes_per_url",
    "priority_inversions",
    "revisit_bytes_per_url",
    "scrapy_redis_pages_per_second",
    "scrapy_redis_redis_cpu_us_per_page",
)


class _Spider(scrapy.Spider):
    name = SPIDER

    def parse(self, response: Any) -> Any:  # pragma: no cover - never called
        return None


_SPIDER = _Spider()


def queue_payload(request: Request) -> str:
    """A request's payload as the scheduler queues it: the order score carries the priority."""
    return codec.encode(request, _SPIDER, priority=False)


def url_of(site: int, page: int) -> str:
    """Every URL has the same length, so a payload made once can be reused for any URL."""
    return f"http://s{site:05d}.test/p/{page:010d}"


def fingerprint(url: str) -> bytes:
    """As a node sends it: the first 16 bytes of a SHA-1 request fingerprint."""
    return hashlib.sha1(url.encode()).digest()[:16]


def hex_fingerprint(url: str) -> str:
    """As scrapy-redis' dupefilter stores it: 40 hex digits."""
    return hashlib.sha1(url.encode()).hexdigest()


def request_of(url: str, kind: str, priority: int, referer: str) -> Request:
    """What a catalog page yields once Scrapy's spider middlewares have seen it."""
    return Request(
        url,
        callback=_SPIDER.parse,
        priority=priority,
        headers={"Referer": referer},
        meta={"page_kind": kind, "depth": 3},
    )


class Payloads:
    """Payloads by the real codec, made once per page kind and reused with the URL and the
    Referer swapped in. URLs have one length, so the swap is exact in JSON and in pickle; the
    Referer is the page's, of the same site, as the codec sees it (whole, or as its path)."""

    def __init__(self, encode: Any) -> None:
        self.encode = encode
        self._templates: dict[str, Any] = {}
        self._probe = url_of(99999, 9999999999)
        self._ref = url_of(99999, 9999999998)

    def make(self, url: str, kind: str, priority: int, referer: str) -> Any:
        template = self._templates.get(kind)
        if template is None:
            template = self.encode(request_of(self._probe, kind, priority, self._ref))
            self._templates[kind] = template
        probe, ref = self._probe, self._ref
        ref_path, referer_path = probe_path(ref), probe_path(referer)
        if isinstance(template, bytes):
            out = template.replace(probe.encode(), url.encode())
            return out.replace(ref.encode(), referer.encode()).replace(
                ref_path.encode(), referer_path.encode()
            )
        if probe not in template:
            return self.encode(request_of(url, kind, priority, referer))
        out = template.replace(probe, url)
        return out.replace(ref, referer).replace(ref_path, referer_path)


def probe_path(url: str) -> str:
    return url[url.index("/", len("http://")) :]


def pick_kind(rng: random.Random) -> tuple[str, int]:
    x = rng.random()
    for kind, prio, share in KINDS:
        if x < share:
            return kind, prio
        x -= share
    return KINDS[-1][0], KINDS[-1][1]


def _site_of(url: str) -> int:
    return int(url[8:13])


# --------------------------------------------------------------------------- distcrawl


def make_store(client: Any, args: dict[str, Any]) -> FrontierStore:
    keys = FrontierKeys(SPIDER, START_KEY, shards=args["shards"])
    dupefilter = Dupefilter(kind=args["dupefilter"], capacity=args["capacity"])
    forget = args.get("forget_ms") if args.get("revisit_ms") else None
    return FrontierStore(client, keys, dupefilter=dupefilter, forget_ms=forget)


#: the revisit state a page's next visit carries (sizes as a real shop's validators)
REVISIT_STATE = {
    "e": '"5f3a9c1e27b4"',
    "l": "Tue, 01 Dec 2026 10:00:00 GMT",
    "h": "9c1e27b45f3a0d11",
    "d": 1796119200000,  # the fixed-rate schedule's due time (ms)
}


def revisit_of(leased: Any, interval_ms: int, url: str) -> Revisit:
    """The ack of a leased page as revisit mode sends it."""
    return Revisit(
        leased.lease, interval_ms, revisit_payload(leased.payload, REVISIT_STATE), fingerprint(url)
    )


def child(payloads: Payloads, u: str, kind: str, prio: int, referer: str) -> Child:
    site = f"s{_site_of(u):05d}.test"
    return Child(fingerprint(u), prio, False, 0, site, payloads.make(u, kind, prio, referer))


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
    children: list[Child] = []
    acks: list[Any] = []
    revisits: list[Revisit] = []
    revisit_ms = int(args.get("revisit_ms") or 0)
    pages = roundtrips = inversions = shard_calls = 0
    store.heartbeat(name, "{}")
    start.wait()
    t0 = last_beat = time.perf_counter()
    while not stop.is_set():
        reply = store.sync(
            name, children=children, acks=acks, lease=lease_n, tag=tag, revisits=revisits
        )
        if reply.rewound is not None:  # a fresh server that nobody restarts
            raise RuntimeError("the bench's Redis lost writes")
        roundtrips += 1
        shard_calls += reply.shards_called
        inversions += reply.priority_inversions
        sent += len(children)
        children, acks, revisits = [], [], []
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
                children.append(child(payloads, u, kind, prio, page_url))
        pages += len(reply.leased)
        if pace > 0:  # a node held to `pace` pages/s (the single Redis at a master's rate)
            stop.wait(max(0.0, t0 + pages / pace - time.perf_counter()))
        if time.perf_counter() - last_beat > 2.0:  # as a node does: learns the live nodes
            store.heartbeat(name, "{}")
            roundtrips += 1
            last_beat = time.perf_counter()
    if acks or revisits:
        store.sync(name, children=children, acks=acks, tag=tag, revisits=revisits)
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


# --------------------------------------------------------------------------- runs


def _snapshots(target: Any) -> list[dict[str, Any]]:
    out = []
    for c in target["clients"]:
        snap = redis_snapshot(c)
        stats = c.info("stats")
        snap["net_in"] = int(stats["total_net_input_bytes"])
        snap["net_out"] = int(stats["total_net_output_bytes"])
        out.append(snap)
    return out


#: a number per simulated node process of the whole run: the new URLs a node makes carry it, so
#: that the nodes of a later window on the same server never make an earlier window's URLs again
#: (those would be filtered, and the queue would drain over the windows)
_node_numbers = itertools.count()


def run_load(
    target: dict[str, Any],
    node_main: Any,
    args: argparse.Namespace,
    seconds: float | None = None,
    pace: float = 0.0,
) -> dict[str, Any]:
    """*args.nodes* node processes for *seconds* (default ``--seconds``); what they did and
    what Redis spent. ``pace``: the pages per second of all nodes together (0: as many as
    they can)."""
    ctx = mp.get_context("fork")
    start, stop, out = ctx.Event(), ctx.Event(), ctx.Queue()
    procs = []
    for i in range(args.nodes):
        params = {**node_args(args), "index": next(_node_numbers), "pace": pace / args.nodes}
        p = ctx.Process(
            target=node_main, args=(target["url"], f"sim-{i}", params, start, stop, out)
        )
        p.start()
        procs.append(p)
    time.sleep(0.5)  # let the processes connect before the window opens
    before = _snapshots(target)
    t0 = time.perf_counter()
    start.set()
    time.sleep(args.seconds if seconds is None else seconds)
    stop.set()
    results = [out.get(timeout=60) for _ in procs]
    wall = time.perf_counter() - t0
    after = _snapshots(target)
    for p in procs:
        p.join(timeout=30)
    deltas = [redis_delta(b, a) for b, a in zip(before, after, strict=True)]
    pages = sum(r["pages"] for r in results) or 1
    net_in = sum(a["net_in"] - b["net_in"] for b, a in zip(before, after, strict=True))
    net_out = sum(a["net_out"] - b["net_out"] for b, a in zip(before, after, strict=True))
    cpu = [d["cpu_s"] for d in deltas]
    by_name: dict[str, int] = {}
    usec_by_name: dict[str, int] = {}
    for d in deltas:
        for name, n in d["by_command"].items():
            by_name[name] = by_name.get(name, 0) + n
        for name, n in d["usec_by_command"].items():
            usec_by_name[name] = usec_by_name.get(name, 0) + n
    return {
        "pages": pages,
        "pages_per_second": round(pages / wall, 1),
        "redis_cpu_us_per_page": round(sum(cpu) / pages * 1e6, 2),
        "commands_per_page": round(sum(d["commands"] for d in deltas) / pages, 2),
        "roundtrips_per_page": round(sum(r["roundtrips"] for r in results) / pages, 4),
        # links that reached Redis per page (the rest the node knew it had sent already)
        "children_sent_per_page": round(sum(r.get("children_sent", 0) for r in results) / pages, 2),
        "priority_inversions": sum(r.get("inversions", 0) for r in results),
        "shard_calls_per_roundtrip": round(
            sum(r.get("shard_calls", 0) for r in results)
            / max(1, sum(r["roundtrips"] for r in results)),
            2,
        ),
        # where the commands go (those inside the script included), most frequent first
        "commands_per_page_by_name": {
            name: round(n / pages, 2)
            for name, n in sorted(by_name.items(), key=lambda kv: -kv[1])
            if n / pages >= 0.01
        },
        # Redis' own timing (INFO commandstats usec) per page: evalsha includes the
        # script's redis.calls, listed again under their names. Wall-clock time inside the
        # command, not CPU: on a loaded machine it includes time the server was preempted
        "command_us_per_page_by_name": {
            name: round(n / pages, 2)
            for name, n in sorted(usec_by_name.items(), key=lambda kv: -kv[1])
            if n / pages >= 0.01
        },
        "net_in_bytes_per_page": round(net_in / pages),
        "net_out_bytes_per_page": round(net_out / pages),
        "cpu_per_master": cpu,
        # each master's commands per page (a cluster's balance: which master does what)
        "commands_per_page_by_master": [
            {
                name: round(n / pages, 3)
                for name, n in sorted(d["by_command"].items(), key=lambda kv: -kv[1])
                if n / pages >= 0.001
            }
            for d in deltas
        ],
    }


def run_alternating(
    single: dict[str, Any], cluster: dict[str, Any], args: argparse.Namespace
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """The distcrawl load on the single Redis and on the cluster in ``--rounds`` alternating
    windows of ``--seconds / --rounds`` each, so that both see the same machine load however
    the rest of the machine's work comes and goes; then, in each round, the single Redis held
    to the cluster's rate over its masters. Returns the three runs, windows combined."""
    seconds = args.seconds / args.rounds
    on_single, on_cluster, at_rate = [], [], []
    for _ in range(args.rounds):
        on_single.append(run_load(single, distcrawl_node, args, seconds))
        on_cluster.append(run_load(cluster, distcrawl_node, args, seconds))
        # and the single Redis held to the pages per second one master just served: what a
        # server costs per page depends on how busy it is (on this VM a server that idles
        # between calls runs them with cold caches), so this compares like with like
        rate = on_cluster[-1]["pages_per_second"] / args.cluster
        at_rate.append(run_load(single, distcrawl_node, args, seconds, pace=rate))
    return combine(on_single), combine(on_cluster), combine(at_rate)


def combine(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Windows of one target as one run: counts summed, per-page figures weighted by pages,
    per-round-trip ones by round trips, CPU per master summed."""
    if len(runs) == 1:
        return runs[0]
    pages = sum(r["pages"] for r in runs)
    trips = [r["pages"] * r["roundtrips_per_page"] for r in runs]
    out = dict(runs[0])
    for key, value in runs[0].items():
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            continue
        values = [r[key] for r in runs]
        if key.endswith("_per_page"):
            digits = 4 if key.startswith("roundtrips") else 2
            weighted = sum(v * r["pages"] for v, r in zip(values, runs, strict=True))
            out[key] = round(weighted / pages, digits)
        elif key.endswith("_per_roundtrip"):
            out[key] = round(
                sum(v * t for v, t in zip(values, trips, strict=True)) / max(1e-9, sum(trips)), 2
            )
        elif key == "pages_per_second":
            wall = sum(r["pages"] / v for r, v in zip(runs, values, strict=True) if v)
            out[key] = round(pages / wall, 1) if wall else 0.0
        else:
            out[key] = sum(values)
    out["cpu_per_master"] = [sum(c) for c in zip(*(r["cpu_per_master"] for r in runs), strict=True)]
    return out


def _memory(client: Any) -> int:
    return int(client.info("memory")["used_memory"])


def _usage(client: Any, key: str) -> int:
    return int(client.memory_usage(key, samples=0) or 0)


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
    # what a queued request costs: its queue entry and payload (the two keys of each shard
    # that grow with the queue); the rest of what the load added is the dupefilter
    queued = sum(_usage(client, s.queue) + _usage(client, s.requests) for s in shards)
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


def single_target(services: Services) -> dict[str, Any]:
    import redis

    return {"url": services.redis_url, "clients": [redis.Redis.from_url(services.redis_url)]}


def cluster_target(cluster: LocalRedisCluster) -> dict[str, Any]:
    return {"url": cluster.url, "clients": [m.client() for m in cluster.masters]}


def node_args(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "links": args.links,
        "seen": args.seen,
        "lease": args.lease,
        "shards": args.shards,
        "dupefilter": args.dupefilter,
        "known": args.known,
        # the Bloom filter of a load run is sized for what the run pushes
        "capacity": max(1_000_000, args.urls),
        "sites": args.sites,
        "revisit_ms": int(args.revisit_interval * 1000) if args.revisit else 0,
        "forget_ms": int(args.forget * 1000),
    }


def cluster_report(
    single: dict[str, Any],
    run: dict[str, Any],
    args: argparse.Namespace,
    at_rate: dict[str, Any] | None = None,
) -> dict[str, Any]:
    cpu = run["cpu_per_master"]
    total = sum(cpu) or 1e-9
    shares = [c / total for c in cpu]
    overhead = run["redis_cpu_us_per_page"] / single["redis_cpu_us_per_page"]
    same_rate: dict[str, Any] = {}
    if at_rate is not None:
        # the masters' CPU per page over that of the single Redis serving one master's rate
        equal = run["redis_cpu_us_per_page"] / at_rate["redis_cpu_us_per_page"]
        same_rate = {
            "single_at_master_rate_pages_per_second": at_rate["pages_per_second"],
            "single_at_master_rate_redis_cpu_us_per_page": at_rate["redis_cpu_us_per_page"],
            "cluster_cpu_overhead_at_master_rate": round(equal, 3),
        }
    return {
        **same_rate,
        "cluster_masters": args.cluster,
        "rounds": args.rounds,
        "cluster_pages_per_second": run["pages_per_second"],
        "cluster_redis_cpu_us_per_page": run["redis_cpu_us_per_page"],
        "cluster_commands_per_page": run["commands_per_page"],
        "cluster_roundtrips_per_page": run["roundtrips_per_page"],
        "share_per_master": [round(s, 3) for s in shares],
        "balance_max_over_mean": round(max(shares) / (1 / len(shares)), 3),
        "cluster_cpu_overhead": round(overhead, 3),
        "projected_speedup": round(1 / (max(shares) * overhead), 2),
        # where the cluster's extra CPU goes: the masters' commands, summed, as for one Redis
        "cluster_commands_per_page_by_name": run["commands_per_page_by_name"],
        "cluster_command_us_per_page_by_name": run["command_us_per_page_by_name"],
        "cluster_commands_per_page_by_master": run["commands_per_page_by_master"],
    }


def cluster_shards(masters: int) -> int:
    """Shards that spread evenly over ``masters``: the first multiple of it from the default."""
    return -(-DEFAULT_SHARDS // masters) * masters


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--nodes", type=int, default=2, help="simulated node processes")
    parser.add_argument("--seconds", type=float, default=8.0, help="length of each load run")
    parser.add_argument("--sites", type=int, default=1000)
    parser.add_argument("--links", type=int, default=20, help="links pushed per page")
    parser.add_argument("--seen", type=float, default=0.95, help="share of links already seen")
    parser.add_argument(
        "--lease",
        type=int,
        default=SETTINGS.default("DISTCRAWL_PREFETCH"),
        help="leases per flush (default: a node's DISTCRAWL_PREFETCH at the default concurrency)",
    )
    parser.add_argument("--urls", type=int, default=1_000_000, help="URLs loaded for memory")
    parser.add_argument("--cluster", type=int, default=0, help="masters of a Redis Cluster run")
    parser.add_argument(
        "--shards",
        type=int,
        default=None,
        help=f"frontier shards (default {DEFAULT_SHARDS}; with --cluster M, the first multiple "
        f"of M from {DEFAULT_SHARDS}, as the docs advise for a cluster)",
    )
    parser.add_argument("--dupefilter", choices=("exact", "bloom"), default="exact")
    parser.add_argument(
        "--known",
        type=int,
        default=DEFAULT_KNOWN_FINGERPRINTS,
        help="fingerprints a node remembers having sent and drops links to, as the scheduler "
        "does (0: every link goes to Redis)",
    )
    parser.add_argument("--no-baseline", action="store_true", help="skip scrapy-redis")
    parser.add_argument("--revisit", action="store_true", help="revisit mode (see above)")
    parser.add_argument(
        "--revisit-interval", type=float, default=5.0, help="seconds before a page comes back"
    )
    parser.add_argument(
        "--forget", type=float, default=2 * 6 * 3600 * 4.0, help="dupefilter generation, s"
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="with --cluster: windows the single-Redis and the cluster load alternate in",
    )
    args = parser.parse_args(argv)
    args.rounds = max(1, args.rounds)
    if args.shards is None:
        args.shards = cluster_shards(args.cluster) if args.cluster else DEFAULT_SHARDS
    # a SIGTERM unwinds like Ctrl-C, so every server this run started is stopped
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    report: dict[str, Any] = {
        "nodes": args.nodes,
        "seconds": args.seconds,
        "sites": args.sites,
        "links_per_page": args.links,
        "seen_share": args.seen,
        "lease": args.lease,
        "shards": args.shards,
        "dupefilter": args.dupefilter,
        "revisit": args.revisit,
        "known": args.known,
    }
    params = node_args(args)
    cluster: LocalRedisCluster | None = None
    if args.cluster and args.seconds > 0:
        home = Path(tempfile.mkdtemp(prefix="distcrawl-bench-cluster-"))
        cluster = LocalRedisCluster(home, masters=args.cluster).start()
    try:
        with Services() as services:
            single = single_target(services)
            if args.seconds > 0:
                preload(services.redis_url, args.sites, params)
                if cluster is not None:
                    preload(cluster.url, args.sites, params)
                    run, on_cluster, at_rate = run_alternating(
                        single, cluster_target(cluster), args
                    )
                    report.update(cluster_report(run, on_cluster, args, at_rate))
                else:
                    run = run_load(single, distcrawl_node, args)
                run.pop("cpu_per_master")
                run.pop("commands_per_page_by_master")
                report.update(run)
            if args.urls > 0:
                report.update(distcrawl_memory(services.redis_url, args.urls, params))
            if not args.no_baseline:
                single["clients"][0].flushall()
                if args.seconds > 0:
                    scrapy_redis_preload(services.redis_url, args.sites)
                    base = run_load(single, scrapy_redis_node, args)
                    for key in (
                        "pages_per_second",
                        "redis_cpu_us_per_page",
                        "commands_per_page",
                        "roundtrips_per_page",
                    ):
                        report[f"scrapy_redis_{key}"] = base[key]
                if args.urls > 0:
                    sr = scrapy_redis_memory(services.redis_url, args.urls, args.sites)
                    report.update({f"scrapy_redis_{k}": v for k, v in sr.items()})
            single["clients"][0].flushall()
    finally:
        if cluster is not None:
            cluster.stop()
            shutil.rmtree(cluster.home, ignore_errors=True)
    print_report(report, HEADLINE, as_json=args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
