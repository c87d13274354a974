"""Moving a scrapy-redis crawl (its requests queue and its dupefilter) into the frontier,
leaving the old keys untouched.

Queue entries are what scrapy-redis' queues hold: ``request.to_dict()`` through
``SCHEDULER_SERIALIZER``. JSON entries (bytes written as text) are read directly. Pickled
entries (scrapy-redis' default serializer) are refused unless the operator trusts the data,
since unpickling can run code; even then a restricted unpickler rebuilds only plain values (no
class, no function is ever loaded), so only ``scrapy.Request`` state comes back (lxml's string
type, which a CrawlSpider rule's ``meta["link_text"]`` holds, as a plain str). Each entry is
checked as a node checks a queue entry; one that cannot be moved is counted with its reason
and stays where it was. The dupefilter's fingerprints are copied as they are (the add-on's
frontier uses scrapy-redis' fingerprint format), except those of requests that did not move:
their URLs stay new to the frontier. When a refused entry could not be read at all (a pickle
without trust), no fingerprint is copied: any could be its.
"""

from __future__ import annotations

import io
import json
import os
import pickle
import re
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from scrapy import Request

from distcrawl.base.names import reasons
from distcrawl.frontier.store import Child, FrontierStore
from distcrawl.node.compat import redis_url_from_settings, scrapy_redis_fingerprint
from distcrawl.node.requests import callbacks, classes, codec
from distcrawl.node.requests.checks import looks_like_pickle
from distcrawl.node.requests.payload import BadEntry

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

    from distcrawl.frontier.keys import FrontierKeys

__all__ = [
    "DEFAULT_BATCH",
    "SHARE_WAIT",
    "CrawlNotShared",
    "Migration",
    "MigrationRefused",
    "NotAQueue",
    "entry_request",
    "load_entry",
    "migrate",
    "share_crawl",
    "source_keys",
    "source_url",
]

#: queue entries read and pushed per round trip
DEFAULT_BATCH = 500
#: seconds a migration waits for the crawl's solo node to share the crawl
SHARE_WAIT = 60.0
#: seconds between two asks while it waits
_SHARE_POLL = 0.2
_FINGERPRINT = re.compile(rb"[0-9a-f]{40}")
#: kinds of refusal (reason and detail) reported, each once with its count
_REPORTED = 20


