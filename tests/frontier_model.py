"""A small Python model of what the frontier must hold, and a Hypothesis state machine that
drives the real frontier (:class:`~distcrawl.frontier.store.FrontierStore` on a real Redis) and
the model side by side: pushes, leases, acks, failures (dead letters), parked retries,
releases, heart-beats, clean stops, crashes and restarts of 3 node identities, recoveries of
nodes presumed dead, rewinds of Redis to an older copy of its data and Redis restarts, in any
order. After every step the whole frontier (queues in order, parked retries, leases of each
node, dead letters, members, fencing marks, counts) is compared with the model.

Each node acts as a node of distcrawl does around the store: its syncs are fenced (a tag); a
rewound call makes it take a new tag, heart-beat again when it was presumed dead, reconcile its
leases with Redis (drop those it no longer holds, return those it does not know) and send
again what the rewound shards did not take.

``tests/frontier/test_model.py`` runs a bounded number of examples; ``bench/model.py`` runs
more (both call :func:`run_model`).
"""

from __future__ import annotations

import copy
import hashlib
import json
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import redis
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from distcrawl.frontier.keys import FrontierKeys
from distcrawl.frontier.protocol.spec import level_of
from distcrawl.frontier.sites import split_value
from distcrawl.frontier.store import Child, DeadLetter, FrontierStore, Lease, SyncResult
from distcrawl.servers.process import RedisServer

__all__ = ["Model", "run_model"]

#: shards of the modelled crawl; the sites cover each, two share one
SHARDS = 4
SITES = ("a.test", "b.test", "c.test", "d.test", "g.test")
URLS = tuple(f"http://{site}/p{i}" for site in SITES for i in range(4))
NODES = ("A", "B", "C")
PRIORITIES = (-10, 0, 50, 100)
#: a parked retry's delay: longer than any example, so it stays parked
PARK_MS = 3_600_000
#: the recovery's heartbeat timeout (ms); the silent node's heartbeat is set far in the past
RECOVER_TIMEOUT_MS = 1000


def _payload(url: str) -> str:
    return json.dumps({"u": url}, separators=(",", ":"))


def _fp(url: str) -> bytes:
    """A fingerprint as a node makes one (a digest)."""
    return hashlib.sha1(url.encode()).digest()


def _url(payload: str) -> str:
    return str(json.loads(payload)["u"])


def _site(url: str) -> str:
    return url.split("/")[2]


def _is_tombstone(mark: str | None) -> bool:
    return mark is not None and mark.startswith("!")


@dataclass
class Entry:
    """A request as the model knows it: its URL, its priority, and its rid once a lease named
    it (the queue's order within a priority is the order of the model's lists)."""

    url: str
    priority: int
    rid: str | None = None

    def seq(self) -> int:
        """The seq its rid was made with ("<seq>.<tag>"): the order leases go back in."""
        assert self.rid is not None
        return int(self.rid.split(".", 1)[0])


