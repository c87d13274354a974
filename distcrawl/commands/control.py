"""``control``: pause and resume the whole cluster, or reset a crawl's state.

``scrapy control catalog pause``   nodes hand out no new leases; what they hold they finish,
                                   and they keep heart-beating, so nothing is recovered or lost.
``scrapy control catalog resume``  leasing starts again on every node.
``scrapy control catalog reset --yes-really [--force] [--keep-seeds]``
    deletes the crawl's state: queue, request payloads, dupefilter (seen URLs), parked retries,
    dead letters, rejected entries, node stats, site budgets, the seed list and the record of
    the crawl-wide settings (so the next node may start with others). The leases, seeds and
    that record of *live* nodes are kept (so their acks stay consistent, and a node that joins
    them still matches them) unless ``--force``; the id
    counter is always kept (a live node's late ack must never hit a new request), and so is a
    pause (resume when ready). Pause, wait for in-flight work to finish, then reset.
"""

from __future__ import annotations

import argparse
import getpass
import json
import socket
import sys
import time
from typing import TYPE_CHECKING, Any

import redis

from distcrawl.commands._common import (
    add_spider_argument,
    check_crawl,
    crawl_keys,
    entry_points,
    heartbeat_timeout,
    redis_client,
    redis_error,
    redis_url,
    warn_if_no_crawl,
)
from distcrawl.frontier.store import FrontierStore

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

    from distcrawl.frontier.keys import FrontierKeys, ShardKeys

__all__ = ["Command", "add_arguments", "execute", "pause", "reset", "resume", "run"]

ACTIONS = ("pause", "resume", "reset")
#: attempts of a reset whose watched leases changed under it
_RESET_ATTEMPTS = 20


def add_command_arguments(parser: argparse.ArgumentParser) -> None:
    add_spider_argument(parser)
    parser.add_argument("action", choices=ACTIONS, help="pause | resume | reset")
    parser.add_argument(
        "--yes-really",
        action="store_true",
        help="confirm a reset (it cannot be undone); without it, reset only lists what it "
        "would delete",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="reset: also drop the leases and seeds of live nodes (stop the nodes first)",
    )
    parser.add_argument(
        "--keep-seeds", action="store_true", help="reset: keep the seed list (start_urls)"
    )
    parser.add_argument("--json", action="store_true", help="print the outcome as JSON")


def pause(client: redis.Redis, keys: FrontierKeys) -> dict[str, Any]:
    """Set the pause flag; the value says who paused and when (read by nobody but people)."""
    who = {"at": time.time(), "by": f"{getpass.getuser()}@{socket.gethostname()}"}
    FrontierStore(client, keys).set_paused(json.dumps(who))  # every shard's flag too
    return {"paused": True, **who}


def resume(client: redis.Redis, keys: FrontierKeys) -> dict[str, Any]:
    was_paused = bool(client.exists(keys.paused))
    # idle nodes hear it on the wake channel and lease at once, not at their next poll
    FrontierStore(client, keys).set_paused(None)
    return {"paused": False, "was_paused": was_paused}


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def reset(
    client: redis.Redis,
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
    seconds, micros = client.time()
    now_ms = int(seconds) * 1000 + int(micros) // 1000
    since = now_ms - int(heartbeat_timeout * 1000)
    live = [] if force else [_text(n) for n in client.zrangebyscore(keys.nodes, since, "+inf")]
    counts = _counts(client, keys)
    kept_leases = 0
    deleted = 0
    control_prefix = keys.prefix + ":"
    shards = keys.all_shards()
    for shard in shards:
        mine = [k for k in found if k.startswith(shard.prefix + ":")]
        if shard.prefix == keys.prefix:
            mine = [k for k in found if k.startswith(control_prefix)]
        kept = {shard.seq, shard.paused, keys.paused, keys.nodes}
        kept |= {shard.held(n) for n in live} | {shard.leases(n) for n in live}
        kept |= {keys.seeding(n) for n in live}
        # the live nodes go on with the crawl-wide settings they started with: a node that
        # joins them must still match those (the record goes with the last live node)
        kept |= {keys.config} if live else set()
        kept_leases_here, deleted_here = _reset_slot(
            client,
            shard,
            live,
            [k for k in mine if k not in kept],
            force=force,
            since=since,
            control=keys if shard.prefix == keys.prefix else None,
        )
        kept_leases += kept_leases_here
        deleted += deleted_here
    if keys.shards > 1:
        kept = {keys.paused, keys.nodes} | {keys.seeding(n) for n in live}
        kept |= {keys.config} if live else set()
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
        "before": counts,
        "kept_leases": kept_leases,
        "live_nodes": live,
        "seeds_kept": keep_seeds,
    }


