"""The frontier's Redis protocol from Python: calls into ``frontier.lua`` across the shards.

Works with a synchronous redis-py client (commands, tools, benches) and with ``redis.asyncio``
(the node's scheduler): each method returns what the client returns, a value or an awaitable.
Every method makes one pipelined round trip per step (most make one step).

The API a node (or a bench that simulates nodes without Scrapy) drives, for one node id:

    store = FrontierStore(redis.Redis.from_url(url), FrontierKeys("catalog", "catalog:start_urls"))
    store.heartbeat(node, "{}")                        # join; learns live nodes, idle, pause
    reply = store.sync(node, children=[Child(fp, priority, False, 0, site, payload)], lease=32)
    # reply.leased: [Leased(lease, payload, priority, paced)]; ack them in a later sync:
    store.sync(node, acks=[leased.lease for leased in reply.leased], lease=32)
    store.release(node)                                # clean stop: leases and seeds go back

A child's fingerprint is a digest (16, 20 or 32 bytes, or its hex); anything else is hashed
first. Memory and counts without SCAN: ``seen()`` (URLs in the exact dupefilter, O(shards)),
``dupefilter_bytes()`` (MEMORY USAGE of every dupefilter bucket or Bloom filter), ``drained()``
(queued, delayed, leased, seeding, start). Per-shard keys: ``keys.shard(i)`` /
``keys.site_keys(site)`` (see :mod:`distcrawl.frontier.keys`).

``sync`` pushes, acks and leases in one round trip: one script call per shard that has work
(children and acks go to the shard of their site; leases come from the shards whose queue head
has the best priority this node knows of, see :class:`~distcrawl.frontier.views.ShardViews`).
Its :class:`SyncResult` counts ``priority_inversions``: leased requests of lower priority than
the best one still queued in another shard read in the same round trip.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import logging
import math
import secrets
import time
from collections.abc import Generator, Iterable, Sequence
from dataclasses import dataclass, field
from importlib import resources
from typing import Any
from urllib.parse import urlsplit

from redis.exceptions import NoScriptError, ResponseError

from distcrawl.frontier.batch import (
    DEFAULT_SITE_RECOVERY,
    Child,
    DeadLetter,
    Feedback,
    Lease,
    Leased,
    Revisit,
    ShardBatch,
    ShardReply,
    SiteBudget,
    SiteEvent,
    fingerprint_args,
    new_rid_tag,
    raw_text,
    text,
)
from distcrawl.frontier.connection import is_cluster_client
from distcrawl.frontier.keys import FrontierKeys, ShardKeys
from distcrawl.frontier.views import ShardViews

__all__ = [
    "DEFAULT_SITE_RECOVERY",
    "Child",
    "DeadLetter",
    "Dupefilter",
    "Feedback",
    "FrontierKeys",
    "FrontierStore",
    "Lease",
    "Leased",
    "Revisit",
    "ShardKeys",
    "SiteBudget",
    "SiteEvent",
    "SyncResult",
    "effective_factor",
]

logger = logging.getLogger(__name__)

_LUA = resources.files("distcrawl.frontier").joinpath("frontier.lua").read_text("utf-8")
#: the script as EVAL runs it: the file, then a call of its ``frontier`` with KEYS and ARGV
_EVAL_LUA = (
    f"local EVAL_KEYS, EVAL_ARGV = KEYS, ARGV\n{_LUA}\nreturn frontier(EVAL_KEYS, EVAL_ARGV)\n"
)
_SHA = hashlib.sha1(_EVAL_LUA.encode()).hexdigest()
#: the same file as a Redis function library (Redis 7 and later): its functions are made once
#: when it is loaded, not again at every call as an EVAL script's are (frontier_ir: ~43,000
#: instructions of each call). Named after the script's text, so two versions of distcrawl on
#: one Redis never replace each other's
_FUNCTION = f"distcrawl_frontier_{_SHA[:16]}"
_LIBRARY_LUA = f"#!lua name={_FUNCTION}\n{_LUA}\nredis.register_function('{_FUNCTION}', frontier)\n"


def _no_fcall(result: Any) -> bool:
    """Whether ``result`` is the error of a server that does not know FCALL (Redis before 7)
    or whose ACL refuses it."""
    if not isinstance(result, ResponseError):
        return False
    text = str(result).lower()
    return "fcall" in text and ("unknown command" in text or "noperm" in text)


#: seconds after which a node reads a shard it has no news of again (work arriving in an empty
#: shard is announced on the wake channel at once)
DEFAULT_REFRESH = 5.0
#: how a recovery's tombstone starts: a dead node's mark in every shard (``Q:marks``)
TOMBSTONE = "!"
#: URLs the Bloom dupefilter is sized for, crawl-wide (DISTCRAWL_BLOOM_CAPACITY)
DEFAULT_BLOOM_CAPACITY = 10_000_000
#: the Bloom dupefilter's false-positive rate at capacity (DISTCRAWL_BLOOM_ERROR_RATE)
DEFAULT_BLOOM_ERROR_RATE = 0.001
_MAX_BLOOM_BITS = 2**32 - 1
#: most requests a shard called for other work leases above the priority leased elsewhere
ABOVE_LEASE = 4  # a Redis string holds at most 512 MB

# one call of a step: ("script", keys, args) or ("cmd", name, args)
_Call = tuple[str, Any, list[Any]]
_Step = Generator[list[_Call], list[Any], Any]


@dataclass(frozen=True)
class Dupefilter:
    """Which dupefilter the shards keep: exact (a set of 16-byte fingerprints, the default) or
    a Bloom filter sized for ``capacity`` URLs at ``error_rate`` false positives."""

    kind: str = "exact"
    capacity: int = DEFAULT_BLOOM_CAPACITY
    error_rate: float = DEFAULT_BLOOM_ERROR_RATE

    @classmethod
    def from_settings(cls, settings: Any) -> Dupefilter:
        """``DISTCRAWL_DUPEFILTER`` (exact | bloom), ``DISTCRAWL_BLOOM_CAPACITY``,
        ``DISTCRAWL_BLOOM_ERROR_RATE``."""
        kind = (settings.get("DISTCRAWL_DUPEFILTER") or "exact").strip().lower()
        if kind not in ("exact", "bloom"):
            raise ValueError(f"DISTCRAWL_DUPEFILTER must be exact or bloom, not {kind!r}")
        return cls(
            kind=kind,
            capacity=settings.getint("DISTCRAWL_BLOOM_CAPACITY", DEFAULT_BLOOM_CAPACITY),
            error_rate=settings.getfloat("DISTCRAWL_BLOOM_ERROR_RATE", DEFAULT_BLOOM_ERROR_RATE),
        )

    def bloom_shape(self, shards: int) -> list[int] | None:
        """``[m, k]`` of each shard's Bloom filter (bits, hash functions), None when exact."""
        if self.kind != "bloom":
            return None
        if not (0 < self.error_rate < 1) or self.capacity <= 0:
            raise ValueError("the Bloom filter needs a capacity > 0 and an error rate in (0, 1)")
        per_shard = max(1, math.ceil(self.capacity / shards))
        bits = math.ceil(-per_shard * math.log(self.error_rate) / math.log(2) ** 2)
        bits = min(_MAX_BLOOM_BITS, bits)
        k = max(1, round(bits / per_shard * math.log(2)))
        return [bits, k]


