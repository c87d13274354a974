"""Control of a whole crawl: pause and resume every node, or reset the crawl's state.

A reset deletes the queue, request payloads, dupefilter, parked retries, dead letters,
refused entries, node stats, site budgets and (unless kept) the seed list. It keeps the leases
and seeds of live nodes (so their acks stay consistent) unless forced, the id counter always
(a live node's late ack must never hit a new request), and a pause.
"""

from __future__ import annotations

import getpass
import json
import socket
import time
from typing import TYPE_CHECKING, Any

import redis

from distcrawl.frontier.store import FrontierStore
from distcrawl.ops.reads import Batch, read

if TYPE_CHECKING:
    from distcrawl.frontier.keys import FrontierKeys, ShardKeys

__all__ = ["LeasesKeptChanging", "counts", "is_paused", "pause", "reset", "reset_plan", "resume"]

#: attempts of a reset whose watched leases changed under it
_RESET_ATTEMPTS = 20


class LeasesKeptChanging(RuntimeError):
    """A reset gave up: the live nodes' leases changed under every attempt."""


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def pause(client: Any, keys: FrontierKeys) -> dict[str, Any]:
    """Pause every shard; the flag says who paused and when (read by nobody but people)."""
    who = {"at": time.time(), "by": f"{getpass.getuser()}@{socket.gethostname()}"}
    FrontierStore(client, keys).set_paused(json.dumps(who))
    return {"paused": True, **who}


def resume(client: Any, keys: FrontierKeys) -> dict[str, Any]:
    """Resume; idle nodes hear it on the wake channel and lease at once."""
    was_paused = is_paused(client, keys)
    FrontierStore(client, keys).set_paused(None)
    return {"paused": False, "was_paused": was_paused}


def is_paused(client: Any, keys: FrontierKeys) -> bool:
    return bool(client.exists(keys.paused))


def _live_nodes(client: Any, keys: FrontierKeys, heartbeat_timeout: float) -> tuple[list[str], int]:
    """The nodes that heart-beat within the timeout, and the oldest heartbeat (ms) still live."""
    seconds, micros = client.time()
    now_ms = int(seconds) * 1000 + int(micros) // 1000
    since = now_ms - int(heartbeat_timeout * 1000)
    return [_text(n) for n in client.zrangebyscore(keys.nodes, since, "+inf")], since


def counts(client: Any, keys: FrontierKeys) -> dict[str, int]:
    """What a reset is about to drop, for the operator's record."""
    shards = keys.all_shards()
    batch = Batch()
    for shard in shards:
        batch.add(("queued", shard.index), "zcard", shard.queue)
        batch.add(("seen", shard.index), "scard", shard.dupefilter)
        batch.add(("parked", shard.index), "zcard", shard.delayed)
        batch.add(("dead_letters", shard.index), "hlen", shard.dead)
    batch.add("seeds", "llen", keys.start_urls)
    got = read(client, batch)
    out = {
        name: sum(int(got[(name, shard.index)]) for shard in shards)
        for name in ("queued", "seen", "parked", "dead_letters")
    }
    out["seeds"] = int(got["seeds"])
    return out


def reset_plan(
    client: Any, keys: FrontierKeys, *, heartbeat_timeout: float, force: bool, keep_seeds: bool
) -> dict[str, Any]:
    """What :func:`reset` would delete now, and whose leases it would keep; deletes nothing."""
    live = [] if force else _live_nodes(client, keys, heartbeat_timeout)[0]
    would = counts(client, keys)
    if keep_seeds:
        would.pop("seeds")
    return {
        "would_delete": would,
        "keeps_leases_of": live,
        "kept_leases": sum(
            int(client.hlen(shard.held(n))) + int(client.zcard(shard.leases(n)))
            for shard in keys.all_shards()
            for n in live
        ),
    }


