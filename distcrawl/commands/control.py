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
from distcrawl.frontier.store import FrontierStore

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

    from distcrawl.frontier.keys import FrontierKeys

__all__ = ["Command", "add_arguments", "execute", "pause", "reset", "resume", "run"]

ACTIONS = ("pause", "resume", "reset")


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


def reset(
    client: redis.Redis,
    keys: FrontierKeys,
    *,
    heartbeat_timeout: float,
    force: bool = False,
    keep_seeds: bool = False,
) -> dict[str, Any]:
    """Delete the crawl's state; see the module docstring for what stays."""
    return FrontierStore(client, keys).reset(
        heartbeat_timeout=heartbeat_timeout, force=force, keep_seeds=keep_seeds
    )


def reset_plan(
    client: redis.Redis, keys: FrontierKeys, *, heartbeat_timeout: float, force: bool
) -> dict[str, Any]:
    """What ``reset`` would delete now, and whose leases it would keep; deletes nothing."""
    return FrontierStore(client, keys).reset_plan(heartbeat_timeout=heartbeat_timeout, force=force)


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