class MigrationRefused(ValueError):
    """A queue entry that cannot move; ``reason`` is a refusal reason (for the summary)."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason


class NotAQueue(ValueError):
    """The queue key holds something else than a scrapy-redis queue (a list or a zset)."""


#: str and bytes subclasses a queue entry may hold, loaded as the plain type (lxml's results of
#: a link extractor's text(), which CrawlSpider rules keep in ``meta["link_text"]``)
_PLAIN_SUBCLASSES: dict[tuple[str, str], type] = {
    ("lxml.etree", "_ElementUnicodeResult"): str,
    ("lxml.etree", "_ElementStringResult"): bytes,
}


class _PlainValues(pickle.Unpickler):
    """Unpickles dicts, lists, strings, bytes and numbers only: no global is ever loaded."""

    def find_class(self, module: str, name: str) -> Any:
        plain = _PLAIN_SUBCLASSES.get((module, name))
        if plain is not None:
            return plain  # its NEWOBJ becomes plain.__new__(plain, text): no lxml code runs
        raise pickle.UnpicklingError(f"refused to load {module}.{name}")


def load_entry(raw: bytes, *, trust_pickle: bool) -> dict[str, Any]:
    """The ``request.to_dict()`` a queue entry holds, or :class:`MigrationRefused`."""
    if looks_like_pickle(raw):
        if not trust_pickle:
            raise MigrationRefused(
                reasons.PICKLE_REFUSED, "pass --trust-pickle to read pickled queues"
            )
        try:
            data = _PlainValues(io.BytesIO(raw)).load()
        except Exception as exc:  # a hostile or broken pickle: any error means refused
            raise MigrationRefused(reasons.BAD_PICKLE, str(exc)[:120]) from None
    else:
        try:
            data = json.loads(raw)
        except (ValueError, RecursionError):
            detail = raw[:60].decode("utf-8", "replace")
            raise MigrationRefused(reasons.NOT_JSON, detail) from None
    if not isinstance(data, dict):
        raise MigrationRefused(reasons.NOT_AN_OBJECT, type(data).__name__)
    return data


def _bytes(value: Any, encoding: str, refusal: str) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode(encoding)
    raise MigrationRefused(refusal, type(value).__name__)


def _headers(value: Any) -> dict[bytes, list[bytes]]:
    if not isinstance(value, dict):
        raise MigrationRefused(reasons.BAD_HEADERS, type(value).__name__)
    out = {}
    for key, values in value.items():
        values = values if isinstance(values, list) else [values]
        out[_bytes(key, "latin-1", reasons.BAD_HEADERS)] = [
            _bytes(v, "latin-1", reasons.BAD_HEADERS) for v in values
        ]
    return out


_PRIVATE = {"callback": reasons.PRIVATE_CALLBACK, "errback": reasons.PRIVATE_ERRBACK}
_BAD = {"callback": reasons.BAD_CALLBACK, "errback": reasons.BAD_ERRBACK}


def _callback(name: Any, meta: dict[str, Any], role: str) -> str | None:
    if name is None:
        return None
    if not isinstance(name, str):
        raise MigrationRefused(_BAD[role], repr(name)[:60])
    if name == f"_{role}" and "rule" in meta:
        return callbacks.RULE_REFERENCE  # a CrawlSpider rule's dispatcher
    if not name.isidentifier() or name.startswith("_"):
        raise MigrationRefused(_PRIVATE[role], name)
    return name


def entry_request(data: dict[str, Any]) -> tuple[Request, str]:
    """The request and frontier payload of one ``request.to_dict()``."""
    url = data.get("url")
    if not isinstance(url, str):
        raise MigrationRefused(reasons.MISSING_URL)
    encoding = data.get("encoding") or "utf-8"
    if not isinstance(encoding, str):
        raise MigrationRefused(reasons.BAD_ENCODING)
    cls: type[Request] = Request
    if data.get("_class"):
        found = classes.request_class(str(data["_class"]))
        if found is None:
            raise MigrationRefused(reasons.UNKNOWN_REQUEST_CLASS, str(data["_class"])[:80])
        cls = found
    meta = data.get("meta") or {}
    if not isinstance(meta, dict):
        raise MigrationRefused(reasons.BAD_META)
    try:
        request = cls(
            url,
            method=str(data.get("method") or "GET"),
            headers=_headers(data.get("headers") or {}),
            body=_bytes(data.get("body") or b"", encoding, reasons.BAD_BODY),
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
        raise MigrationRefused(reasons.UNQUEUEABLE, str(exc)[:160]) from None
    for role, key in (("callback", "cb"), ("errback", "eb")):
        name = _callback(data.get(role), meta, role)
        if name:
            payload[key] = name
    text = json.dumps(payload, separators=(",", ":"), ensure_ascii=False)
    try:
        codec.decode(text, None, allow_private=True)  # what a node will accept
    except BadEntry as exc:
        raise MigrationRefused(exc.reason, exc.detail[:120]) from None
    return request, text


def _refused_fingerprint(data: dict[str, Any] | None) -> str | None:
    """The scrapy-redis fingerprint of a refused entry's request, if it can be told."""
    if data is None:
        return None
    if data.get("dont_filter"):
        return ""  # never in the dupefilter
    try:
        request = Request(
            str(data["url"]),
            method=str(data.get("method") or "GET"),
            body=_bytes(data.get("body") or b"", str(data.get("encoding") or "utf-8"), "body"),
        )
        return scrapy_redis_fingerprint(request)
    except Exception:  # a refused entry may be anything
        return None


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
        raise NotAQueue(f"{key} is a {kind}, not a scrapy-redis queue (list or zset)")


def _fingerprints(client: Any, key: str, batch: int) -> Iterator[list[bytes]]:
    cursor = 0
    while True:
        cursor, members = client.sscan(key, cursor, count=batch)
        if members:
            yield list(members)
        if not cursor:
            return


def source_url(settings: BaseSettings) -> str:
    """The scrapy-redis crawl's Redis, as scrapy-redis finds it."""
    url = settings.get("REDIS_URL") or redis_url_from_settings(settings)[0]
    return str(url or "redis://127.0.0.1:6379/0")


def source_keys(
    settings: BaseSettings, spider: str, queue_key: str | None, dupefilter_key: str | None
) -> tuple[str, str]:
    """The scrapy-redis queue and dupefilter of *spider* (given, else as its settings name
    them, else scrapy-redis' defaults)."""

    def key(given: str | None, name: str, default: str) -> str:
        return str(given or settings.get(name) or default) % {"spider": spider}

    return (
        key(queue_key, "SCHEDULER_QUEUE_KEY", "%(spider)s:requests"),
        key(dupefilter_key, "SCHEDULER_DUPEFILTER_KEY", "%(spider)s:dupefilter"),
    )


def in_shards(keys: FrontierKeys, name: str) -> str:
    """Where the frontier keeps ``name`` (``queue``, ``dupefilter``): its key with one shard,
    the pattern of the shards' keys with several."""
    key: str = getattr(keys.shard(0), name)
    if keys.shards == 1:
        return key
    return key.replace(keys.shard(0).prefix, "{" + f"{keys.spider}:0..{keys.shards - 1}" + "}", 1)


