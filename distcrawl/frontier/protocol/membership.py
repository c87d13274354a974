"""The control slot's commands and the seed list's: heart-beats, node-id claims, seeds taken by
nodes, clean stops, recoveries of nodes presumed dead, and the census ``drained`` reads."""

from __future__ import annotations

import secrets
import time
from typing import TYPE_CHECKING, Any, NamedTuple

from distcrawl.base.names.commands import RESET_CRAWL_FORCE
from distcrawl.frontier.batch import Lease, raw_text, text
from distcrawl.frontier.protocol.runner import (
    Call,
    Step,
    control_call,
    redis_command,
    seeds_call,
    shard_call,
)
from distcrawl.frontier.protocol.spec import FORMAT, TOMBSTONE

if TYPE_CHECKING:
    from distcrawl.frontier.keys import ControlKeys, FrontierKeys
    from distcrawl.frontier.store import FrontierStore

__all__ = ["LOST", "Beat", "Claim", "CrawlFormatError", "Origin", "Seeds", "lost_advice"]

#: the first word of a start marker a node wrote when it found the crawl's state gone
LOST = "lost"


class CrawlFormatError(RuntimeError):
    """The crawl's keys are in another frontier format than this distcrawl's."""

    def __init__(self, spider: str, found: str) -> None:
        self.spider, self.found = spider, found
        super().__init__(
            f"crawl {spider!r} is stored in frontier format {found}; this distcrawl reads and "
            f"writes format {FORMAT}. Finish that crawl with the distcrawl that wrote it, or "
            f"reset it (`{RESET_CRAWL_FORCE.line(spider=spider)}`, which deletes it)"
        )


class Beat(NamedTuple):
    """A heartbeat's answer."""

    now_ms: int
    live: int
    idle: int
    paused: bool


def lost_advice(spider: str) -> str:
    """What an operator does about a crawl whose state is gone."""
    return (
        f"to crawl it again from nothing (every URL fetched again), run `distcrawl control "
        f"{spider} reset --yes-really` and seed it again; to keep what was crawled, bring "
        "Redis' data back first (its append-only file, a backup)"
    )


class Origin(NamedTuple):
    """The crawl's start marker as Redis holds it: ``marker`` ("<ms> <node>", empty when there
    is none); ``lost``: a node found the crawl's state gone, and this says when, which node,
    and the marker it knew."""

    marker: str
    lost: bool = False

    @classmethod
    def of(cls, raw: Any) -> Origin:
        marker = text(raw) if raw is not None else ""
        return cls(marker, marker.split(" ", 1)[0] == LOST)

    def refusal(self, spider: str) -> str:
        """The one line of a node or command that meets a crawl marked lost."""
        fields = self.marker.split(" ")
        when, node = (fields[1], fields[2]) if len(fields) > 2 else ("?", "?")
        return (
            f"the state of crawl {spider!r} is gone from Redis (node {node} found it so at "
            f"{when} ms, unix time): nothing is crawled again in silence; {lost_advice(spider)}"
        )


class Claim(NamedTuple):
    """A node-id claim's answer: claimed, else the owner that holds the id and the ms since
    its last heartbeat."""

    claimed: bool
    owner: str
    age_ms: int


def heartbeat_calls(store: FrontierStore, node: str, info_json: str) -> list[Call]:
    """The heartbeat's calls: the control slot's ``heartbeat`` and a read of the crawl's start
    marker, in one round trip (:func:`read_beat` reads their answers)."""
    idle = "1" if store.is_idle(node) else "0"
    keys = store.keys
    return [
        control_call(keys, "heartbeat", node=node, info=info_json, idle=idle),
        redis_command("GET", keys.origin),
    ]


def read_beat(store: FrontierStore, replies: list[Any], sent: float) -> Beat:
    """A heartbeat's answers (the calls were sent at *sent*, this host's clock), kept in
    *store*: the live and idle nodes, the pause, the offset of Redis' clock and the crawl's
    start marker."""
    raw, origin = replies[0], replies[1]
    store.origin = Origin.of(origin)
    beat = Beat(int(raw[0]), max(1, int(raw[1])), int(raw[2]), bool(int(raw[3])))
    # the server read its clock about half way through the round trip
    store.clock_offset = beat.now_ms / 1000 - (sent + time.time()) / 2
    store.live_nodes, store.idle_nodes, store.paused = beat.live, beat.idle, beat.paused
    return beat


