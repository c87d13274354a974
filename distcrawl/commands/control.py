"""``control``: pause and resume the whole cluster, or reset a crawl's state.

``scrapy control catalog pause``   nodes hand out no new leases; what they hold they finish,
                                   and they keep heart-beating, so nothing is recovered or lost.
``scrapy control catalog resume``  leasing starts again on every node.
``scrapy control catalog reset --yes-really [--force] [--keep-seeds]``
    deletes the crawl's state: queue, request payloads, dupefilter (seen URLs), parked retries,
    dead letters, rejected entries, node stats, site budgets, the seed list and the record of
    the crawl-wide settings (so the next node may start with others). The leases, seeds and
    that record of *live* nodes are kept (so their acks stay consistent, and a node that joins
    them still matches them) unless ``--force``; the id counter is always kept (a live node's
    late ack must never hit a new request), and so are a pause (resume when ready) and the
    crawl's frontier format. Pause, wait for in-flight work to finish, then reset.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

import redis

from distcrawl.base.names import commands as words
from distcrawl.base.names.commands import RESUME_CRAWL
from distcrawl.commands._common import redis_error, warn_if_no_crawl
from distcrawl.ops import control
from distcrawl.ops.context import Context
from distcrawl.ops.entry import add_spider_argument, entry_points

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

__all__ = ["Command", "add_arguments", "execute", "run"]


def add_command_arguments(parser: argparse.ArgumentParser) -> None:
    add_spider_argument(parser)
    parser.add_argument("action", choices=words.CONTROL_ACTIONS, help="pause | resume | reset")
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


def _dry_run(ctx: Context, client: Any, opts: argparse.Namespace) -> int:
    plan = control.reset_plan(
        client,
        ctx.keys,
        heartbeat_timeout=ctx.heartbeat_timeout,
        force=opts.force,
        keep_seeds=opts.keep_seeds,
    )
    if opts.json:
        print(json.dumps({"reset": False, **plan}))
        return 2
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
    ctx = Context(settings, opts.spider)
    client = ctx.client()
    try:
        # a reset is what clears a crawl whose state a node found gone
        warn_if_no_crawl(ctx, client, lost_ok=opts.action == words.RESET)
        if opts.action == words.RESET and not opts.yes_really:
            return _dry_run(ctx, client, opts)
        if opts.action == words.PAUSE:
            outcome = control.pause(client, ctx.keys)
            message = (
                f"paused crawl {opts.spider}: nodes finish what they hold, keep their leases "
                f"and take nothing new until `{RESUME_CRAWL.line(spider=opts.spider)}`"
            )
        elif opts.action == words.RESUME:
            outcome = control.resume(client, ctx.keys)
            state = "resumed" if outcome["was_paused"] else "was not paused; nothing to resume:"
            message = f"{state} crawl {opts.spider}"
        else:
            outcome = control.reset(
                client,
                ctx.keys,
                heartbeat_timeout=ctx.heartbeat_timeout,
                force=opts.force,
                keep_seeds=opts.keep_seeds,
            )
            before = ", ".join(f"{k} {v}" for k, v in outcome["before"].items())
            message = (
                f"reset crawl {opts.spider}: deleted {outcome['deleted_keys']} keys ({before}); "
                f"kept {outcome['kept_leases']} leases of {len(outcome['live_nodes'])} live "
                "node(s)"
            )
            if outcome["still_paused"]:
                message += "; the crawl is still paused"
    except (redis.RedisError, OSError, control.LeasesKeptChanging) as exc:
        return redis_error(ctx.redis_url, exc)
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