def _reset_slot(
    client: redis.Redis,
    shard: ShardKeys,
    live: list[str],
    doomed: list[str],
    *,
    force: bool,
    since: int,
    control: FrontierKeys | None,
) -> tuple[int, int]:
    """Reset one shard, keeping the live nodes' leases and their payloads."""
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
                counts = {
                    f"leases:{n}": holding[n] + len(older[n])
                    for n in live
                    if holding[n] + len(older[n])
                }
                if counts:
                    pipe.hset(f"{shard.prefix}:status", mapping=counts)
                pipe.execute()
            except redis.WatchError:
                continue
        return sum(holding.values()) + len(kept), len(doomed)
    raise RuntimeError("the live nodes' leases kept changing: pause the crawl, then reset")


def _counts(reader: Any, keys: FrontierKeys) -> dict[str, int]:
    """What a reset is about to drop, for the operator's record."""
    pipe = reader.pipeline(transaction=False)
    for shard in keys.all_shards():
        pipe.zcard(shard.queue)
        pipe.scard(shard.dupefilter)
        pipe.zcard(shard.delayed)
        pipe.hlen(shard.dead)
    values = [int(v) for v in pipe.execute()]
    return {
        "queued": sum(values[0::4]),
        "seen": sum(values[1::4]),
        "parked": sum(values[2::4]),
        "dead_letters": sum(values[3::4]),
        "seeds": int(reader.llen(keys.start_urls)),
    }


def reset_plan(
    client: redis.Redis, keys: FrontierKeys, *, heartbeat_timeout: float, force: bool
) -> dict[str, Any]:
    """What ``reset`` would delete now, and whose leases it would keep; deletes nothing."""
    seconds, _ = client.time()
    since = (int(seconds) - heartbeat_timeout) * 1000
    live = [] if force else [_text(n) for n in client.zrangebyscore(keys.nodes, since, "+inf")]
    return {
        "would_delete": _counts(client, keys),
        "keeps_leases_of": live,
        "kept_leases": sum(
            int(client.hlen(shard.held(n))) + int(client.zcard(shard.leases(n)))
            for shard in keys.all_shards()
            for n in live
        ),
    }


def _dry_run(
    client: redis.Redis, keys: FrontierKeys, opts: argparse.Namespace, settings: BaseSettings
) -> int:
    plan = reset_plan(client, keys, heartbeat_timeout=heartbeat_timeout(settings), force=opts.force)
    if opts.keep_seeds:
        plan["would_delete"].pop("seeds")
    if opts.json:
        print(json.dumps({"reset": False, **plan}))
    else:
        what = ", ".join(f"{k} {v}" for k, v in plan["would_delete"].items())
        kept = (
            f"; it would keep the {plan['kept_leases']} leases of live node(s) "
            f"{', '.join(plan['keeps_leases_of'])}"
            if plan["keeps_leases_of"]
            else ""
        )
        print(
            f"reset would delete the state of crawl {opts.spider!r}: {what}, plus request "
            f"payloads, node stats, site budgets and refused entries{kept}. Nothing was "
            "deleted: run it again with --yes-really to confirm.",
            file=sys.stderr,
        )
    return 2


def execute(opts: argparse.Namespace, settings: BaseSettings) -> int:
    keys = crawl_keys(settings, opts.spider)
    url = redis_url(settings)
    client = redis_client(settings)
    try:
        warn_if_no_crawl(client, keys, url)
        check_crawl(client, keys)
        if opts.action == "reset" and not opts.yes_really:
            return _dry_run(client, keys, opts, settings)
        if opts.action == "pause":
            outcome = pause(client, keys)
            message = (
                f"paused crawl {opts.spider}: nodes finish what they hold, keep their leases "
                "and take nothing new until `control resume`"
            )
        elif opts.action == "resume":
            outcome = resume(client, keys)
            state = "resumed" if outcome["was_paused"] else "was not paused; nothing to resume:"
            message = f"{state} crawl {opts.spider}"
        else:
            outcome = reset(
                client,
                keys,
                heartbeat_timeout=heartbeat_timeout(settings),
                force=opts.force,
                keep_seeds=opts.keep_seeds,
            )
            before = ", ".join(f"{k} {v}" for k, v in outcome["before"].items())
            message = (
                f"reset crawl {opts.spider}: deleted {outcome['deleted_keys']} keys ({before}); "
                f"kept {outcome['kept_leases']} leases of {len(outcome['live_nodes'])} live "
                "node(s)"
            )
            if client.exists(keys.paused):
                message += "; the crawl is still paused"
    except (redis.RedisError, OSError, RuntimeError) as exc:
        return redis_error(url, exc)
    finally:
        client.close()
    print(json.dumps(outcome) if opts.json else message)
    return 0


Command, add_arguments, run = entry_points(
    __name__,
    add_command_arguments,
    execute,
    usage="SPIDER pause|resume|reset [--yes-really] [--force]",
    summary="Pause or resume the whole cluster, or reset a crawl's state",
)
