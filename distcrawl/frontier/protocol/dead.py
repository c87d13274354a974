"""Dead letters from Python: back to the queue through the library, or deleted."""

from __future__ import annotations

from collections.abc import Sequence

from distcrawl.frontier.batch import new_rid_tag
from distcrawl.frontier.keys import FrontierKeys
from distcrawl.frontier.protocol.runner import Call, Step, redis_command, shard_call

__all__ = ["purge_dead", "requeue_dead"]

#: most dead letters named in one call
_BATCH = 1000


def requeue_dead(keys: FrontierKeys, ids: list[str], max_count: int) -> Step[list[int]]:
    """Move dead letters (the named ones, or up to ``max_count`` per shard) back to the queue.
    Returns how many moved, per shard."""
    # a tag of its own per call: the new rids cannot meet older ones, whatever Redis lost
    tag = new_rid_tag()
    calls = [
        shard_call(keys, s, "requeue_dead", max=max_count, tag=tag, ids=ids)
        for s in range(keys.shards)
    ]
    counts = [int(n) for n in (yield calls)]
    moved = sum(counts)
    if moved:
        wake: list[Call] = [
            redis_command("PUBLISH", keys.wake, shard) for shard, n in enumerate(counts) if n
        ]
        yield [redis_command("HINCRBY", keys.counters, "requeued_dead_letters", moved), *wake]
    return counts


def purge_dead(keys: FrontierKeys, ids: Sequence[str], shard: int | None = None) -> Step[int]:
    """Delete the dead letters ``ids`` from ``shard``, or from whichever shard holds them (no
    shard given). Returns how many were deleted."""
    shards = keys.all_shards() if shard is None else [keys.shard(shard)]
    calls = [
        redis_command("HDEL", s.dead, *ids[i : i + _BATCH])
        for i in range(0, len(ids), _BATCH)
        for s in shards
    ]
    return sum(int(n) for n in (yield calls)) if calls else 0