@dataclass
class Model:
    """What the frontier must hold."""

    keys: FrontierKeys
    queue: dict[int, list[Entry]] = field(default_factory=dict)
    parked: dict[int, list[Entry]] = field(default_factory=dict)
    #: node -> (shard, rid) -> the request it holds
    leases: dict[str, dict[tuple[int, str], Entry]] = field(default_factory=dict)
    seen: set[str] = field(default_factory=set)
    dead: dict[int, set[str]] = field(default_factory=dict)
    members: set[str] = field(default_factory=set)
    #: (node, shard) -> the fencing mark Redis holds
    marks: dict[tuple[str, int], str] = field(default_factory=dict)

    @classmethod
    def empty(cls, keys: FrontierKeys) -> Model:
        shards = range(keys.shards)
        return cls(
            keys,
            queue={s: [] for s in shards},
            parked={s: [] for s in shards},
            leases={n: {} for n in NODES},
            dead={s: set() for s in shards},
        )

    def shard(self, url: str) -> int:
        return self.keys.shard_of(_site(url))

    def in_order(self, shard: int) -> list[Entry]:
        """The shard's queue as it leaves: best priority first, then as ``queue`` holds it."""
        return sorted(self.queue[shard], key=lambda e: -e.priority)

    def push(self, url: str, priority: int, dont_filter: bool, delay_ms: int) -> str:
        """One child into its shard: ``added``, ``parked`` or ``filtered``."""
        fresh = url not in self.seen
        self.seen.add(url)
        if not (fresh or dont_filter):
            return "filtered"
        s = self.shard(url)
        entry = Entry(url, priority)
        if delay_ms:
            self.parked[s].append(entry)
            return "parked"
        self.queue[s].append(entry)
        return "added"

    def holds(self, node: str, lease: Lease) -> bool:
        return (lease.shard, lease.rid) in self.leases[node]

    def end_lease(self, node: str, lease: Lease) -> bool:
        return self.leases[node].pop((lease.shard, lease.rid), None) is not None

    def give_back(self, node: str, only: Iterable[tuple[int, str]] | None = None) -> int:
        """Leases of ``node`` back to the front of their priority's queue (all, or the ones
        named), the oldest (by the seq of its rid) first."""
        held = self.leases[node]
        names = list(held) if only is None else [k for k in only if k in held]
        back: dict[int, list[Entry]] = {}
        for shard, rid in names:
            back.setdefault(shard, []).append(held.pop((shard, rid)))
        for shard, entries in back.items():
            entries.sort(key=Entry.seq)
            self.queue[shard][:0] = entries
        return len(names)

    def copy(self) -> Model:
        return copy.deepcopy(self)


def _rewinds(model: Model, node: str, shard: int, last: str) -> bool:
    """Whether a fenced call of ``node`` that last confirmed mark ``last`` in ``shard`` is
    refused there (the script's ``fence``)."""
    found = model.marks.get((node, shard))
    return found != last and (last != "" or _is_tombstone(found))


