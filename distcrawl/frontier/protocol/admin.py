"""Operator writes to a whole crawl: the pause flag, the format check, and a reset of the
crawl's state that keeps what live nodes hold."""

from __future__ import annotations

from typing import Any

import redis

from distcrawl.frontier.batch import text
from distcrawl.frontier.keys import STATUS_LEASES_FIELD, FrontierKeys, ShardKeys, seen_counted
from distcrawl.frontier.protocol.membership import LOST, CrawlFormatError
from distcrawl.frontier.protocol.runner import Call, Step, redis_command
from distcrawl.frontier.protocol.spec import FORMAT, queued_in

__all__ = ["LeasesKeptChanging", "check_format", "reset", "reset_plan", "set_paused"]

#: attempts of a reset whose watched leases changed under it
_RESET_ATTEMPTS = 20


class LeasesKeptChanging(RuntimeError):
    """A reset gave up: the live nodes' leases changed under every attempt."""


def set_paused(keys: FrontierKeys, paused: str | None) -> Step[list[Any]]:
    """Pause (``paused`` says who and when) or resume every shard and the control slot."""
    names = [keys.paused] + [s.paused for s in keys.all_shards()]
    calls: list[Call] = [
        redis_command("SET", k, paused) if paused is not None else redis_command("DEL", k)
        for k in dict.fromkeys(names)
    ]
    if paused is None:
        calls.append(redis_command("PUBLISH", keys.wake, "resumed"))
    results = yield calls
    return results


def check_format(keys: FrontierKeys) -> Step[int | None]:
    """The crawl's format (None: no node wrote one yet); raises :class:`CrawlFormatError`
    when it is another than this distcrawl's."""
    [found] = yield [redis_command("GET", keys.format)]
    if found is None:
        return None
    if text(found) != str(FORMAT):
        raise CrawlFormatError(keys.spider, text(found))
    return FORMAT


def reset(
    client: Any,
    keys: FrontierKeys,
    *,
    heartbeat_timeout: float,
    force: bool = False,
    keep_seeds: bool = False,
) -> dict[str, Any]:
    """Delete the crawl's state (a blocking client), one MULTI/EXEC per shard and one for the
    control slot. The leases and seeds of live nodes are kept unless ``force``, and so are the
    rid counters (a live node's late ack must never hit a new request), the pause flag and the
    format; the record of the crawl-wide settings and the start marker stay while live nodes
    remain (a marker that says the crawl was lost goes in any case). The leases of
    live nodes are WATCHed: if one changes between the read and the EXEC, that shard is reset
    again from a fresh read."""
    found: set[str] = set()
    for pattern in keys.patterns():
        found |= {text(k) for k in client.scan_iter(pattern, count=1000)}
    seconds, micros = client.time()
    now_ms = int(seconds) * 1000 + int(micros) // 1000
    since = now_ms - int(heartbeat_timeout * 1000)
    live = [] if force else [text(n) for n in client.zrangebyscore(keys.nodes, since, "+inf")]
    counts = _counts(client, keys)
    kept_leases = 0
    deleted = 0
    control_prefix = keys.prefix + ":"
    always = {keys.paused, keys.nodes, keys.format}
    if live:
        # the live nodes go on with the crawl-wide settings they started with: a node that
        # joins them must still match those (the record goes with the last live node)
        always.add(keys.config)
        if not text(client.get(keys.origin) or b"").startswith(LOST + " "):
            # and with the crawl's start marker they know (gone, they would stop as if Redis
            # had lost the crawl); a marker that says the crawl was lost always goes
            always.add(keys.origin)
    # the seeds live nodes took stay theirs; with keep_seeds, so do the seeds given back
    seeds = keys.seeds
    seeds_kept = {seeds.taken(n) for n in live}
    if keep_seeds:
        seeds_kept |= {seeds.returned, seeds.staged}
    for shard in keys.all_shards():
        mine = [k for k in found if k.startswith(shard.prefix + ":")]
        kept = {shard.seq, shard.paused, *always, *seeds_kept}
        kept |= {shard.held(n) for n in live}
        kept_here, deleted_here = _reset_slot(
            client,
            shard,
            live,
            [k for k in mine if k not in kept],
            force=force,
            since=since,
            control=keys if shard.prefix == keys.prefix else None,
        )
        kept_leases += kept_here
        deleted += deleted_here
    if keys.shards > 1:
        kept = always | seeds_kept
        doomed = [k for k in found if k.startswith(control_prefix) and k not in kept]
        pipe: Any = client.pipeline(transaction=True)
        if doomed:
            pipe.unlink(*doomed)
        pipe.zremrangebyscore(keys.nodes, "-inf", f"({since}")
        if force:
            pipe.unlink(keys.nodes)
        pipe.execute()
        deleted += len(doomed)
    if seeds.prefix != keys.prefix and all(seeds.prefix != s.prefix for s in keys.all_shards()):
        # the seed list's slot of its own (its name hashes elsewhere): the crawl's keys there
        doomed = [k for k in found if k.startswith(seeds.prefix + ":") and k not in seeds_kept]
        if doomed:
            client.unlink(*doomed)
        deleted += len(doomed)
    if not keep_seeds:
        client.unlink(keys.start_urls)
    return {
        "reset": True,
        "deleted_keys": deleted + (0 if keep_seeds else 1),
        "before": counts,
        "kept_leases": kept_leases,
        "live_nodes": live,
        "seeds_kept": keep_seeds,
    }