def heartbeat(store: FrontierStore, node: str, info_json: str) -> Step[int]:
    sent = time.time()
    replies = yield heartbeat_calls(store, node, info_json)
    return read_beat(store, replies, sent).now_ms


def claim(keys: FrontierKeys, node: str, owner: str, timeout_ms: int, force: bool) -> Step[Claim]:
    force_flag = "1" if force else "0"
    call = control_call(keys, "claim", node=node, owner=owner, timeout=timeout_ms, force=force_flag)
    [raw] = yield [call]
    if int(raw[0]) < 0:
        raise CrawlFormatError(keys.spider, text(raw[1]))
    return Claim(bool(int(raw[0])), text(raw[1]), int(raw[2]))


class Seeds(NamedTuple):
    """Seeds a node took: those given back by a node that stopped or died holding them (their
    requests may be in the crawl already), and those from the seed list."""

    again: list[Any]
    fresh: list[Any]

    def __bool__(self) -> bool:
        return bool(self.again or self.fresh)


def take_seeds(keys: FrontierKeys, node: str, n: int, resume: bool) -> Step[Seeds]:
    # a member first (seeds taken by a node that is not one would escape recovery), then the
    # take, in the seed list's slot wherever it hashes
    yield [control_call(keys, "heartbeat", node=node, info="", idle="-1")]
    calls = [seeds_call(keys, "take_seeds", node=node, n=n)]
    if resume:
        # what the node's taken list holds before this take: seeds of a take whose reply the
        # node never heard (it ran, the connection broke), read in the same round trip
        calls.insert(0, redis_command("LRANGE", keys.seeds.taken(node), 0, -1))
    *lost, (again, fresh) = yield calls
    return Seeds([*(lost[0] if lost else ()), *again], list(fresh))


def start(store: FrontierStore, node: str) -> Step[Origin]:
    """The crawl's start marker, written by ``node`` if the crawl has none: what Redis holds
    after (another node's, or a lost one)."""
    keys = store.keys
    marker = f"{int(time.time() * 1000)} {node}"
    _, raw = yield [
        redis_command("SET", keys.origin, marker, "NX"),
        redis_command("GET", keys.origin),
    ]
    store.origin = Origin.of(raw)
    return store.origin


def read_origin(store: FrontierStore) -> Step[Origin]:
    [raw] = yield [redis_command("GET", store.keys.origin)]
    store.origin = Origin.of(raw)
    return store.origin


def mark_lost(store: FrontierStore, node: str, known: str) -> Step[Origin]:
    """Say in the crawl that its state is gone (``known``: the marker ``node`` knew), unless
    Redis holds a marker again (another node's: a lost one, or a crawl begun since)."""
    keys = store.keys
    lost = f"{LOST} {int(time.time() * 1000)} {node} {known}"
    _, raw = yield [
        redis_command("SET", keys.origin, lost, "NX"),
        redis_command("GET", keys.origin),
    ]
    store.origin = Origin.of(raw)
    return store.origin


#: milliseconds after which a dashboard that wrote no address again is taken for gone
DASHBOARD_MAX_AGE_MS = 60_000


def announce_dashboard(keys: ControlKeys, addresses: list[str]) -> Step[None]:
    """Record where a dashboard listens (``host:port`` each), now."""
    now = str(int(time.time() * 1000))
    yield [redis_command("HSET", keys.dashboards, *(x for a in addresses for x in (a, now)))]


def dashboards(keys: ControlKeys) -> Step[list[str]]:
    """The addresses of the dashboards that announced themselves within a minute."""
    [raw] = yield [redis_command("HGETALL", keys.dashboards)]
    since = int(time.time() * 1000) - DASHBOARD_MAX_AGE_MS
    items = raw.items() if isinstance(raw, dict) else zip(raw[::2], raw[1::2], strict=True)
    return sorted(text(a) for a, ms in items if text(ms).isdigit() and int(text(ms)) >= since)


def ever_used(keys: FrontierKeys) -> Step[bool]:
    calls = [redis_command("EXISTS", s.seq) for s in keys.all_shards()]
    calls.append(redis_command("EXISTS", keys.rejected))
    return any(int(n) for n in (yield calls))


