"""The load bench/frontier.py simulates: the catalog pages' URLs, payloads (by the real codec),
fingerprints and priorities, the children a page pushes, and the run's parameters."""

from __future__ import annotations

import argparse
import hashlib
import random
from typing import Any

import scrapy
from scrapy.http import Request

from distcrawl.frontier.keys import DEFAULT_SHARDS
from distcrawl.frontier.store import Child, Dupefilter, FrontierKeys, FrontierStore, Revisit
from distcrawl.node.requests import codec
from distcrawl.node.revisit.schedule import revisit_payload

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


def cluster_shards(masters: int) -> int:
    """Shards that spread evenly over ``masters``: the first multiple of it from the default."""
    return -(-DEFAULT_SHARDS // masters) * masters
