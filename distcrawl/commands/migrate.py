"""``migrate``: move a scrapy-redis crawl (its requests queue and its dupefilter) into the
frontier, leaving the old keys untouched.

``distcrawl migrate SPIDER [--queue-key K] [--dupefilter-key K] [--trust-pickle] [--dry-run]``
(or ``scrapy migrate``). Stop the scrapy-redis nodes first (with ``SCHEDULER_PERSIST = True``
they leave the queue and dupefilter in Redis), migrate, then start the nodes with the
``distcrawl.Frontier`` add-on.

Queue entries are what scrapy-redis' queues hold: ``request.to_dict()`` through
``SCHEDULER_SERIALIZER``. JSON entries (bytes written as text) are read directly. Pickled
entries (scrapy-redis' default serializer) are refused unless ``--trust-pickle`` says the
operator trusts the data, since unpickling can run code; even then a restricted unpickler
rebuilds only plain values (no class, no function is ever loaded), so only ``scrapy.Request``
state comes back. Each entry is checked as a node checks a queue entry; one that cannot be
moved is counted with its reason and stays where it was. The dupefilter's fingerprints are
copied as they are: with the add-on the frontier uses scrapy-redis' fingerprint format
(:class:`distcrawl.node.compat.ScrapyRedisFingerprinter`). Progress goes to stderr; the summary to
stdout (``--json``: one object). Exit status 0, or 1 if any entry was refused.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import pickle
import re
import sys
from collections import Counter
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import redis
from scrapy import Request

from distcrawl.base.config import SETTINGS
from distcrawl.commands._common import add_spider_argument, crawl_keys, entry_points, redis_error
from distcrawl.frontier import connection
from distcrawl.frontier.store import Child, FrontierStore
from distcrawl.node.compat import redis_url_from_settings, scrapy_redis_fingerprint
from distcrawl.node.requests import callbacks, classes, codec

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

    from distcrawl.frontier.keys import FrontierKeys

__all__ = ["Command", "MigrationRefused", "add_arguments", "entry_request", "run"]

#: queue entries read and pushed per round trip
DEFAULT_BATCH = 500
_FINGERPRINT = re.compile(rb"[0-9a-f]{40}")


class MigrationRefused(ValueError):
    """A queue entry that cannot move; ``reason`` is short and stable for the summary."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason


