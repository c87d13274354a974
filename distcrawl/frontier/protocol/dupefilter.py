"""The shards' dupefilter from Python: which kind a crawl keeps, fingerprints recorded where
their site is unknown (``mark_seen``), and what it holds and costs, read without a SCAN."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from distcrawl.base.config import SETTINGS
from distcrawl.frontier.batch import fingerprint_args
from distcrawl.frontier.keys import FrontierKeys, ShardKeys, seen_counted
from distcrawl.frontier.protocol.runner import Call, Step, redis_command
from distcrawl.frontier.protocol.spec import COMMANDS

__all__ = [
    "Dupefilter",
    "dupefilter_bytes",
    "mark_seen",
    "seen",
]

#: a Redis string holds at most 512 MB
_MAX_BLOOM_BITS = 2**32 - 1

_MARK_SEEN = COMMANDS["mark_seen"]


@dataclass(frozen=True)
class Dupefilter:
    """Which dupefilter the shards keep: exact (a set of 16-byte fingerprints, the default) or
    a Bloom filter sized for ``capacity`` URLs at ``error_rate`` false positives (the node
    passes ``DISTCRAWL_DUPEFILTER``, ``DISTCRAWL_BLOOM_CAPACITY`` and
    ``DISTCRAWL_BLOOM_ERROR_RATE``; unset, the registry's defaults)."""

    kind: str = "exact"
    capacity: int = SETTINGS.default("DISTCRAWL_BLOOM_CAPACITY")
    error_rate: float = SETTINGS.default("DISTCRAWL_BLOOM_ERROR_RATE")

    def bloom_shape(self, shards: int) -> list[int] | None:
        """``[m, k]`` of each shard's Bloom filter (bits, hash functions), None when exact."""
        if self.kind != "bloom":
            return None
        if not (0 < self.error_rate < 1) or self.capacity <= 0:
            raise ValueError("the Bloom filter needs a capacity > 0 and an error rate in (0, 1)")
        per_shard = max(1, math.ceil(self.capacity / shards))
        bits = math.ceil(-per_shard * math.log(self.error_rate) / math.log(2) ** 2)
        bits = min(_MAX_BLOOM_BITS, bits)
        k = max(1, round(bits / per_shard * math.log(2)))
        return [bits, k]


def mark_seen(
    keys: FrontierKeys,
    fingerprints: Sequence[bytes | str],
    bloom: list[int] | None,
    forget_ms: int | None,
) -> Step[int]:
    """Record fingerprints of no known site in every shard. Returns how many were new (in the
    first shard)."""
    records = [fingerprint_args(fp, bloom=bloom is not None) for fp in fingerprints]
    header = _MARK_SEEN.encode_header(
        {"fingerprints": len(records), "bloom": bloom, "rv": forget_ms}
    )
    sections = _MARK_SEEN.encode_sections({"fingerprints": records})
    calls = [
        Call("mark_seen", (keys.shard(s).prefix,), [*_MARK_SEEN.encode(header=header), *sections])
        for s in range(keys.shards)
    ]
    added = yield calls
    return int(added[0]) if added else 0


def seen(keys: FrontierKeys) -> Step[int]:
    """URLs the dupefilter holds, over every shard, in any of its modes (O(shards) reads)."""
    shards = keys.all_shards()
    gens = yield [redis_command("GET", s.seen_generation) for s in shards]
    calls = [
        redis_command("HGET", name, "n")
        for s, g in zip(shards, gens, strict=True)
        for name in seen_counted(s, g)
    ]
    counts = yield calls
    return sum(int(c or 0) for c in counts)


def _usage(key: str) -> Call:
    return redis_command("MEMORY", "USAGE", key, "SAMPLES", "0")


def dupefilter_bytes(keys: FrontierKeys, bloom: bool, forget_ms: int | None) -> Step[int]:
    """Bytes the dupefilter takes (MEMORY USAGE of every bucket, or of the Bloom filters)."""
    shards = keys.all_shards()
    if forget_ms is not None:
        return (yield from _generations_bytes(shards, bloom))
    if bloom:
        sizes = yield [_usage(s.bloom) for s in shards]
        return sum(int(n or 0) for n in sizes)
    infos = yield [redis_command("HMGET", s.seen_info, "L", "split") for s in shards]
    calls: list[Call] = []
    for s, (level, split) in zip(shards, infos, strict=True):
        buckets = 2 ** int(level or 0) + int(split or 0)
        calls.append(_usage(s.seen_info))
        calls += [_usage(s.seen_bucket(b)) for b in range(buckets)]
    sizes = yield calls
    return sum(int(n or 0) for n in sizes)


def _generations_bytes(shards: list[ShardKeys], bloom: bool) -> Step[int]:
    """[revisit] MEMORY USAGE of the forgetting dupefilter's two live generations."""
    gens = yield [redis_command("GET", s.seen_generation) for s in shards]
    live = [
        (s, int(g) - d) for s, g in zip(shards, gens, strict=True) if g is not None for d in (0, 1)
    ]
    if bloom:
        sizes = yield [_usage(s.bloom_gen(g)) for s, g in live]
        return sum(int(n or 0) for n in sizes)
    infos = yield [redis_command("HMGET", s.seen_gen_info(g), "L", "split") for s, g in live]
    calls: list[Call] = [_usage(s.seen_generation) for s in shards]
    for (s, g), (level, split) in zip(live, infos, strict=True):
        if level is None and split is None:
            continue
        buckets = 2 ** int(level or 0) + int(split or 0)
        calls.append(_usage(s.seen_gen_info(g)))
        calls += [_usage(s.seen_gen_bucket(g, b)) for b in range(buckets)]
    sizes = yield calls
    return sum(int(n or 0) for n in sizes)