class FrontierMachine(RuleBasedStateMachine):
    """The frontier and its model, step by step (see the module's docstring)."""

    server: RedisServer

    def __init__(self) -> None:
        super().__init__()
        self.admin = redis.Redis.from_url(self.server.url, socket_timeout=30)
        self.admin.flushall()
        self.keys = FrontierKeys("m", "m:start_urls", shards=SHARDS)
        self.model = Model.empty(self.keys)
        self.clients = {n: redis.Redis.from_url(self.server.url, socket_timeout=30) for n in NODES}
        self.stores: dict[str, FrontierStore] = {}
        self.believed: dict[str, dict[tuple[int, str], Lease]] = {n: {} for n in NODES}
        self.running: dict[str, bool] = dict.fromkeys(NODES, False)
        self.generation: dict[str, int] = dict.fromkeys(NODES, 0)
        self.rid_urls: dict[tuple[int, str], str] = {}
        self.snapshot: tuple[list[tuple[bytes, int, bytes]], Model] | None = None
        self.dead_ids = 0
        for node in NODES:
            self._start(node)

    def teardown(self) -> None:
        try:
            self._drain()
        finally:
            for c in (*self.clients.values(), self.admin):
                c.close()

    def _drain(self) -> None:
        """Whatever happened, the crawl can finish: every node stops cleanly (or starts again
        and gives back what an earlier run held), and one node leases and acks the rest."""
        for node in NODES:
            if not self.running[node]:
                self._start(node)
            self.stop_node(node)
        self._start("A")
        for _ in range(4 * len(URLS)):
            if not any(self.model.queue.values()):
                break
            self._sync("A", lease=8)
            acks = list(self.believed["A"].values())
            self.believed["A"].clear()
            if acks:
                self._sync("A", acks=acks)
        parked = sum(len(p) for p in self.model.parked.values())
        assert FrontierStore(self.admin, self.keys).drained() == [0, parked, 0, 0, 0]

    # -- a node's side of the protocol ------------------------------------------------------

    def _tag(self, node: str) -> str:
        return f"{node}{self.generation[node]}"

    def _start(self, node: str) -> None:
        """A node process starts under ``node``: fresh client state, its earlier run's leases
        back to the queue, a member again."""
        store = FrontierStore(self.clients[node], self.keys, refresh=0.0)
        self.stores[node] = store
        self.generation[node] += 1
        moved = store.rejoin(node)
        assert moved == self.model.give_back(node)
        # its open writes a mark of its own in every shard
        opened = store.fence(node).last
        for s in range(SHARDS):
            self.model.marks[(node, s)] = opened[s]
        store.heartbeat(node, "{}")
        self.model.members.add(node)
        self.believed[node] = {}
        self.running[node] = True

    def _sync(
        self,
        node: str,
        *,
        children: list[Child] = (),  # type: ignore[assignment]
        acks: list[Lease] = (),  # type: ignore[assignment]
        dead: list[DeadLetter] = (),  # type: ignore[assignment]
        lease: int = 0,
        again: bool = False,
    ) -> SyncResult:
        """One fenced sync of ``node``, checked against the model and applied to it."""
        model = self.model
        store = self.stores[node]
        fence = store.fence(node)
        before = dict(fence.last)
        writes = {model.shard(_url(c.payload)) for c in children}
        writes |= {a.shard for a in acks} | {d.lease.shard for d in dead if d.lease}
        expected = {s: _rewinds(model, node, s, before.get(s, "")) for s in writes}
        idle = store.is_idle(node)
        result = store.sync(
            node, children=children, acks=acks, dead=dead, lease=lease, tag=self._tag(node)
        )
        unsent = set()
        for batch in result.unsent:
            unsent |= {model.shard(_url(c.payload)) for c in batch.children}
            unsent |= {a.shard for a in batch.acks} | {d.lease.shard for d in batch.dead if d.lease}
        if store.is_idle(node) != idle:
            model.members.add(node)  # the call told the control slot it sleeps or wakes
        for s in writes:
            assert (s in unsent) == expected[s], (s, expected, unsent, result.rewound)
        if again:
            assert result.rewound is None, "the call after a rewind was refused again"
        after = fence.last
        ok = {s for s, v in after.items() if v != before.get(s) and not _is_tombstone(v)}
        for s in ok:
            assert not _rewinds(model, node, s, before.get(s, "")), ("ran", s)
            model.marks[(node, s)] = after[s]
        # the shards that took the call, in the script's order: children, dead letters, acks
        counts = {"added": 0, "filtered": 0, "parked": 0, "acked": 0, "stale": 0}
        for c in children:
            if model.shard(_url(c.payload)) in ok:
                counts[model.push(_url(c.payload), c.priority, c.dont_filter, c.delay_ms)] += 1
        for d in dead:
            assert d.lease is not None
            if d.lease.shard in ok:
                if model.holds(node, d.lease):
                    model.dead[d.lease.shard].add(d.id)
                else:
                    counts["stale"] += 1
        for a in acks:
            if a.shard in ok:
                counts["acked" if model.end_lease(node, a) else "stale"] += 1
        got = (result.added, result.filtered, result.parked, result.acked, result.stale_acks)
        assert got == tuple(counts.values()), (got, counts)
        self._leased(node, result)
        if result.rewound is not None:
            self._rewound(node, result)
        return result

    def _leased(self, node: str, result: SyncResult) -> None:
        """Leases come from the head of each shard's queue, best priority first, in order."""
        model = self.model
        by_shard: dict[int, list[Any]] = {}
        for item in result.leased:
            by_shard.setdefault(item.lease.shard, []).append(item)
        for s, items in by_shard.items():
            head = model.in_order(s)[: len(items)]
            urls = [json.loads(i.payload)["u"] for i in items]
            assert urls == [e.url for e in head], (s, urls, [e.url for e in model.in_order(s)])
            for item, entry in zip(items, head, strict=True):
                lease = item.lease
                key = (lease.shard, lease.rid)
                assert item.priority == entry.priority, (s, item, entry, model.in_order(s))
                # a rid names one request for good
                assert self.rid_urls.setdefault(key, entry.url) == entry.url, key
                model.queue[s].remove(entry)
                entry.rid = lease.rid
                model.leases[node][key] = entry
                self.believed[node][key] = lease

    def _rewound(self, node: str, result: SyncResult) -> None:
        """What a node does when a shard lacked its last mark: a new tag, a heartbeat, its
        leases reconciled, and what was not taken sent again."""
        assert result.rewound is not None
        self.generation[node] += 1
        store = self.stores[node]
        # a member again before it leases (Redis may have lost its membership, or another
        # node presumed it dead)
        store.heartbeat(node, "{}")
        self.model.members.add(node)
        held = store.held_leases(node)
        in_redis = {(s, str(rid)) for s, rids in held.items() for rid in rids}
        believed = self.believed[node]
        for key in list(believed):
            if key not in in_redis:
                del believed[key]
        unknown = [Lease(s, rid, "") for s, rid in in_redis if (s, rid) not in believed]
        if unknown:
            assert store.release(node, unknown) == len(unknown)
            assert self.model.give_back(node, [(x.shard, x.rid) for x in unknown]) == len(unknown)
        children = [c for b in result.unsent for c in b.children]
        acks = [a for b in result.unsent for a in b.acks]
        dead = [d for b in result.unsent for d in b.dead]
        if children or acks or dead:
            self._sync(node, children=children, acks=acks, dead=dead, again=True)

    # -- rules ------------------------------------------------------------------------------

    def _running(self) -> list[str]:
        return [n for n in NODES if self.running[n]]

    def _holding(self) -> list[str]:
        return [n for n in NODES if self.running[n] and self.believed[n]]

    @precondition(lambda self: bool(self._running()))
    @rule(
        data=st.data(),
        picks=st.lists(
            st.tuples(
                st.sampled_from(URLS),
                st.sampled_from(PRIORITIES),
                st.sampled_from((False, False, False, True)),  # dont_filter
            ),
            min_size=1,
            max_size=4,
            unique_by=lambda t: t[0],
        ),
        lease=st.sampled_from((0, 0, 2)),
    )
    def push(self, data: st.DataObject, picks: list[tuple[str, int, bool]], lease: int) -> None:
        node = data.draw(st.sampled_from(self._running()))
        children = [
            Child(_fp(url), prio, dont, 0, _site(url), _payload(url)) for url, prio, dont in picks
        ]
        self._sync(node, children=children, lease=lease)

    @precondition(lambda self: bool(self._running()))
    @rule(data=st.data(), n=st.integers(1, 6))
    def lease(self, data: st.DataObject, n: int) -> None:
        self._sync(data.draw(st.sampled_from(self._running())), lease=n)

    # which leases a node holds depends on the store's choices (which shards it leased
    # from), so leases are picked by an index drawn independently of them: an example
    # replays the same draws whatever the store chose

    @precondition(lambda self: bool(self._running()))
    @rule(data=st.data(), picks=st.lists(st.integers(0, 63), min_size=1, max_size=3))
    def ack(self, data: st.DataObject, picks: list[int]) -> None:
        node = self._holder(data)
        if node is None:
            return
        keys = sorted(self.believed[node])
        chosen = sorted({keys[i % len(keys)] for i in picks})
        acks = [self.believed[node].pop(k) for k in chosen]
        self._sync(node, acks=acks)

    def _holder(self, data: st.DataObject) -> str | None:
        """A running node holding leases (the one drawn, else the first), or None."""
        node = data.draw(st.sampled_from(NODES))
        if self.running[node] and self.believed[node]:
            return node
        holding = self._holding()
        return holding[0] if holding else None

    def _one_lease(self, data: st.DataObject) -> tuple[str, Lease, str] | None:
        node = self._holder(data)
        pick = data.draw(st.integers(0, 63))
        if node is None:
            return None
        keys = sorted(self.believed[node])
        key = keys[pick % len(keys)]
        lease = self.believed[node].pop(key)
        return node, lease, self.rid_urls[key]

    @precondition(lambda self: bool(self._running()))
    @rule(data=st.data())
    def fail(self, data: st.DataObject) -> None:
        """The request failed for good: a dead letter ends its lease, with its ack."""
        picked = self._one_lease(data)
        if picked is None:
            return
        node, lease, url = picked
        self.dead_ids += 1
        record = json.dumps({"url": url, "reason": "model"})
        letter = DeadLetter(f"d{self.dead_ids}", record, _site(url), lease)
        self._sync(node, dead=[letter], acks=[lease])

    @precondition(lambda self: bool(self._running()))
    @rule(data=st.data())
    def park(self, data: st.DataObject) -> None:
        """A retry: parked until its backoff is over (past the example's end), with the ack."""
        picked = self._one_lease(data)
        if picked is None:
            return
        node, lease, url = picked
        prio = self.model.leases[node].get((lease.shard, lease.rid))
        priority = prio.priority if prio else 0
        retry = Child(_fp(url), priority, True, PARK_MS, _site(url), _payload(url))
        self._sync(node, children=[retry], acks=[lease])

    @precondition(lambda self: bool(self._running()))
    @rule(data=st.data())
    def release_one(self, data: st.DataObject) -> None:
        """A lease handed back (a grant the node could not use)."""
        picked = self._one_lease(data)
        if picked is None:
            return
        node, lease, _ = picked
        moved = self.stores[node].release(node, [lease])
        assert moved == self.model.give_back(node, [(lease.shard, lease.rid)])

    @precondition(lambda self: bool(self._running()))
    @rule(data=st.data())
    def heartbeat(self, data: st.DataObject) -> None:
        node = data.draw(st.sampled_from(self._running()))
        store = self.stores[node]
        store.heartbeat(node, "{}")
        self.model.members.add(node)
        assert store.live_nodes == max(1, len(self.model.members))

    @precondition(lambda self: bool(self._running()))
    @rule(data=st.data())
    def stop(self, data: st.DataObject) -> None:
        """A clean stop: every lease back to the queue, the node leaves."""
        self.stop_node(data.draw(st.sampled_from(self._running())))

    def stop_node(self, node: str) -> None:
        moved = self.stores[node].release(node)
        assert moved == self.model.give_back(node)
        self.model.members.discard(node)
        for s in range(SHARDS):
            self.model.marks.pop((node, s), None)
        self.running[node] = False

    @precondition(lambda self: bool(self._running()))
    @rule(data=st.data())
    def crash(self, data: st.DataObject) -> None:
        """The node's process dies (kill -9): Redis keeps what it held."""
        node = data.draw(st.sampled_from(self._running()))
        self.running[node] = False
        self.believed[node] = {}

    @precondition(lambda self: any(not self.running[n] for n in NODES))
    @rule(data=st.data())
    def start(self, data: st.DataObject) -> None:
        self._start(data.draw(st.sampled_from([n for n in NODES if not self.running[n]])))

    @precondition(lambda self: len(self.model.members) >= 2 and bool(self._running()))
    @rule(data=st.data())
    def recover(self, data: st.DataObject) -> None:
        """A member falls silent (its heartbeat long past); a running node recovers it."""
        rescuer = data.draw(st.sampled_from(self._running()))
        victim = data.draw(st.sampled_from(sorted(self.model.members - {rescuer})))
        # silence counts from the server's start: none while it has been up for less than
        # the timeout (one second)
        while int(self.admin.info("server")["uptime_in_seconds"]) < 1:
            time.sleep(0.05)
        # the others' beats an hour ahead: however long this process waits before the
        # recovery runs (a loaded machine), they are not silent
        ahead_ms = int(self.admin.time()[0]) * 1000 + 3_600_000
        others = {m: ahead_ms for m in self.model.members if m != victim}
        self.admin.zadd(self.keys.nodes, {**others, victim: 1})
        names, count = self.stores[rescuer].recover(rescuer, RECOVER_TIMEOUT_MS)
        assert (names, count) == ([victim], self.model.give_back(victim))
        self.model.members.discard(victim)
        tombstone = self.admin.hget(self.keys.shard(0).marks, victim)
        assert tombstone is not None and _is_tombstone(tombstone.decode())
        for s in range(SHARDS):
            self.model.marks[(victim, s)] = tombstone.decode()

    @rule()
    def take_snapshot(self) -> None:
        """A replica's copy of the data, for a later rewind."""
        dump = []
        for key in self.admin.scan_iter(count=1000):
            ttl = int(self.admin.pttl(key))
            value = self.admin.dump(key)
            if value is not None:
                dump.append((key, max(0, ttl), value))
        self.snapshot = (dump, self.model.copy())

    @precondition(lambda self: self.snapshot is not None)
    @rule()
    def rewind(self) -> None:
        """Redis comes back with the snapshot's data (a failover to a lagging replica)."""
        assert self.snapshot is not None
        dump, model = self.snapshot
        self.admin.flushall()
        for key, ttl, value in dump:
            self.admin.restore(key, ttl, value, replace=True)
        self.model = model.copy()

    @rule()
    def restart_redis(self) -> None:
        """Redis restarts on its data (its append-only file)."""
        self.server.restart()
        for c in (*self.clients.values(), self.admin):
            c.connection_pool.disconnect()

    # -- after every step -------------------------------------------------------------------

    @invariant()
    def frontier_matches_the_model(self) -> None:
        model, r = self.model, self.admin
        for s, shard in enumerate(self.keys.all_shards()):
            urls = []
            for level, score in r.zrange(shard.levels, 0, -1, withscores=True):
                entries = r.lrange(shard.queue(level.decode()), 0, -1)
                assert level_of(score) == (int(level), len(entries)), ("level", s, level)
                for entry in entries:
                    rid, tab, value = entry.partition(b"\t")
                    if not tab:
                        value = r.hget(shard.requests, rid) or b""
                    urls.append(json.loads(split_value(value)[1])["u"])
            assert urls == [e.url for e in model.in_order(s)], ("queue", s)
            lists = {k.decode() for k in r.scan_iter(match=shard.queue("*"), count=1000)}
            counted = {shard.queue(level.decode()) for level in r.zrange(shard.levels, 0, -1)}
            assert lists == counted, ("no list outside the levels", s, lists, counted)
            assert int(r.zcard(shard.delayed)) == len(model.parked[s]), ("parked", s)
            assert {k.decode() for k in r.hkeys(shard.dead)} == model.dead[s], ("dead", s)
            marks = {k.decode(): v.decode() for k, v in r.hgetall(shard.marks).items()}
            assert marks == {n: m for (n, t), m in model.marks.items() if t == s}, ("marks", s)
            for node in NODES:
                held = {k.decode() for k in r.hkeys(shard.held(node))}
                assert held == {rid for t, rid in model.leases[node] if t == s}, ("held", node)
        members = {m.decode() for m in r.zrange(self.keys.nodes, 0, -1)}
        assert members == model.members
        queued = sum(len(q) for q in model.queue.values())
        parked = sum(len(p) for p in model.parked.values())
        leased = sum(len(x) for x in model.leases.values())
        store = FrontierStore(r, self.keys)
        counts = {n: len(x) for n, x in model.leases.items() if x}
        got = store.drained()
        assert got == [queued, parked, leased, 0, 0], (got, counts, sorted(model.members))
        assert store.seen() == len(model.seen)


def run_model(server: RedisServer, *, examples: int, steps: int, shrink: bool = True) -> None:
    """Run the state machine on ``server`` for ``examples`` examples of up to ``steps`` steps
    (raises what Hypothesis found, shrunk to its shortest form)."""

    class Machine(FrontierMachine):
        pass

    Machine.server = server
    options = settings(
        max_examples=examples,
        stateful_step_count=steps,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        database=None,
        phases=list(Phase) if shrink else [Phase.explicit, Phase.generate],
    )
    run_state_machine_as_test(Machine, settings=options)