def reset(
    client: Any,
    keys: FrontierKeys,
    *,
    heartbeat_timeout: float,
    force: bool = False,
    keep_seeds: bool = False,
) -> dict[str, Any]:
    """Delete the crawl's state, one MULTI/EXEC per shard and one for the control slot; see
    the module docstring for what stays.

    The leases of live nodes are WATCHed: if one changes between the read and the EXEC, that
    shard is reset again from a fresh read, so a kept lease always keeps its payload.
    """
    found: set[str] = set()
    for pattern in keys.patterns():
        found |= {_text(k) for k in client.scan_iter(pattern, count=1000)}
    live, since = _live_nodes(client, keys, heartbeat_timeout)
    if force:
        live = []
    before = counts(client, keys)
    kept_leases = deleted = 0
    control_prefix = keys.prefix + ":"
    for shard in keys.all_shards():
        control = shard.prefix == keys.prefix
        prefix = control_prefix if control else shard.prefix + ":"
        mine = [k for k in found if k.startswith(prefix)]
        kept = {shard.seq, shard.paused, keys.paused, keys.nodes}
        kept |= {shard.held(n) for n in live} | {shard.leases(n) for n in live}
        kept |= {keys.seeding(n) for n in live}
        doomed = [k for k in mine if k not in kept]
        kept_here = _reset_shard(
            client, shard, live, doomed, force=force, since=since, control=keys if control else None
        )
        kept_leases += kept_here
        deleted += len(doomed)
    if keys.shards > 1:
        kept = {keys.paused, keys.nodes} | {keys.seeding(n) for n in live}
        doomed = [k for k in found if k.startswith(control_prefix) and k not in kept]
        pipe: Any = client.pipeline(transaction=True)
        if doomed:
            pipe.unlink(*doomed)
        pipe.zremrangebyscore(keys.nodes, "-inf", f"({since}")
        if force:
            pipe.unlink(keys.nodes)
        pipe.execute()
        deleted += len(doomed)
    if not keep_seeds:
        client.unlink(keys.start_urls)
    return {
        "reset": True,
        "deleted_keys": deleted + (0 if keep_seeds else 1),
        "before": before,
        "kept_leases": kept_leases,
        "live_nodes": live,
        "seeds_kept": keep_seeds,
        "still_paused": is_paused(client, keys),
    }


def _reset_shard(
    client: Any,
    shard: ShardKeys,
    live: list[str],
    doomed: list[str],
    *,
    force: bool,
    since: int,
    control: FrontierKeys | None,
) -> int:
    """Reset one shard, keeping the live nodes' leases and their payloads; returns the leases
    kept."""
    for _ in range(_RESET_ATTEMPTS):
        pipe: Any = client.pipeline(transaction=True)
        with pipe:
            try:
                reader: Any = client
                if live:
                    pipe.watch(*[k for n in live for k in (shard.held(n), shard.leases(n))])
                    reader = pipe  # a watching pipeline answers at once
                # a held lease keeps its value in its hash; older versions' leases in Q:req
                holding = {n: int(reader.hlen(shard.held(n))) for n in live}
                older = {n: [_text(r) for r in reader.zrange(shard.leases(n), 0, -1)] for n in live}
                rids = [rid for n in live for rid in older[n]]
                payloads = reader.hmget(shard.requests, rids) if rids else []
                pipe.multi()
                if doomed:
                    pipe.unlink(*doomed)
                if control is not None:
                    # dead nodes leave the heartbeat set with their leases; live ones stay
                    pipe.zremrangebyscore(control.nodes, "-inf", f"({since}")
                    if force:
                        pipe.unlink(control.nodes)
                kept = {r: p for r, p in zip(rids, payloads, strict=True) if p is not None}
                if kept:
                    pipe.hset(shard.requests, mapping=kept)
                # the status registry counts the leases kept (its hash was deleted with the rest)
                leases = {
                    shard.status_leases(n): holding[n] + len(older[n])
                    for n in live
                    if holding[n] + len(older[n])
                }
                if leases:
                    pipe.hset(shard.status, mapping=leases)
                pipe.execute()
            except redis.WatchError:
                continue
        return sum(holding.values()) + len(kept)
    raise LeasesKeptChanging("the live nodes' leases kept changing: pause the crawl, then reset")