@dataclass
class Migration:
    """What a migration moved, and what it refused, by reason."""

    queue_key: str
    dupefilter_key: str
    frontier_queue: str
    frontier_dupefilter: str
    dry_run: bool
    entries: int = 0
    migrated: int = 0
    already_in_frontier: int = 0
    fingerprints: int = 0
    fingerprints_copied: int = 0
    fingerprints_new: int = 0
    fingerprints_refused: int = 0
    #: fingerprints not copied: their requests stayed behind (or could not be read)
    fingerprints_withheld: int = 0
    #: refused entries that could not be read at all: no fingerprint is copied then
    unreadable_refused: int = 0
    refused_by_reason: Counter[str] = field(default_factory=Counter)

    @property
    def refused(self) -> int:
        return sum(self.refused_by_reason.values())

    def as_dict(self) -> dict[str, Any]:
        out = {k: v for k, v in vars(self).items() if k != "refused_by_reason"}
        return {**out, "refused": self.refused, "refused_by_reason": dict(self.refused_by_reason)}


class CrawlNotShared(RuntimeError):
    """The crawl's solo node did not share the crawl in time: the migration wrote nothing."""


def share_crawl(store: FrontierStore, node: str, *, wait: float = SHARE_WAIT) -> None:
    """Make the crawl shared before the migration writes a request or a fingerprint: a solo
    node (see ``protocol/solo.py``) takes any URL it does not remember for new, so it writes
    what it holds and shares the crawl first (within a round trip of the request to end solo
    mode); a solo node that recovery took out of the members is taken over at once."""
    deadline = time.monotonic() + wait
    while True:
        got = store.share(node)
        if got.shared:
            return
        if time.monotonic() >= deadline:
            raise CrawlNotShared(
                f"node {got.holder} holds the crawl's solo mode and did not end it within "
                f"{wait:.0f}s; nothing was migrated (run again once the node ended solo mode "
                "or its heartbeat timed out and a node recovered it)"
            )
        time.sleep(_SHARE_POLL)


def migrate(
    client: Any,
    keys: FrontierKeys,
    *,
    queue_key: str,
    dupefilter_key: str,
    trust_pickle: bool = False,
    batch: int = DEFAULT_BATCH,
    dry_run: bool = False,
    refused: Callable[[MigrationRefused, int], None] | None = None,
    progress: Callable[[Migration], None] | None = None,
) -> Migration:
    """Move the queue, then the dupefilter (the queue's fingerprints are in it too), through
    the frontier's own ``sync`` and ``mark_seen``: moving is idempotent, so a migration stopped
    halfway is run again. *refused* hears each kind of refusal once, with how many entries it
    refused, once the queue is read (the first :data:`_REPORTED` kinds); *progress* each
    batch."""
    done = Migration(
        queue_key=queue_key,
        dupefilter_key=dupefilter_key,
        frontier_queue=in_shards(keys, "queue"),
        frontier_dupefilter=in_shards(keys, "dupefilter"),
        dry_run=dry_run,
    )
    store = FrontierStore(client, keys)
    node = f"migrate-{os.getpid()}"
    batch = max(1, batch)
    if not dry_run:
        share_crawl(store, node)
    withheld: set[bytes] = set()  # fingerprints of the requests that stay behind
    kinds: dict[str, tuple[MigrationRefused, int]] = {}  # refusal text -> (first, count)
    for raws in _queue_entries(client, queue_key, batch):
        children: list[Child] = []
        for raw in raws:
            done.entries += 1
            data = None
            try:
                data = load_entry(raw, trust_pickle=trust_pickle)
                request, payload = entry_request(data)
            except MigrationRefused as exc:
                fp_refused = _refused_fingerprint(data)
                if fp_refused is None:
                    done.unreadable_refused += 1
                elif fp_refused:
                    withheld.add(fp_refused.encode())
                done.refused_by_reason[exc.reason] += 1
                first, count = kinds.get(str(exc), (exc, 0))
                if count or len(kinds) < _REPORTED:
                    kinds[str(exc)] = (first, count + 1)
                continue
            # dont_filter requests neither check nor mark the dupefilter (Scrapy's rule)
            fp = "" if request.dont_filter else scrapy_redis_fingerprint(request)
            site = urlsplit(request.url).hostname or ""
            children.append(Child(fp, request.priority, request.dont_filter, 0, site, payload))
        if children and not dry_run:
            result = store.sync(node, children=children)
            done.migrated += result.added
            done.already_in_frontier += result.filtered
        elif children:
            done.migrated += len(children)
        if progress is not None:
            progress(done)
    if refused is not None:
        for first, count in kinds.values():
            refused(first, count)
    for fps in _fingerprints(client, dupefilter_key, batch):
        good = [fp for fp in fps if _FINGERPRINT.fullmatch(fp)]
        done.fingerprints += len(fps)
        done.fingerprints_refused += len(fps) - len(good)
        kept = [] if done.unreadable_refused else [fp for fp in good if fp not in withheld]
        done.fingerprints_withheld += len(good) - len(kept)
        good = kept
        done.fingerprints_copied += len(good)
        if good and not dry_run:
            # a bare fingerprint names no site, so no shard: every shard records it
            done.fingerprints_new += int(store.mark_seen(good))
    if not dry_run:
        store.release(node)  # the migration is no node: it leaves the frontier's node list
    return done