def is_tombstone(mark: bytes) -> bool:
    """Whether a mark a shard holds for a node is a recovery's tombstone (the node was
    presumed dead), not one the node wrote."""
    return mark.startswith(TOMBSTONE.encode())


def effective_factor(fields: dict[str, Any], now_ms: float) -> float:
    """A site's adaptive factor at server time *now_ms*, from its ``site:<site>`` hash
    (decoded): the stored cut, worn off linearly since it was set (``site_factor`` in the
    script)."""
    if not fields.get("factor"):
        return 1.0
    factor = float(fields["factor"])
    recover_ms = float(fields.get("recover_ms") or DEFAULT_SITE_RECOVERY * 1000)
    since = float(fields.get("fts") or fields.get("cut_at") or now_ms)
    if recover_ms > 0:
        factor += (now_ms - since) / recover_ms
    return min(1.0, factor)


@dataclass
class _Fence:
    """A fenced node's marks, per shard: the last one the shard confirmed, and the one sent
    in a call whose reply never came (sent again, so that call counts if it ran)."""

    last: dict[int, str] = field(default_factory=dict)
    pending: dict[int, str] = field(default_factory=dict)
    count: int = 0


@dataclass
class SyncResult:
    """What one ``sync`` did, summed over the shards it called."""

    added: int = 0
    filtered: int = 0
    parked: int = 0
    acked: int = 0
    stale_acks: int = 0
    leased: list[Leased] = field(default_factory=list)
    #: ms until the next parked retry or waiting site falls due in any shard (-1: none known)
    next_due_ms: int = -1
    priority_inversions: int = 0
    shards_called: int = 0
    #: adaptive cuts of site rates made, and cuts found worn off, in this call
    site_events: list[SiteEvent] = field(default_factory=list)
    #: [revisit] acks that scheduled their page's next visit (counted in ``acked`` too)
    revisited: int = 0
    #: a fenced call: what a shard held as the node's mark where its last one was gone (Redis
    #: came back with older state); those shards did nothing, and their batches are in unsent
    rewound: bytes | None = None
    unsent: list[ShardBatch] = field(default_factory=list)
    #: ``seeds_done`` was asked and a shard rewound: the seeding list stays (its seeds go
    #: again with the unsent batches, and say ``seeds_done`` again then)
    seeds_pending: bool = False