def release(store: FrontierStore, node: str, leases: list[Lease]) -> Step[int]:
    """The named leases of ``node`` back to the queue; with none named, every lease and seed
    (a clean stop)."""
    if not leases:
        return (yield from return_all(store, node, "stop"))
    keys = store.keys
    by_shard: dict[int, list[str]] = {}
    for lease in leases:
        by_shard.setdefault(lease.shard, []).append(lease.rid)
    order = list(by_shard)
    calls = [_release(keys, s, node, by_shard[s]) for s in order]
    moved = [int(n) for n in (yield calls)]
    for shard, n in zip(order, moved, strict=True):
        if n:
            store.views.poke(shard)
    return sum(moved)


def _release(keys: FrontierKeys, shard: int, node: str, rids: list[str], mark: str = "") -> Call:
    return shard_call(
        keys, shard, "release", node=node, wake=keys.wake, shard=shard, mark=mark, rids=rids
    )


def return_all(store: FrontierStore, node: str, then: str) -> Step[int]:
    """Every lease of ``node`` back to the queue, and its seeds given back (the control
    command ``then``: ``stop`` leaves the cluster, its marks cleared; ``rejoin`` stays in it,
    a fresh mark of the node in every shard)."""
    keys = store.keys
    # at an open, a mark in every shard: a Redis that comes back with data from before the
    # open (which lost the node's membership too) is noticed at the node's first call of any
    # shard, before it leases outside the members that recovery and drains read
    mark = f"open.{secrets.token_urlsafe(6)}" if then == "rejoin" else ""
    calls = [_release(keys, s, node, [], mark) for s in range(keys.shards)]
    calls.append(seeds_call(keys, "give_back", nodes=[node]))
    moved = sum(int(n) for n in (yield calls))
    store.forget_marks(node)
    if mark:
        store.fence(node).last.update(dict.fromkeys(range(keys.shards), mark))
    # only then: a node out of the members with leases or seeds still held (on a cluster the
    # control slot's master could run its part first) would be seen by no recovery
    yield [control_call(keys, then, node=node)]
    store.set_idle(node, False)
    return moved


def recover(store: FrontierStore, node: str, timeout_ms: int) -> Step[list[Any]]:
    keys = store.keys
    [claimed] = yield [control_call(keys, "recover", node=node, timeout=timeout_ms)]
    names = [text(n) for n in claimed]
    if not names:
        return [[], 0]
    # the same tombstone in every shard: a dead node's mark, so that a node presumed dead
    # is told at its next call of any shard, before it leases from one it never called
    tombstone = f"{TOMBSTONE}{int(time.time() * 1000)}.{secrets.token_urlsafe(6)}"
    calls = [
        shard_call(keys, s, "release_dead", node=dead, wake=keys.wake, shard=s, tombstone=tombstone)
        for dead in names
        for s in range(keys.shards)
    ]
    # and their seeds, given back in the seed list's slot
    calls.append(seeds_call(keys, "give_back", nodes=names))
    *counts, seeds = [int(n) for n in (yield calls)]
    for i, n in enumerate(counts):
        if n:
            store.views.poke(i % keys.shards)
    yield [control_call(keys, "recovered", nodes=names)]
    return [names, sum(counts) + seeds]


def held_leases(keys: FrontierKeys, node: str) -> Step[dict[int, list[Any]]]:
    shards = keys.all_shards()
    replies = yield [redis_command("HKEYS", s.held(node)) for s in shards]
    return {s.index: [raw_text(r) for r in rids] for s, rids in zip(shards, replies, strict=True)}


def held_values(
    keys: FrontierKeys, node: str, leases: list[Lease]
) -> Step[dict[tuple[int, str], str]]:
    by_shard: dict[int, list[str]] = {}
    for lease in leases:
        by_shard.setdefault(lease.shard, []).append(lease.rid)
    shards = list(by_shard)
    calls = [redis_command("HMGET", keys.shard(s).held(node), *by_shard[s]) for s in shards]
    replies = yield calls
    return {
        (shard, rid): text(value)
        for shard, values in zip(shards, replies, strict=True)
        for rid, value in zip(by_shard[shard], values, strict=True)
        if value is not None
    }


def drained(keys: FrontierKeys) -> Step[list[int]]:
    [nodes] = yield [control_call(keys, "census")]
    names = [text(n) for n in nodes]
    totals = [0, 0, 0]
    calls = [shard_call(keys, s, "drained", nodes=names) for s in range(keys.shards)]
    calls.append(seeds_call(keys, "seed_census", nodes=names))
    *replies, (seeding, start) = yield calls
    for reply in replies:
        for i in range(3):
            totals[i] += int(reply[i])
    return [*totals, int(seeding), int(start)]