class _PlainValues(pickle.Unpickler):
    """Unpickles dicts, lists, strings, bytes and numbers only: no global is ever loaded."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"refused to load {module}.{name}")


def load_entry(raw: bytes, *, trust_pickle: bool) -> dict[str, Any]:
    """The ``request.to_dict()`` a queue entry holds, or :class:`MigrationRefused`."""
    if codec._looks_like_pickle(raw):
        if not trust_pickle:
            raise MigrationRefused("pickle_refused", "pass --trust-pickle to read pickled queues")
        try:
            data = _PlainValues(io.BytesIO(raw)).load()
        except Exception as exc:  # a hostile or broken pickle: any error means refused
            raise MigrationRefused("bad_pickle", str(exc)[:120]) from None
    else:
        try:
            data = json.loads(raw)
        except (ValueError, RecursionError):
            raise MigrationRefused("not_json", raw[:60].decode("utf-8", "replace")) from None
    if not isinstance(data, dict):
        raise MigrationRefused("not_an_object", type(data).__name__)
    return data


def _bytes(value: Any, encoding: str, what: str) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode(encoding)
    raise MigrationRefused(f"bad_{what}", type(value).__name__)


def _headers(value: Any) -> dict[bytes, list[bytes]]:
    if not isinstance(value, dict):
        raise MigrationRefused("bad_headers", type(value).__name__)
    out = {}
    for key, values in value.items():
        values = values if isinstance(values, list) else [values]
        out[_bytes(key, "latin-1", "headers")] = [_bytes(v, "latin-1", "headers") for v in values]
    return out


def _callback(name: Any, meta: dict[str, Any], role: str) -> str | None:
    if name is None:
        return None
    if not isinstance(name, str):
        raise MigrationRefused(f"bad_{role}", repr(name)[:60])
    if name == f"_{role}" and "rule" in meta:
        return callbacks.RULE_REFERENCE  # a CrawlSpider rule's dispatcher
    if not name.isidentifier() or name.startswith("_"):
        raise MigrationRefused(f"private_{role}", name)
    return name


def entry_request(data: dict[str, Any]) -> tuple[Request, str]:
    """The request and frontier payload of one ``request.to_dict()``."""
    url = data.get("url")
    if not isinstance(url, str):
        raise MigrationRefused("missing_url")
    encoding = data.get("encoding") or "utf-8"
    if not isinstance(encoding, str):
        raise MigrationRefused("bad_encoding")
    cls: type[Request] = Request
    if data.get("_class"):
        found = classes.request_class(str(data["_class"]))
        if found is None:
            raise MigrationRefused("unknown_request_class", str(data["_class"])[:80])
        cls = found
    meta = data.get("meta") or {}
    if not isinstance(meta, dict):
        raise MigrationRefused("bad_meta")
    try:
        request = cls(
            url,
            method=str(data.get("method") or "GET"),
            headers=_headers(data.get("headers") or {}),
            body=_bytes(data.get("body") or b"", encoding, "body"),
            cookies=data.get("cookies") or {},
            meta=meta,
            encoding=encoding,
            priority=int(data.get("priority") or 0),
            dont_filter=bool(data.get("dont_filter")),
            flags=list(data.get("flags") or []),
            cb_kwargs=data.get("cb_kwargs") or {},
        )
        payload = json.loads(codec.encode(request))
    except MigrationRefused:
        raise
    except (TypeError, ValueError, LookupError, UnicodeError) as exc:
        raise MigrationRefused("unqueueable", str(exc)[:160]) from None
    for role, field in (("callback", "cb"), ("errback", "eb")):
        name = _callback(data.get(role), meta, role)
        if name:
            payload[field] = name
    text = json.dumps(payload, separators=(",", ":"), ensure_ascii=False)
    try:
        codec.decode(text, None, allow_private=True)  # what a node will accept
    except codec.BadEntry as exc:
        raise MigrationRefused(exc.reason, exc.detail[:120]) from None
    return request, text


def _queue_entries(client: Any, key: str, batch: int) -> Iterator[list[bytes]]:
    """The queue's entries in the order scrapy-redis would pop them, a batch at a time."""
    kind = client.type(key)
    kind = kind.decode() if isinstance(kind, bytes) else kind
    if kind == "zset":
        for start in range(0, int(client.zcard(key)), batch):
            yield list(client.zrange(key, start, start + batch - 1))
    elif kind == "list":
        # FIFO queues push on the left and pop on the right: oldest first from the right
        total = int(client.llen(key))
        for end in range(total - 1, -1, -batch):
            yield list(reversed(client.lrange(key, max(0, end - batch + 1), end)))
    elif kind != "none":
        raise SystemExit(f"error: {key} is a {kind}, not a scrapy-redis queue (list or zset)")


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
    parser.add_argument("--batch", type=int, default=DEFAULT_BATCH, help="entries per round trip")
    parser.add_argument("--dry-run", action="store_true", help="check everything, write nothing")
    parser.add_argument("--json", action="store_true", help="print the summary as one JSON object")


def _key(
    opts_value: str | None, settings: BaseSettings, name: str, default: str, spider: str
) -> str:
    key = opts_value or settings.get(name) or default
    return str(key) % {"spider": spider}


def _in_shards(keys: FrontierKeys, name: str) -> str:
    """Where the frontier keeps ``name`` (``queue``, ``dupefilter``): its key with one shard,
    the pattern of the shards' keys with several."""
    key: str = getattr(keys.shard(0), name)
    if keys.shards == 1:
        return key
    return key.replace(keys.shard(0).prefix, "{" + f"{keys.spider}:0..{keys.shards - 1}" + "}", 1)


