"""Requests a test of the frontier's API pushes, and what it reads back of them."""

from __future__ import annotations

import hashlib
import json

from distcrawl.frontier.store import Child, FrontierStore, SyncResult

__all__ = ["child", "fingerprint", "leased_urls", "leases_of", "queued"]


def child(
    url: str,
    prio: int = 0,
    fp: str | None = None,
    dont_filter: bool = False,
    delay: int = 0,
    site: str = "",
) -> Child:
    raw = (fp if fp is not None else url).encode()
    return Child(raw, prio, dont_filter, delay, site, json.dumps({"url": url}))


def leased_urls(result: SyncResult) -> list[str]:
    return [json.loads(leased.payload)["url"] for leased in result.leased]


def queued(store: FrontierStore) -> int:
    return int(store.drained()[0])


def leases_of(store: FrontierStore, node: str) -> int:
    return sum(len(rids) for rids in store.held_leases(node).values())


def fingerprint(i: int) -> bytes:
    """The fingerprint of URL ``i`` of one site."""
    return hashlib.sha1(f"http://s.test/{i}".encode()).digest()[:16]
