"""``control``: pause and resume the whole cluster, or reset a crawl's state.

``scrapy control catalog pause``   nodes hand out no new leases; what they hold they finish,
                                   and they keep heart-beating, so nothing is recovered or lost.
``scrapy control catalog resume``  leasing starts again on every node.
``scrapy control catalog reset --yes-really [--force] [--keep-seeds]``
    deletes the crawl's state: queue, request payloads, dupefilter (seen URLs), parked retries,
    dead letters, rejected entries, node stats, site budgets and the seed list. The leases and
    seeds of *live* nodes are kept (so their acks stay consistent) unless ``--force``; the id
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
    crawl_keys,
    entry_points,
    heartbeat_timeout,
    redis_client,
    redis_error,
    redis_url,
    warn_if_no_crawl,
)

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

    from distcrawl.frontier.store import FrontierKeys

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
    client.set(keys.paused, json.dumps(who))
    return {"paused": True, **who}


def resume(client: redis.Redis, keys: FrontierKeys) -> dict[str, Any]:
    was_paused = bool(client.delete(keys.paused))
    client.publish(keys.wake, "resumed")  # idle nodes lease at once, not at their next poll
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
    """Delete the crawl's state in one MULTI/EXEC; see the module docstring for what stays.

    The leases of live nodes are WATCHed: if one changes between the read and the EXEC, the
    reset is done again from a fresh read, so a kept lease always keeps its payload.
    """
    for _ in range(_RESET_ATTEMPTS):
        found = sorted({_text(k) for k in client.scan_iter(keys.all_keys_pattern(), count=1000)})
        seconds, micros = client.time()
        now_ms = int(seconds) * 1000 + int(micros) // 1000
        since = now_ms - int(heartbeat_timeout * 1000)
        live = [] if force else [_text(n) for n in client.zrangebyscore(keys.nodes, since, "+inf")]
        kept = {f"{keys.prefix}:seq", keys.paused}
        kept |= {keys.leases(n) for n in live} | {keys.seeding(n) for n in live}
        kept.add(keys.nodes)
        doomed = [k for k in found if k not in kept]
        pipe: Any = client.pipeline(transaction=True)
        with pipe:
            try:
                reader: Any = client
                if live:
                    pipe.watch(*[keys.leases(n) for n in live])
                    reader = pipe  # a watching pipeline answers at once
                rids = [_text(r) for n in live for r in reader.zrange(keys.leases(n), 0, -1)]
                payloads = reader.hmget(keys.requests, rids) if rids else []
                counts = _counts(reader, keys)
                pipe.multi()
                if doomed:
                    pipe.unlink(*doomed)
                # dead nodes leave the heartbeat set with their leases; live ones stay in it
                pipe.zremrangebyscore(keys.nodes, "-inf", f"({since}")
                if force:
                    pipe.unlink(keys.nodes)
                kept_payloads = {r: p for r, p in zip(rids, payloads, strict=True) if p is not None}
                if kept_payloads:
                    pipe.hset(keys.requests, mapping=kept_payloads)
                if not keep_seeds:
                    pipe.unlink(keys.start_urls)
                pipe.execute()
            except redis.WatchError:
                continue
        return {
            "reset": True,
            "deleted_keys": len(doomed) + (0 if keep_seeds else 1),
            "before": counts,
            "kept_leases": len(kept_payloads),
            "live_nodes": live,
            "seeds_kept": keep_seeds,
        }
    raise RuntimeError("the live nodes' leases kept changing: pause the crawl, then reset")


def _counts(reader: Any, keys: FrontierKeys) -> dict[str, int]:
    """What a reset is about to drop, for the operator's record."""
    return {
        "queued": int(reader.zcard(keys.queue)),
        "seen": int(reader.scard(keys.dupefilter)),
        "parked": int(reader.zcard(keys.delayed)),
        "dead_letters": int(reader.hlen(keys.dead)),
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
        "kept_leases": sum(int(client.zcard(keys.leases(n))) for n in live),
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