def execute(opts: argparse.Namespace, settings: BaseSettings) -> int:
    spider = opts.spider
    url = settings.get("REDIS_URL") or redis_url_from_settings(settings)[0]
    url = url or "redis://127.0.0.1:6379/0"
    queue_key = _key(opts.queue_key, settings, "SCHEDULER_QUEUE_KEY", "%(spider)s:requests", spider)
    df_key = _key(
        opts.dupefilter_key, settings, "SCHEDULER_DUPEFILTER_KEY", "%(spider)s:dupefilter", spider
    )
    classes.allow_request_classes(SETTINGS.value(settings, "DISTCRAWL_REQUEST_CLASSES"))
    keys = crawl_keys(settings, spider)
    node = f"migrate-{os.getpid()}"
    client = connection.client(url, socket_timeout=60, socket_connect_timeout=10)
    store = FrontierStore(client, keys)
    batch = max(1, opts.batch)
    summary: dict[str, Any] = {
        "queue_key": queue_key,
        "dupefilter_key": df_key,
        "frontier_queue": _in_shards(keys, "queue"),
        "frontier_dupefilter": _in_shards(keys, "dupefilter"),
        "entries": 0,
        "migrated": 0,
        "already_in_frontier": 0,
        "refused": 0,
        "refused_by_reason": {},
        "fingerprints": 0,
        "fingerprints_copied": 0,
        "fingerprints_new": 0,
        "fingerprints_refused": 0,
        "dry_run": bool(opts.dry_run),
    }
    reasons: Counter[str] = Counter()
    try:
        for raws in _queue_entries(client, queue_key, batch):
            children: list[Child] = []
            for raw in raws:
                summary["entries"] += 1
                try:
                    request, payload = entry_request(
                        load_entry(raw, trust_pickle=opts.trust_pickle)
                    )
                except MigrationRefused as exc:
                    reasons[exc.reason] += 1
                    if sum(reasons.values()) <= 20:
                        print(f"refused entry: {exc}", file=sys.stderr)
                    continue
                # dont_filter requests neither check nor mark the dupefilter (Scrapy's rule)
                fp = "" if request.dont_filter else scrapy_redis_fingerprint(request)
                site = urlsplit(request.url).hostname or ""
                children.append(Child(fp, request.priority, request.dont_filter, 0, site, payload))
            if children and not opts.dry_run:
                result = store.sync(node, children=children)
                summary["migrated"] += result.added
                summary["already_in_frontier"] += result.filtered
            elif children:
                summary["migrated"] += len(children)
            print(
                f"migrate: {summary['entries']} queue entries read, {summary['migrated']} moved, "
                f"{sum(reasons.values())} refused",
                file=sys.stderr,
            )
        # after the queue: its entries' fingerprints are in the old dupefilter too
        for fps in _fingerprints(client, df_key, batch):
            good = [fp for fp in fps if _FINGERPRINT.fullmatch(fp)]
            summary["fingerprints"] += len(fps)
            summary["fingerprints_refused"] += len(fps) - len(good)
            summary["fingerprints_copied"] += len(good)
            if good and not opts.dry_run:
                # a bare fingerprint names no site, so no shard: every shard records it
                summary["fingerprints_new"] += int(store.mark_seen(good))
        if summary["fingerprints"]:
            print(f"migrate: {summary['fingerprints']} fingerprints read", file=sys.stderr)
        if not opts.dry_run:
            store.release(node)  # the migration is no node: it leaves the frontier's node list
    except (redis.RedisError, OSError) as exc:
        return redis_error(url, exc, "migration stopped (re-run it: moving is idempotent) at ")
    finally:
        client.close()
    summary["refused"] = sum(reasons.values())
    summary["refused_by_reason"] = dict(reasons)
    if opts.json:
        print(json.dumps(summary))
    else:
        verb = "would move" if opts.dry_run else "moved"
        print(
            f"{verb} {summary['migrated']} of {summary['entries']} requests from {queue_key} to "
            f"{summary['frontier_queue']} ({summary['already_in_frontier']} already there, "
            f"{summary['refused']} "
            f"refused: {dict(reasons) or 'none'}); {summary['fingerprints_copied']} of "
            f"{summary['fingerprints']} fingerprints from {df_key} to "
            f"{summary['frontier_dupefilter']}; "
            "old keys left untouched"
        )
    return 1 if summary["refused"] or summary["fingerprints_refused"] else 0


def _fingerprints(client: Any, key: str, batch: int) -> Iterator[list[bytes]]:
    cursor = 0
    while True:
        cursor, members = client.sscan(key, cursor, count=batch)
        if members:
            yield list(members)
        if not cursor:
            return


Command, add_arguments, run = entry_points(
    __name__,
    add_command_arguments,
    execute,
    usage="SPIDER [--queue-key K] [--dupefilter-key K] [--trust-pickle] [--dry-run] [--json]",
    summary="Move a scrapy-redis crawl's queue and dupefilter into the frontier",
)
