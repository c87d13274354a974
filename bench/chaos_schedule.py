"""Chaos search: fault schedules drawn from a seed.

A schedule is a short crawl (2-3 nodes, 100-200 products) and 1-4 events, each drawn from the
schedule's own ``random.Random(seed)``: the same seed gives the same schedule (what ``--replay
SEED`` runs again). An event fires at a moment of the crawl (seconds after the start, for the
first seconds of the nodes, or a share of the pages fetched) and does one of the faults below.

Besides those, each schedule refuses the writes of every command with one class of error
reply for a while mid-crawl, its seed's class (:func:`focus_class`): a search's seeds take the
classes in turn (:func:`schedule_seeds`), so that every class meets a crawl that writes in
every run of 13 schedules, whatever the draws.

The faults:

- a fault of the Redis proxy between the nodes and Redis: error replies of one class or a few
  (all commands each class refuses, or one frontier command), replies dropped or cut after the
  command ran, replies delayed, one reply stalled, the whole proxy stalled, every connection
  closed (and, for a while, refused);
- a node signalled: SIGTERM (a graceful stop), SIGKILL, SIGSTOP for a while then SIGCONT
  (shorter than half the heartbeat timeout, or longer than the timeout); a stopped or killed
  node is replaced (a killed one sometimes by a process under its own id);
- Redis restarted (SIGTERM: with its data), crashed (SIGKILL: its append-only file's last
  second may be lost), wiped (restarted empty) or flushed (``FLUSHALL``);
- MongoDB stopped (SIGKILL, started again after a while), or slow (frozen for most of a
  while); after it comes back a node may be signalled while it replays its journal.
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass, field
from typing import Any

from distcrawl.servers.faultproxy import ERRORS, Fault

#: DISTCRAWL_HEARTBEAT_TIMEOUT of the search's nodes (s): room for a loaded 2-core machine
HEARTBEAT_TIMEOUT = 5.0
#: DISTCRAWL_HEARTBEAT_INTERVAL of the search's nodes (s)
HEARTBEAT_INTERVAL = 0.5
#: frontier commands a proxy fault may single out (FCALL of the library's function)
FRONTIER_COMMANDS = ("sync", "heartbeat", "release", "recover", "claim", "take_seeds", "staged")
#: event kinds and their weights in a draw
EVENT_WEIGHTS: dict[str, int] = {
    # twelve classes of error replies: the largest space of faults, drawn most often
    "proxy-error": 14,
    "proxy-drop": 3,
    "proxy-cut": 2,
    "proxy-delay": 2,
    "proxy-stall-reply": 1,
    "proxy-stall": 2,
    "proxy-disconnect": 2,
    "node-term": 4,
    "node-kill": 3,
    "node-freeze": 3,
    "redis-restart": 2,
    "redis-crash": 2,
    "redis-wipe": 1,
    "redis-flush": 1,
    "mongo-down": 2,
    "mongo-slow": 1,
}
#: events that make Redis unavailable to the nodes while they last
REDIS_EVENTS = frozenset(k for k in EVENT_WEIGHTS if k.startswith(("proxy-", "redis-")))
#: events that wipe the crawl's state in Redis
WIPE_EVENTS = frozenset({"redis-wipe", "redis-flush"})


@dataclass
class Event:
    """One event of a schedule (see the module's docstring)."""

    kind: str
    #: when: seconds after the crawl's start, or the share of the pages fetched
    at_s: float | None = None
    at_progress: float | None = None
    #: how long it lasts (0: at once)
    seconds: float = 0.0
    #: the proxy fault's fields (kind, error, match, seconds, count, probability)
    fault: dict[str, Any] | None = None
    #: which node: an index into the live nodes at the moment (modulo their number)
    node: int = 0
    #: node-kill: the replacement runs under the killed node's id
    same_id: bool = False
    #: mongo-down: a node signalled (SIGTERM or SIGKILL) this long after MongoDB is back, while
    #: it replays its journal (None: none)
    replay_signal: str | None = None
    replay_after: float = 0.0

    def make_fault(self) -> Fault:
        assert self.fault is not None
        spec = dict(self.fault)
        spec["match"] = tuple(spec.get("match") or ())
        return Fault(**spec)

    def when(self) -> str:
        if self.at_s is not None:
            return f"at {self.at_s:.1f}s"
        return f"at {self.at_progress:.0%} of the pages"

    def describe(self) -> str:
        what = self.kind
        if self.fault is not None:
            what += f" [{self.make_fault().describe()}]"
        if self.kind.startswith("node-"):
            what += f" node#{self.node}"
        if self.kind == "node-kill" and self.same_id:
            what += " (restarted under its id)"
        if self.seconds:
            what += f" for {self.seconds:.1f}s"
        if self.replay_signal:
            what += f", then {self.replay_signal} a node {self.replay_after:.1f}s after it is back"
        return f"{self.when()}: {what}"


@dataclass
class Schedule:
    """A short crawl and its events."""

    seed: int
    nodes: int
    products: int
    latency_ms: float
    #: the seed URL is pushed before the nodes start (else a moment after)
    seed_first: bool
    events: list[Event] = field(default_factory=list)

    @classmethod
    def draw(cls, seed: int) -> Schedule:
        rng = random.Random(seed)
        schedule = cls(
            seed=seed,
            nodes=rng.choice((2, 2, 3)),
            products=rng.randint(100, 200),
            latency_ms=float(rng.choice((80, 120, 160, 200))),
            seed_first=rng.random() < 0.7,
        )
        kinds = list(EVENT_WEIGHTS)
        weights = [EVENT_WEIGHTS[k] for k in kinds]
        count = rng.choice((0, 1, 1, 2, 3))
        drawn = rng.choices(kinds, weights, k=count)
        # at most one event that wipes the crawl: after it, the crawl is over
        wipes = [k for k in drawn if k in WIPE_EVENTS]
        drawn = [k for k in drawn if k not in WIPE_EVENTS] + wipes[:1]
        schedule.events = [_focus_event(rng, seed), *(_draw_event(rng, kind) for kind in drawn)]
        return schedule

    @property
    def wiped(self) -> bool:
        return any(e.kind in WIPE_EVENTS for e in self.events)

    def describe(self) -> str:
        head = (
            f"schedule {self.seed}: {self.nodes} nodes, {self.products} products, shop "
            f"{self.latency_ms:g} ms, seed pushed {'first' if self.seed_first else 'after'}"
        )
        return "\n".join([head, *(f"  {e.describe()}" for e in self.events)])

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _moment(rng: random.Random, event: Event, early: float = 0.3) -> None:
    """When the event fires: in the first seconds (share ``early``), else mid-crawl."""
    if rng.random() < early:
        event.at_s = round(rng.uniform(0.0, 4.0), 2)
    else:
        event.at_progress = round(rng.uniform(0.05, 0.9), 3)


def _duration(rng: random.Random, short: tuple[float, float], long: tuple[float, float]) -> float:
    return round(rng.uniform(*(short if rng.random() < 0.5 else long)), 2)


def _match(rng: random.Random, share: float) -> list[str]:
    """A frontier command to single out (with chance ``share``), else none: the class's scope."""
    if rng.random() >= share:
        return []
    return [f"FCALL distcrawl_*_{rng.choice(FRONTIER_COMMANDS)}"]


#: events that may lose the seed list before a node took the seed (a crash loses the last
#: second of writes): a crawl that never began is lost with it, and its nodes wait for a seed
#: as they should; these come once the crawl has begun
LATE_EVENTS = frozenset({"redis-crash", "redis-wipe", "redis-flush"})


#: an outage's length: short, or about the heartbeat timeout
OUTAGE = (0.3, 2.0), (HEARTBEAT_TIMEOUT - 2.0, HEARTBEAT_TIMEOUT + 3.0)


def _focus_event(rng: random.Random, seed: int) -> Event:
    """Every command's writes refused with the seed's class of error reply, mid-crawl."""
    event = Event("proxy-error", at_progress=round(rng.uniform(0.1, 0.8), 3))
    event.seconds = _duration(rng, *OUTAGE)
    event.fault = {
        "kind": "error",
        "error": focus_class(seed),
        "match": [],
        "probability": rng.choice((1.0, 0.5)),
    }
    return event


def _draw_event(rng: random.Random, kind: str) -> Event:
    event = Event(kind)
    early = 0.0 if kind in LATE_EVENTS else 0.4 if kind.startswith("node-") else 0.2
    _moment(rng, event, early=early)
    outage = OUTAGE
    if kind == "proxy-error":
        event.seconds = _duration(rng, *outage)
        event.fault = {
            "kind": "error",
            # one class, or a few at once (each command refused gets one of them)
            "error": ",".join(rng.sample(sorted(ERRORS), rng.choice((1, 2, 3, 4)))),
            "match": _match(rng, 0.3),
            "probability": rng.choice((1.0, 1.0, 0.5, 0.2)),
        }
    elif kind in ("proxy-drop", "proxy-cut"):
        event.fault = {"kind": kind.split("-")[1], "match": _match(rng, 0.6)}
        if rng.random() < 0.5:
            event.fault["count"] = rng.randint(1, 3)
            event.seconds = 30.0  # until it is spent, at most this long
        else:
            event.fault["probability"] = rng.choice((0.05, 0.1, 0.3))
            event.seconds = _duration(rng, (0.5, 2.0), (2.0, 6.0))
    elif kind == "proxy-delay":
        event.seconds = _duration(rng, (0.5, 2.0), (2.0, 6.0))
        event.fault = {
            "kind": "delay",
            "seconds": rng.choice((0.02, 0.1, 0.5, 1.5)),
            "probability": rng.choice((1.0, 0.3)),
        }
    elif kind == "proxy-stall-reply":
        # one reply held for less than half the heartbeat timeout (longer is a node cut off
        # from Redis, which its peers may rightly take for dead)
        event.fault = {
            "kind": "stall",
            "match": _match(rng, 0.7),
            "seconds": round(rng.uniform(0.3, HEARTBEAT_TIMEOUT / 2), 2),
            "count": 1,
        }
        event.seconds = 30.0
    elif kind == "proxy-stall":
        event.seconds = _duration(rng, *outage)
    elif kind == "proxy-disconnect":
        event.seconds = rng.choice((0.0, 0.0, round(rng.uniform(0.5, 6.0), 2)))  # refused
    elif kind == "node-kill":
        event.node = rng.randrange(3)
        event.same_id = rng.random() < 0.3
    elif kind == "node-term":
        event.node = rng.randrange(3)
    elif kind == "node-freeze":
        event.node = rng.randrange(3)
        event.seconds = _duration(
            rng,
            (0.3, HEARTBEAT_TIMEOUT / 2),
            (HEARTBEAT_TIMEOUT + 1.0, HEARTBEAT_TIMEOUT + 4.0),
        )
    elif kind in ("redis-restart", "redis-crash"):
        event.seconds = _duration(rng, (0.1, 1.0), (1.0, 6.0))
    elif kind == "redis-wipe":
        event.seconds = round(rng.uniform(0.1, 2.0), 2)
    elif kind == "mongo-down":
        event.seconds = _duration(rng, (1.0, 3.0), (3.0, 8.0))
        if rng.random() < 0.5:
            event.replay_signal = rng.choice(("SIGTERM", "SIGKILL"))
            event.replay_after = round(rng.uniform(0.0, 1.5), 2)
            event.node = rng.randrange(3)
    elif kind == "mongo-slow":
        event.seconds = _duration(rng, (1.0, 3.0), (3.0, 8.0))
    return event


#: the classes of error replies, in the order a search's schedules take them
ERROR_CLASSES = tuple(sorted(ERRORS))


def focus_class(seed: int) -> str:
    """The class of error reply the schedule of ``seed`` refuses writes with, mid-crawl."""
    return ERROR_CLASSES[seed % len(ERROR_CLASSES)]


def schedule_seeds(seed: int, count: int) -> list[int]:
    """The seeds of the ``count`` schedules of a search from ``seed``: random, and the i-th
    one's class (:func:`focus_class`) the i-th of :data:`ERROR_CLASSES`, round and round."""
    rng = random.Random(seed)
    n = len(ERROR_CLASSES)
    return [rng.randrange((1 << 31) // n) * n + i % n for i in range(count)]