def _reset_slot(
    client: Any,
    shard: ShardKeys,
    live: list[str],
    doomed: list[str],
    *,
    force: bool,
    since: int,
    control: FrontierKeys | None,
) -> tuple[int, int]:
    """Reset one shard, keeping the live nodes' leases (each with its value in its line)."""
    for _ in range(_RESET_ATTEMPTS):
        pipe: Any = client.pipeline(transaction=True)
        with pipe:
            try:
                reader: Any = client
                if live:
                    pipe.watch(*[shard.held(n) for n in live])
                    reader = pipe  # a watching pipeline answers at once
                holding = {n: int(reader.hlen(shard.held(n))) for n in live}
                pipe.multi()
                if doomed:
                    pipe.unlink(*doomed)
                if control is not None:
                    # dead nodes leave the heartbeat set with their leases; live ones stay
                    pipe.zremrangebyscore(control.nodes, "-inf", f"({since}")
                    if force:
                        pipe.unlink(control.nodes)
                # the status registry counts the leases kept (its hash was deleted with the rest)
                counts = {STATUS_LEASES_FIELD + n: holding[n] for n in live if holding[n]}
                if counts:
                    pipe.hset(shard.status, mapping=counts)
                pipe.execute()
            except redis.WatchError:
                continue
        return sum(holding.values()), len(doomed)
    raise LeasesKeptChanging("the live nodes' leases kept changing: pause the crawl, then reset")


def _counts(reader: Any, keys: FrontierKeys) -> dict[str, int]:
    """What a reset is about to drop, for the operator's record."""
    shards = keys.all_shards()
    pipe = reader.pipeline(transaction=False)
    for shard in shards:
        pipe.zrange(shard.levels, 0, -1, withscores=True)
        pipe.get(shard.seen_generation)
        pipe.zcard(shard.delayed)
        pipe.hlen(shard.dead)
    values = pipe.execute()
    # the URLs each dupefilter holds, in any of its modes (revisit: its live generations)
    pipe = reader.pipeline(transaction=False)
    for shard, generation in zip(shards, values[1::4], strict=True):
        for name in seen_counted(shard, generation):
            pipe.hget(name, "n")
    return {
        "queued": sum(queued_in(v) for v in values[0::4]),
        "seen": sum(int(n or 0) for n in pipe.execute()),
        "parked": sum(int(v) for v in values[2::4]),
        "dead_letters": sum(int(v) for v in values[3::4]),
        "seeds": int(reader.llen(keys.start_urls)),
    }


def reset_plan(
    client: Any, keys: FrontierKeys, *, heartbeat_timeout: float, force: bool, keep_seeds: bool
) -> dict[str, Any]:
    """What ``reset`` would delete now, and whose leases it would keep; deletes nothing."""
    seconds, _ = client.time()
    since = (int(seconds) - heartbeat_timeout) * 1000
    live = [] if force else [text(n) for n in client.zrangebyscore(keys.nodes, since, "+inf")]
    would = _counts(client, keys)
    if keep_seeds:
        would.pop("seeds")
    return {
        "would_delete": would,
        "keeps_leases_of": live,
        "kept_leases": sum(
            int(client.hlen(shard.held(n))) for shard in keys.all_shards() for n in live
        ),
    }