class FrontierStore:
    """The frontier of one crawl; see the header of ``frontier.lua`` for every key."""

    def __init__(
        self,
        client: Any,
        keys: FrontierKeys,
        *,
        dupefilter: Dupefilter | None = None,
        refresh: float = DEFAULT_REFRESH,
        forget_ms: int | None = None,
        functions: bool = True,
    ) -> None:
        """``functions=False``: run the script with EVALSHA even where Redis has FUNCTION."""
        self.client = client
        #: [revisit] revisit mode: the forgetting dupefilter's generation length (ms); None =
        #: off, the one dupefilter of a crawl that visits each URL once
        self.forget_ms = max(1, int(forget_ms)) if forget_ms else None
        self.keys = keys
        self.dupefilter = dupefilter or Dupefilter()
        self._bloom = self.dupefilter.bloom_shape(keys.shards)
        self._async = inspect.iscoroutinefunction(getattr(client, "execute_command", None))
        #: what this process knows of each shard (queue length, best priority, when seen)
        self.views = ShardViews(keys.shards, refresh=refresh)
        self.live_nodes = 1
        self.idle_nodes = 0
        #: the control slot's pause flag as the last heartbeat saw it (each shard has its own
        #: copy, set by `control pause`; this covers a flag set by hand in the control slot)
        self.paused = False
        #: Redis' clock minus this host's (seconds), as the last heartbeat measured it
        self.clock_offset = 0.0
        self._idle: set[str] = set()
        self._fences: dict[str, _Fence] = {}
        #: whether calls go to the function library (FCALL) or the script (EVALSHA): FCALL
        #: until Redis says it has no FUNCTION or refuses it. The library is loaded when a call
        #: finds it missing, as the script is on NOSCRIPT (see :meth:`_failed`)
        self._functions = functions

    # -- running steps ------------------------------------------------------------------------

    def _shard_call(self, shard: int, *args: Any) -> _Call:
        return ("script", [self.keys.shard(shard).prefix], list(args))

    def _control_call(self, *args: Any) -> _Call:
        return ("script", [self.keys.prefix, self.keys.start_urls], list(args))

    def _pipe(self, calls: list[_Call]) -> Any:
        pipe = self.client.pipeline(transaction=False)
        for kind, keys, args in calls:
            if kind == "script" and self._functions:
                pipe.execute_command("FCALL", _FUNCTION, len(keys), *keys, *args)
            elif kind == "script":
                # by name: redis-py blocks the evalsha method in cluster pipelines, not the command
                pipe.execute_command("EVALSHA", _SHA, len(keys), *keys, *args)
            else:
                pipe.execute_command(keys, *args)
        return pipe

    @staticmethod
    def _failed(results: list[Any]) -> list[int]:
        """The calls that found no script or function (a fresh or restarted server), or whose
        FCALL the server does not know (Redis before 7) or refuses (its ACL)."""
        return [
            i
            for i, r in enumerate(results)
            if isinstance(r, NoScriptError)
            or (
                isinstance(r, ResponseError)
                and ("function not found" in str(r).lower() or _no_fcall(r))
            )
        ]

    @staticmethod
    def _raise_first(results: list[Any]) -> list[Any]:
        for r in results:
            if isinstance(r, Exception):
                raise r
        return results

    def _refused(self, err: Exception) -> None:
        """FCALL or FUNCTION LOAD refused (``err``): the script runs with EVALSHA from now on."""
        self._functions = False
        if "unknown command" not in str(err).lower():
            logger.warning("Redis refused the frontier's function library (%s); using EVALSHA", err)

    def _everywhere(self) -> dict[str, Any]:
        """Where FUNCTION LOAD goes: every master of a cluster, named (the asyncio cluster
        client routes neither the command nor the "primaries" flag), or the one server."""
        if is_cluster_client(self.client):
            return {"target_nodes": self.client.get_primaries()}
        return {}

    def _load_refused(self, results: list[Any]) -> None:
        """EVALSHA from now on where a call's result says Redis has no FCALL or refuses it."""
        refused = next((r for r in results if _no_fcall(r)), None)
        if refused is not None:
            self._refused(refused)

    def _library_refused(self, err: ResponseError) -> None:
        """FUNCTION LOAD's error: EVALSHA from now on, unless the library was there already
        (on a master of a cluster that had it)."""
        if "already exists" not in str(err):
            self._refused(err)

    def _load(self, results: list[Any]) -> None:
        """Load the library (every master of a cluster) or the script that ``results`` found
        missing."""
        self._load_refused(results)
        if self._functions:
            try:
                self.client.execute_command("FUNCTION", "LOAD", _LIBRARY_LUA, **self._everywhere())
            except ResponseError as err:
                self._library_refused(err)
        if not self._functions:
            self.client.script_load(_EVAL_LUA)

    async def _load_async(self, results: list[Any]) -> None:
        self._load_refused(results)
        if self._functions:
            try:
                await self.client.execute_command(
                    "FUNCTION", "LOAD", _LIBRARY_LUA, **self._everywhere()
                )
            except ResponseError as err:
                self._library_refused(err)
        if not self._functions:
            await self.client.script_load(_EVAL_LUA)

    def _execute(self, calls: list[_Call]) -> list[Any]:
        if not calls:
            return []
        results = list(self._pipe(calls).execute(raise_on_error=False))
        missing = self._failed(results)
        if missing:  # a fresh server (restart, failover): load the script, run those again
            self._load([results[i] for i in missing])
            again = self._pipe([calls[i] for i in missing]).execute(raise_on_error=False)
            for i, r in zip(missing, again, strict=True):
                results[i] = r
        return self._raise_first(results)

    async def _execute_async(self, calls: list[_Call]) -> list[Any]:
        if not calls:
            return []
        results = list(await self._pipe(calls).execute(raise_on_error=False))
        missing = self._failed(results)
        if missing:
            await self._load_async([results[i] for i in missing])
            again = await self._pipe([calls[i] for i in missing]).execute(raise_on_error=False)
            for i, r in zip(missing, again, strict=True):
                results[i] = r
        return self._raise_first(results)

    def _drive(self, step: _Step) -> Any:
        """Run a step (a generator of pipelined batches) on the sync or the async client."""
        if self._async:
            return self._drive_async(step)
        try:
            calls = next(step)
            while True:
                calls = step.send(self._execute(calls))
        except StopIteration as stop:
            return stop.value

    async def _drive_async(self, step: _Step) -> Any:
        try:
            calls = next(step)
            while True:
                calls = step.send(await self._execute_async(calls))
        except StopIteration as stop:
            return stop.value

    # -- the node's round trip -------------------------------------------------------------------

    def sync(
        self,
        node: str,
        *,
        children: Iterable[Child] = (),
        acks: Iterable[Lease] = (),
        dead: Iterable[DeadLetter] = (),
        rejected: Sequence[str] = (),
        seeds_done: bool = False,
        lease: int = 0,
        budget: SiteBudget | None = None,
        feedback: Iterable[Feedback] = (),
        tag: str | None = None,
        revisits: Iterable[Revisit] = (),
    ) -> Any:
        """Push ``children``, ack ``acks``, write ``dead`` letters and ``rejected`` entries,
        apply site ``feedback``, schedule ``revisits`` (acks whose pages come back when due;
        revisit mode only) and lease up to ``lease`` requests, in one round trip. With
        ``seeds_done`` the node's seeding list is cleared after its seeds are pushed.

        With a ``tag`` the call is fenced: the rids of the children end in ``.<tag>``, and each
        shard called checks the mark this node wrote there last (see ``sync`` in the script);
        a shard that lacks it does nothing and ``rewound`` says so (``unsent``: its batch)."""
        return self._drive(
            self._sync(
                node,
                [c if isinstance(c, Child) else Child(*c) for c in children],
                list(acks),
                [d if isinstance(d, DeadLetter) else DeadLetter(*d) for d in dead],
                list(rejected),
                seeds_done,
                lease,
                budget or SiteBudget(),
                [f if isinstance(f, Feedback) else Feedback(*f) for f in feedback],
                tag,
                list(revisits),
            )
        )

    def forget_marks(self, node: str) -> None:
        """After a rewind: the node's next calls expect no mark (anything goes once)."""
        self._fences.pop(node, None)

    def _sync(
        self,
        node: str,
        children: list[Child],
        acks: list[Lease],
        dead: list[DeadLetter],
        rejected: list[str],
        seeds_done: bool,
        lease: int,
        budget: SiteBudget,
        feedback: list[Feedback],
        tag: str | None = None,
        revisits: list[Revisit] | None = None,
    ) -> _Step:
        keys = self.keys
        batches: dict[int, ShardBatch] = {}

        def batch(shard: int) -> ShardBatch:
            b = batches.get(shard)
            if b is None:
                b = batches[shard] = ShardBatch()
            return b

        for c in children:
            batch(keys.shard_of(c.site)).children.append(c)
        for a in acks:
            batch(a.shard).acks.append(a)
        for d in dead:
            site = d.site or _record_site(d.record)
            batch(keys.shard_of(site)).dead.append(d._replace(site=site))
        for f in feedback:
            batch(keys.shard_of(f.site)).feedback.append(f)
        if revisits:
            if self.forget_ms is None:
                raise ValueError("revisits need revisit mode (FrontierStore(forget_ms=...))")
            for rv in revisits:
                batch(rv.lease.shard).revisits.append(rv)
        if lease > 0:
            # the best priority each shard gets from this flush's children counts as its head
            pushing: dict[int, tuple[int, int]] = {}
            for shard, b in batches.items():
                if b.children:
                    best = max(c.priority for c in b.children)
                    pushing[shard] = (best, sum(1 for c in b.children if c.priority == best))
            plan = self.views.plan(lease, set(batches), pushing)
            for shard, n in plan.items():
                b = batch(shard)
                b.lease, b.read = n, True
            # every shard called also hands out a few of what it holds of a better priority
            # than the worst this flush leases (what lies behind a shard's head, or what other
            # nodes pushed since this node looked, is unknown here): no call is added for it
            heads = {s: self.views.head(s, pushing) for s in batches}
            known = [heads[s] for s, n in plan.items() if n > 0]
            worst = min((p for p in known if p is not None), default=None)
            if worst is not None:
                for shard, b in batches.items():
                    head = heads[shard]
                    if not b.lease or (head is not None and head > worst):
                        b.above, b.extra, b.read = worst, ABOVE_LEASE, True
        options: dict[str, Any] = {
            "live": self.live_nodes,
            "idle": 1 if self.idle_nodes > 0 else 0,
            "wake": keys.wake,
            "paused": 1 if self.paused else 0,
            "rate": budget.rate,
            "conc": budget.concurrency,
            "burst": budget.burst,
            "adaptive": budget.adaptive_rate,
            "recover": int(budget.recovery * 1000),
        }
        if self._bloom:
            options["bloom"] = self._bloom
        if self.forget_ms is not None:
            options["rv"] = self.forget_ms
        order = sorted(s for s, b in batches.items() if b)
        bloom = self._bloom is not None
        fence = self._fences.setdefault(node, _Fence()) if tag is not None else None
        calls = []
        for s in order:
            opts = options
            if fence is not None:
                mark = fence.pending.get(s)
                if mark is None:
                    fence.count += 1
                    mark = fence.pending[s] = f"{tag}:{fence.count}"
                opts = {**options, "mp": fence.last.get(s, ""), "mn": mark, "tag": tag}
            calls.append(self._shard_call(s, *batches[s].args(node, opts, bloom=bloom)))
        results = yield calls
        result = SyncResult(shards_called=len(order))
        replies = []
        tombstone = None
        for s, raw in zip(order, results, strict=False):
            if fence is not None:
                mark = fence.pending.pop(s, "")
                found = ShardReply.rewound(raw)
                if found is not None:
                    fence.last.pop(s, None)
                    result.rewound = found
                    result.unsent.append(batches[s])
                    if is_tombstone(found):
                        tombstone = found
                    continue
                fence.last[s] = mark
            replies.append(ShardReply.parse(s, raw))
        if fence is not None and tombstone is not None:
            # presumed dead and recovered: every shard holds the recovery's tombstone as this
            # node's mark (those this call wrote to ran before the recovery got there, and say
            # so at their next call). The caller heart-beats before its next sync, which may
            # then go to any shard, one never called before too
            done = {r.shard for r in replies}
            marked = tombstone.decode("utf-8", "replace")
            for i in range(self.keys.shards):
                if i not in done:
                    fence.last[i] = marked
        for r in replies:
            self.views.update(r)
            result.added += r.added
            result.filtered += r.filtered
            result.parked += r.parked
            result.acked += r.acked
            result.stale_acks += r.stale_acks
            result.leased += r.leased
            result.site_events += r.site_events
            result.revisited += r.revisited
        result.priority_inversions = _inversions(replies)
        result.next_due_ms = self.views.next_due_ms()
        after: list[_Call] = []
        if seeds_done or rejected:
            # Once the shards said OK, never in the same round trip: on a cluster the control
            # slot's master may run its part before a shard's master runs the push, and seeds
            # of a node killed in between would be in no list at all. A shard that rewound
            # wrote none of what it carried: the seeding list stays until its seeds are in.
            cleared = seeds_done and result.rewound is None
            result.seeds_pending = seeds_done and not cleared
            if cleared or rejected:
                after.append(self._control_call("seeded", node if cleared else "", *rejected))
        idle = not result.leased
        flip = lease > 0 and idle != (node in self._idle)
        if flip:
            # one control call per change, not per flush: nodes that sleep are woken by the
            # shards that get work (the wake channel)
            after.append(self._control_call("heartbeat", node, "", "1" if idle else "0"))
        if after:
            answers = yield after
            if lease > 0:
                (self._idle.add if idle else self._idle.discard)(node)
            if flip:
                self.idle_nodes = int(answers[-1][2])  # the heartbeat's reply: who sleeps now
        return result

    # -- membership (control slot) ---------------------------------------------------------------

    def heartbeat(self, node: str, info_json: str) -> Any:
        """Heart-beat with the node's info; learns the live and idle nodes and the pause."""
        return self._drive(self._heartbeat(node, info_json))

    def _heartbeat(self, node: str, info_json: str) -> _Step:
        idle = "1" if node in self._idle else "0"
        sent = time.time()
        [(now, live, idle_nodes, paused)] = yield [
            self._control_call("heartbeat", node, info_json, idle)
        ]
        # the server read its clock about half way through the round trip
        self.clock_offset = int(now) / 1000 - (sent + time.time()) / 2
        self.live_nodes = max(1, int(live))
        self.idle_nodes = int(idle_nodes)
        self.paused = bool(int(paused))
        return int(now)

    def server_time(self) -> float:
        """Now on Redis' clock (unix seconds), from this host's clock and the offset the last
        heartbeat measured: times nodes store for one another agree however their clocks
        drift."""
        return time.time() + self.clock_offset

    def ever_used(self) -> Any:
        """Whether the frontier ever held a request or refused a seed (a shard's rid counter,
        the rejected list): a crawl begun, as opposed to one waiting for its first seed."""
        return self._drive(self._ever_used())

    def _ever_used(self) -> _Step:
        calls: list[_Call] = [("cmd", "EXISTS", [s.seq]) for s in self.keys.all_shards()]
        calls.append(("cmd", "EXISTS", [self.keys.rejected]))
        return any(int(n) for n in (yield calls))

    def claim(self, node: str, owner: str, timeout_ms: int, *, force: bool = False) -> Any:
        """Make ``owner`` (JSON: host, pid, run) the process of ``node``; unless ``force``,
        only if no other owner heart-beat in the last ``timeout_ms``. Returns [claimed (1|0),
        the owner found, ms since its heartbeat]."""
        call = self._control_call("claim", node, owner, timeout_ms, "1" if force else "0")
        return self._drive(self._one(call))

    def take_seeds(self, node: str, n: int) -> Any:
        return self._drive(self._one(self._control_call("take_seeds", node, n)))

    def _one(self, call: _Call) -> _Step:
        [value] = yield [call]
        return value

    def release(self, node: str, leases: Sequence[Lease] = ()) -> Any:
        """Return ``leases`` of ``node`` to the queue; with none named, all of them and its
        seeds, and the node leaves the cluster (a clean stop). Returns how many moved."""
        return self._drive(self._release(node, list(leases)))

    def _release(self, node: str, leases: list[Lease]) -> _Step:
        wake = self.keys.wake
        if leases:
            by_shard: dict[int, list[str]] = {}
            for lease in leases:
                by_shard.setdefault(lease.shard, []).append(lease.rid)
            order = list(by_shard)
            calls = [self._shard_call(s, "release", node, wake, *by_shard[s]) for s in order]
            moved = [int(n) for n in (yield calls)]
            for shard, n in zip(order, moved, strict=True):
                if n:
                    self.views.poke(shard)
            return sum(moved)
        return (yield from self._return_all(node, "stop"))

    def _return_all(self, node: str, then: str) -> _Step:
        """Every lease of ``node`` back to the queue, and its seeds to the start list (the
        control command ``then``: ``stop`` leaves the cluster, ``rejoin`` stays in it)."""
        wake = self.keys.wake
        calls = [self._shard_call(s, "release", node, wake) for s in range(self.keys.shards)]
        moved = sum(int(n) for n in (yield calls))
        # only then: a node out of C:nodes with leases still held (on a cluster the control
        # slot's master could run its part first) would be seen by no recovery
        [seeds] = yield [self._control_call(then, node)]
        self._idle.discard(node)
        return moved + int(seeds)

    def rejoin(self, node: str) -> Any:
        """At a node's open, after its claim: return every lease and seed an earlier run of
        ``node`` left, the node staying in the cluster (a member before its first lease, so
        that a death right after it is seen by recovery and by drain detection). Returns how
        many moved."""
        return self._drive(self._return_all(node, "rejoin"))

    def recover(self, node: str, timeout_ms: int) -> Any:
        """Return the leases and seeds of every node whose heartbeat is older than
        ``timeout_ms``. Returns ``[nodes, requests]``."""
        return self._drive(self._recover(node, timeout_ms))

    def _recover(self, node: str, timeout_ms: int) -> _Step:
        [(claimed, seeds)] = yield [self._control_call("recover", node, timeout_ms)]
        names = [text(n) for n in claimed]
        if not names:
            return [[], 0]
        wake = self.keys.wake
        shards = range(self.keys.shards)
        # the same tombstone in every shard: a dead node's mark, so that a node presumed dead
        # is told at its next call of any shard, before it leases from one it never called
        tombstone = f"{TOMBSTONE}{int(time.time() * 1000)}.{secrets.token_urlsafe(6)}"
        calls = [
            self._shard_call(s, "release_dead", dead, wake, tombstone)
            for dead in names
            for s in shards
        ]
        counts = [int(n) for n in (yield calls)]
        for i, n in enumerate(counts):
            if n:
                self.views.poke(i % self.keys.shards)
        moved = sum(counts)
        yield [self._control_call("recovered", *names)]
        return [names, moved + int(seeds)]

    def held_leases(self, node: str) -> Any:
        """Every lease ``node`` holds in Redis, as rids per shard: ``{shard: [rid]}``."""
        return self._drive(self._held_leases(node))

    def _held_leases(self, node: str) -> _Step:
        shards = self.keys.all_shards()
        # the held hashes, and the leases sets older versions wrote: one round trip
        replies = yield [("cmd", "HKEYS", [s.held(node)]) for s in shards] + [
            ("cmd", "ZRANGE", [s.leases(node), 0, -1]) for s in shards
        ]
        held, older = replies[: len(shards)], replies[len(shards) :]
        return {
            s.index: [raw_text(r) for r in [*a, *b]]
            for s, a, b in zip(shards, held, older, strict=True)
        }

    def mark_seen(self, fingerprints: Sequence[bytes | str]) -> Any:
        """Record fingerprints of no known site (a migrated dupefilter) in every shard, where
        each shard's dupefilter finds them. Returns how many were new (in the first shard)."""
        return self._drive(self._mark_seen(list(fingerprints)))

    def _mark_seen(self, fingerprints: list[bytes | str]) -> _Step:
        bloom = self._bloom is not None
        args: list[Any] = []
        for fp in fingerprints:
            args += fingerprint_args(fp, bloom=bloom)
        opts: dict[str, Any] = {"bloom": self._bloom} if bloom else {}
        if self.forget_ms is not None:
            opts["rv"] = self.forget_ms
        options = json.dumps(opts)
        calls = [self._shard_call(s, "mark_seen", options, *args) for s in range(self.keys.shards)]
        added = yield calls
        return int(added[0]) if added else 0

    def seen(self) -> Any:
        """URLs the exact dupefilter holds, over every shard (O(shards) reads)."""
        return self._drive(self._seen())

    def _seen(self) -> _Step:
        shards = self.keys.all_shards()
        if self.forget_ms is not None:
            # [revisit] the current generation and the previous one (a URL revisited since the
            # last turn is in both: an upper bound)
            gens = yield [("cmd", "GET", [s.seen_generation]) for s in shards]
            calls: list[_Call] = []
            for s, g in zip(shards, gens, strict=True):
                if g is not None:
                    calls += [("cmd", "HGET", [s.seen_gen_info(int(g) - d), "n"]) for d in (0, 1)]
            counts = yield calls
            return sum(int(c or 0) for c in counts)
        counts = yield [("cmd", "HGET", [s.seen_info, "n"]) for s in shards]
        return sum(int(c or 0) for c in counts)

    def dupefilter_bytes(self) -> Any:
        """Bytes the dupefilter takes (MEMORY USAGE of every bucket, or of the Bloom filters)."""
        return self._drive(self._dupefilter_bytes())

    def _dupefilter_bytes(self) -> _Step:
        shards = self.keys.all_shards()
        if self.forget_ms is not None:
            return (yield from self._generations_bytes())
        if self._bloom is not None:
            sizes = yield [("cmd", "MEMORY", ["USAGE", s.bloom, "SAMPLES", "0"]) for s in shards]
            return sum(int(n or 0) for n in sizes)
        infos = yield [("cmd", "HMGET", [s.seen_info, "L", "split"]) for s in shards]
        calls: list[_Call] = []
        for s, (level, split) in zip(shards, infos, strict=True):
            buckets = 2 ** int(level or 0) + int(split or 0)
            calls.append(("cmd", "MEMORY", ["USAGE", s.seen_info, "SAMPLES", "0"]))
            calls += [
                ("cmd", "MEMORY", ["USAGE", s.seen_bucket(b), "SAMPLES", "0"])
                for b in range(buckets)
            ]
        sizes = yield calls
        return sum(int(n or 0) for n in sizes)

    def _generations_bytes(self) -> _Step:
        """[revisit] MEMORY USAGE of the forgetting dupefilter's two live generations."""
        shards = self.keys.all_shards()
        gens = yield [("cmd", "GET", [s.seen_generation]) for s in shards]
        live = [
            (s, int(g) - d)
            for s, g in zip(shards, gens, strict=True)
            if g is not None
            for d in (0, 1)
        ]
        if self._bloom is not None:
            sizes = yield [
                ("cmd", "MEMORY", ["USAGE", s.bloom_gen(g), "SAMPLES", "0"]) for s, g in live
            ]
            return sum(int(n or 0) for n in sizes)
        infos = yield [("cmd", "HMGET", [s.seen_gen_info(g), "L", "split"]) for s, g in live]
        calls: list[_Call] = [
            ("cmd", "MEMORY", ["USAGE", s.seen_generation, "SAMPLES", "0"]) for s in shards
        ]
        for (s, g), (level, split) in zip(live, infos, strict=True):
            if level is None and split is None:
                continue
            buckets = 2 ** int(level or 0) + int(split or 0)
            calls.append(("cmd", "MEMORY", ["USAGE", s.seen_gen_info(g), "SAMPLES", "0"]))
            calls += [
                ("cmd", "MEMORY", ["USAGE", s.seen_gen_bucket(g, b), "SAMPLES", "0"])
                for b in range(buckets)
            ]
        sizes = yield calls
        return sum(int(n or 0) for n in sizes)

    def revisit_status(self, grace_s: float = 0.0) -> Any:
        """[revisit] Over every shard: ``{"scheduled", "due_within_grace", "next_due_s"
        (None: none scheduled; < 0: overdue), "behind_s", "due_queued"}``."""
        return self._drive(self._revisit_status(grace_s))

    def _revisit_status(self, grace_s: float) -> _Step:
        grace = int(grace_s * 1000)
        replies = yield [
            self._shard_call(s, "revisit_status", grace) for s in range(self.keys.shards)
        ]
        scheduled = due = late = behind = 0
        nexts: list[int] = []
        for n, soon, next_in, behind_ms, queued in replies:
            scheduled += int(n)
            due += int(soon)
            late += int(queued)
            behind = max(behind, int(behind_ms))
            if text(next_in):
                nexts.append(int(float(text(next_in))))
        return {
            "scheduled": scheduled,
            "due_within_grace": due,
            "next_due_s": min(nexts) / 1000 if nexts else None,
            "behind_s": behind / 1000,
            "due_queued": late,
        }

    def drained(self) -> Any:
        """``[queued (incl. waiting for their site), delayed, leased, seeding, start]`` over
        every shard: all zero means nothing is left."""
        return self._drive(self._drained())

    def _drained(self) -> _Step:
        [(seeding, start, nodes)] = yield [self._control_call("census")]
        names = [text(n) for n in nodes]
        totals = [0, 0, 0]
        replies = yield [self._shard_call(s, "drained", *names) for s in range(self.keys.shards)]
        for reply in replies:
            for i in range(3):
                totals[i] += int(reply[i])
        return [*totals, int(seeding), int(start)]

    # -- sites and dead letters -------------------------------------------------------------------

    def set_site_limits(self, site: str, *, rate: float | None, concurrency: int | None) -> Any:
        """Per-site limits that override the defaults for every node (None = remove)."""
        shard = self.keys.site_keys(site)
        key = shard.site(site)
        pipe = self.client.pipeline(transaction=True)
        for name, value in (("limit_rate", rate), ("limit_conc", concurrency)):
            if value is None:
                pipe.hdel(key, name)
            else:
                pipe.hset(key, name, value)
        # the script reads a site's budget hash only for sites in this set (or with a cut)
        if rate is None and concurrency is None:
            pipe.srem(shard.limits, site)
        else:
            pipe.sadd(shard.limits, site)
            # the shard's in-flight counts, which a concurrency limit needs and the status
            # shows: the script counts once the hash exists (and from then on)
            pipe.hsetnx(shard.active, site, 0)
        return pipe.execute()

    def take_token(self, site: str, budget: SiteBudget) -> Any:
        call = self._shard_call(
            self.keys.shard_of(site),
            "take_token",
            site,
            budget.rate,
            budget.burst,
            budget.adaptive_rate,
        )
        return self._drive(self._one(call))

    def requeue_dead(self, ids: Sequence[str] = (), max_count: int = 1_000_000) -> Any:
        """Move dead letters (the named ones, or up to ``max_count`` per shard) back to the
        queue. Returns how many moved."""
        return self._drive(self._requeue_dead(list(ids), max_count))

    def _requeue_dead(self, ids: list[str], max_count: int) -> _Step:
        # a tag of its own per call: the new rids cannot meet older ones, whatever Redis lost
        tag = new_rid_tag()
        calls = [
            self._shard_call(s, "requeue_dead", max_count, tag, *ids)
            for s in range(self.keys.shards)
        ]
        counts = [int(n) for n in (yield calls)]
        moved = sum(counts)
        if moved:
            wake: list[_Call] = [
                ("cmd", "PUBLISH", [self.keys.wake, shard]) for shard, n in enumerate(counts) if n
            ]
            for shard, n in enumerate(counts):
                if n:
                    self.views.poke(shard)
            yield [("cmd", "HINCRBY", [self.keys.counters, "requeued_dead_letters", moved]), *wake]
        return moved

    def set_paused(self, paused: str | None) -> Any:
        """Pause (``paused`` says who and when) or resume every shard and the control slot."""
        names = [self.keys.paused] + [s.paused for s in self.keys.all_shards()]
        calls: list[_Call] = [
            ("cmd", "SET", [k, paused]) if paused is not None else ("cmd", "DEL", [k])
            for k in dict.fromkeys(names)
        ]
        if paused is None:
            calls.append(("cmd", "PUBLISH", [self.keys.wake, "resumed"]))
        return self._drive(self._many(calls))

    def _many(self, calls: list[_Call]) -> _Step:
        results = yield calls
        return results


def _record_site(record: str) -> str:
    """The site of a dead letter given none: the record's ``site``, else its URL's host
    (as the script's ``record_site`` finds it when the letter is re-queued)."""
    try:
        decoded = json.loads(record)
        site, url = decoded.get("site"), decoded.get("url")
    except (ValueError, AttributeError):
        return ""
    if isinstance(site, str) and site:
        return site
    return (urlsplit(url).hostname or "") if isinstance(url, str) else ""


def _inversions(replies: list[ShardReply]) -> int:
    """Leased requests of lower priority than another read shard's best one still queued."""
    heads = [(r.shard, r.head_priority) for r in replies if r.head_priority is not None]
    if not heads:
        return 0
    count = 0
    for r in replies:
        best_elsewhere = max((p for s, p in heads if s != r.shard), default=None)
        if best_elsewhere is None:
            continue
        count += sum(1 for leased in r.leased if leased.priority < best_elsewhere)
    return count
