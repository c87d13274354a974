"""Probes: the links of a flush checked against the exact dupefilter with plain reads, before
they are pushed. A link that a shard's dupefilter already holds (the most, in a crawl whose
pages link to pages other nodes found) then costs the shard one member of an ``SMISMEMBER``
and never reaches the script; one it does not hold is pushed with the next flush, checked and
recorded again there (a read records nothing: a node that dies in between loses no link).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from distcrawl.frontier.batch import Child, fingerprint_args
from distcrawl.frontier.protocol.runner import Call, redis_command

if TYPE_CHECKING:
    from distcrawl.frontier.store import FrontierStore

__all__ = ["Probes"]


class Probes:
    """The probes of one flush: one ``SMISMEMBER`` per bucket they fall in, in shards whose
    buckets the node knows (exact dupefilter, not revisit mode); the rest go as children."""

    def __init__(self, store: FrontierStore, probes: Iterable[Child]) -> None:
        self.groups: list[list[Child]] = []
        self.calls: list[Call] = []
        #: probes that cannot be asked about (no fingerprint, a bucket state unknown, another
        #: dupefilter): the flush pushes them as children at once
        self.unasked: list[Child] = []
        keys, views = store.keys, store.views
        exact = store.bloom_shape is None and store.forget_ms is None
        by_bucket: dict[tuple[int, Any], tuple[list[Any], list[Child]]] = {}
        for c in probes:
            shard = keys.shard_of(c.site)
            buckets = views[shard].buckets if exact else None
            fp, bucket = (
                ("", None)
                if buckets is None
                else fingerprint_args(c.fp, bloom=False, buckets=buckets)
            )
            if not fp or c.own or c.dont_filter or c.delay_ms:
                self.unasked.append(c)
                continue
            members, children = by_bucket.setdefault((shard, bucket), ([], []))
            members.append(fp)
            children.append(c)
        for (shard, bucket), (members, children) in by_bucket.items():
            self.calls.append(
                redis_command("SMISMEMBER", keys.shard(shard).seen_bucket(bucket), *members)
            )
            self.groups.append(children)

    def answered(self, results: list[Any]) -> tuple[list[Child], int]:
        """The probes no dupefilter holds (to push), and how many one already holds."""
        fresh: list[Child] = []
        seen = 0
        for children, hits in zip(self.groups, results, strict=True):
            for child, hit in zip(children, hits, strict=True):
                if int(hit):
                    seen += 1
                else:
                    fresh.append(child)
        return fresh, seen
