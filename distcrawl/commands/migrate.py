"""``migrate``: move a scrapy-redis crawl (its requests queue and its dupefilter) into the
frontier, leaving the old keys untouched.

``distcrawl migrate SPIDER [--queue-key K] [--dupefilter-key K] [--trust-pickle] [--dry-run]``
(or ``scrapy migrate``). Stop the scrapy-redis nodes first (with ``SCHEDULER_PERSIST = True``
they leave the queue and dupefilter in Redis), migrate, then start the nodes with the
``distcrawl.Frontier`` add-on.

Pickled queue entries (scrapy-redis' default serializer) are refused unless
``--trust-pickle`` says the operator trusts the data, and even then only plain values are
loaded (see :mod:`distcrawl.ops.migrate`). An entry that cannot be moved is counted with its
reason and stays where it was. Progress goes to stderr; the summary to stdout (``--json``: one
object). Exit status 0, or 1 if any entry was refused.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

import redis

from distcrawl.base.config import SETTINGS
from distcrawl.commands._common import redis_error
from distcrawl.frontier import connection
from distcrawl.node.requests import classes
from distcrawl.ops import migrate
from distcrawl.ops.context import Context
from distcrawl.ops.entry import add_spider_argument, entry_points

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

__all__ = ["Command", "add_arguments", "execute", "run"]


def add_command_arguments(parser: argparse.ArgumentParser) -> None:
    add_spider_argument(parser)
    parser.add_argument(
        "--queue-key",
        default=None,
        help="scrapy-redis' queue (SCHEDULER_QUEUE_KEY, default <spider>:requests)",
    )
    parser.add_argument(
        "--dupefilter-key",
        default=None,
        help="scrapy-redis' dupefilter (SCHEDULER_DUPEFILTER_KEY, default <spider>:dupefilter)",
    )
    parser.add_argument(
        "--trust-pickle",
        action="store_true",
        help="read pickled queue entries (unpickling untrusted data can run code)",
    )
    parser.add_argument(
        "--batch", type=int, default=migrate.DEFAULT_BATCH, help="entries per round trip"
    )
    parser.add_argument("--dry-run", action="store_true", help="check everything, write nothing")
    parser.add_argument("--json", action="store_true", help="print the summary as one JSON object")


def _progress(done: migrate.Migration) -> None:
    print(
        f"migrate: {done.entries} queue entries read, {done.migrated} moved, "
        f"{done.refused} refused",
        file=sys.stderr,
    )


def _refused(exc: migrate.MigrationRefused, count: int) -> None:
    entries = "queue entry" if count == 1 else f"{count} queue entries"
    print(f"refused {entries}: {exc}", file=sys.stderr)


def execute(opts: argparse.Namespace, settings: BaseSettings) -> int:
    url = migrate.source_url(settings)
    queue_key, df_key = migrate.source_keys(
        settings, opts.spider, opts.queue_key, opts.dupefilter_key
    )
    classes.allow_request_classes(SETTINGS.value(settings, "DISTCRAWL_REQUEST_CLASSES"))
    ctx = Context(settings, opts.spider)
    keys = ctx.keys
    client = connection.client(url, socket_timeout=60, socket_connect_timeout=10)
    try:
        ctx.check_stored(client)  # a crawl of another frontier format is not written into
        done = migrate.migrate(
            client,
            keys,
            queue_key=queue_key,
            dupefilter_key=df_key,
            trust_pickle=opts.trust_pickle,
            batch=opts.batch,
            dry_run=opts.dry_run,
            refused=_refused,
            progress=_progress,
        )
    except (migrate.NotAQueue, migrate.CrawlNotShared) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except (redis.RedisError, OSError) as exc:
        return redis_error(url, exc, "migration stopped (re-run it: moving is idempotent) at ")
    finally:
        client.close()
    if done.unreadable_refused:
        print(
            f"migrate: {done.unreadable_refused} refused queue entries could not be read, so "
            "their fingerprints are unknown: no fingerprint is copied (their URLs would never "
            "be fetched); the crawl on the frontier fetches again what it meets",
            file=sys.stderr,
        )
    if done.fingerprints:
        print(f"migrate: {done.fingerprints} fingerprints read", file=sys.stderr)
    if opts.json:
        print(json.dumps(done.as_dict()))
    else:
        verb = "would move" if opts.dry_run else "moved"
        print(
            f"{verb} {done.migrated} of {done.entries} requests from {queue_key} to "
            f"{done.frontier_queue} ({done.already_in_frontier} already there, "
            f"{done.refused} refused: {dict(done.refused_by_reason) or 'none'}); "
            f"{done.fingerprints_copied} of {done.fingerprints} fingerprints from {df_key} to "
            f"{done.frontier_dupefilter} ({done.fingerprints_withheld} withheld: requests not "
            "moved); old keys left untouched"
        )
    return 1 if done.refused or done.fingerprints_refused else 0


Command, add_arguments, run = entry_points(
    __name__,
    add_command_arguments,
    execute,
    usage="SPIDER [--queue-key K] [--dupefilter-key K] [--trust-pickle] [--dry-run] [--json]",
    summary="Move a scrapy-redis crawl's queue and dupefilter into the frontier",
)
