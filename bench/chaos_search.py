"""Chaos search: one schedule (:mod:`chaos_schedule`) run as a crawl, its events fired as they
fall due, then the operator's steps and the checks (:mod:`chaos_invariants`).

The nodes reach Redis through a :class:`~distcrawl.servers.faultproxy.FaultProxy`; the bench
itself reads and writes Redis directly. Each schedule has a fresh Redis, a fresh shop and a
database of its own on a MongoDB server the search shares (restarted from time to time).
A run never takes the search down: a run over its time is reported ``hung``, an error of the
harness is reported as such, and both go on to the next schedule.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis

from distcrawl.frontier.store import FrontierStore
from distcrawl.servers.faultproxy import FaultProxy
from distcrawl.servers.process import MongoServer, RedisServer

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _processes import Node, ShopProcess, expected_pages, page_fetches
from _settings import START_URLS_KEY
from chaos_checks import KEYS
from chaos_schedule import HEARTBEAT_INTERVAL, HEARTBEAT_TIMEOUT, Event, Schedule

#: seconds a schedule may take before it is reported hung (and its nodes killed)
DEFAULT_TIMEOUT = 180.0
#: seconds between two looks at the shop's log and the nodes
POLL = 0.1
#: settings of every node of the search (on top of the project's)
SEARCH_SETTINGS: dict[str, str] = {
    "LOG_LEVEL": "INFO",
    "DISTCRAWL_EMBEDDED": "False",
    "TELNETCONSOLE_ENABLED": "False",
    "CONCURRENT_REQUESTS": "8",
    "CONCURRENT_REQUESTS_PER_DOMAIN": "8",
    "DISTCRAWL_CLOSE_WHEN_DRAINED": "1",
    "DISTCRAWL_DRAIN_GRACE": "1.5",
    "DISTCRAWL_HEARTBEAT_INTERVAL": str(HEARTBEAT_INTERVAL),
    "DISTCRAWL_HEARTBEAT_TIMEOUT": str(HEARTBEAT_TIMEOUT),
    # MongoDB outages of seconds: products go to the journal soon, and a node stopped while
    # its journal waits for MongoDB gives up (exit status 3) soon
    "MONGO_JOURNAL_AFTER": "1",
    "MONGO_JOURNAL_CLOSE_TIMEOUT": "4",
}
#: the seconds after a SIGTERM within which a node must have exited (else it is killed and
#: reported): a graceful stop waits for pages in flight and returns its leases
TERM_GRACE = 60.0


@dataclass
class Member:
    """One node process of a schedule and what happened to it."""

    node: Node
    started_s: float
    signals: list[tuple[float, str]] = field(default_factory=list)
    #: (start, end) of each freeze, seconds since the crawl's start
    frozen: list[tuple[float, float]] = field(default_factory=list)
    #: leases it held in Redis when it was signalled or frozen (the most of them)
    leases_at_fault: int = 0
    exit_s: float | None = None
    exit_code: int | None = None
    #: products in its own journal segments when it exited
    journal_at_exit: int = 0

    @property
    def node_id(self) -> str:
        return self.node.node_id

    @property
    def alive(self) -> bool:
        return self.exit_s is None and self.node.alive


@dataclass
class Fired:
    """An event as it ran: when it started and ended (seconds since the crawl's start)."""

    event: Event
    start_s: float
    end_s: float | None = None
    note: str = ""


class ScheduleRun:
    """One schedule's crawl (see the module's docstring)."""

    def __init__(
        self,
        schedule: Schedule,
        work: Path,
        mongo: MongoServer,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        settings: dict[str, str] | None = None,
        quiet: bool = False,
    ) -> None:
        self.schedule = schedule
        self.work = work
        self.mongo = mongo
        self.timeout = timeout
        self.settings = {**SEARCH_SETTINGS, **(settings or {})}
        self.quiet = quiet
        self.database = f"chaos{schedule.seed}"
        self.members: list[Member] = []
        self.fired: list[Fired] = []
        self.lock = threading.Lock()
        self.t0 = 0.0
        self.hung = False
        self.harness_errors: list[str] = []
        self.wiped_at: float | None = None
        self.operator: list[str] = []
        self.progress = 0.0
        self.log: list[dict[str, Any]] = []
        self._threads: list[threading.Thread] = []
        self._replaced = 0

    # -- the run ---------------------------------------------------------------------------

    def say(self, text: str) -> None:
        if not self.quiet:
            now = time.monotonic() - self.t0 if self.t0 else 0.0
            print(f"  [{now:5.1f}s] {text}", file=sys.stderr, flush=True)

    def now(self) -> float:
        return time.monotonic() - self.t0

    def run(self) -> dict[str, Any]:
        """Run the crawl, the operator's steps and the checks; returns the run's record."""
        from chaos_invariants import check

        started = time.monotonic()
        self.redis = RedisServer(
            data_dir=self.work / "redis" / "data", log_path=self.work / "redis" / "redis.log"
        )
        self.redis.start()
        self.direct = redis.Redis.from_url(self.redis.url, socket_timeout=30)
        self.proxy = FaultProxy(self.redis.url, seed=self.schedule.seed).start()
        if not self.mongo.running:
            self.mongo.start()
        self.mongo_uri = self.mongo.uri_for(self.database)
        self.shop = ShopProcess(
            products=self.schedule.products,
            latency_ms=self.schedule.latency_ms,
            jitter_ms=self.schedule.latency_ms / 2,
        )
        try:
            try:
                self._crawl()
                self._operator_steps()
            except Exception:
                self.harness_errors.append(traceback.format_exc(limit=6))
            self._stop_everything()
            self.log = self.shop.log()
            self.truth = self.shop.truth()
            record = check(self)
            if record["violations"]:
                # the evidence beside the nodes' logs: every request the shop served
                (self.work / "shop-log.json").write_text(json.dumps(self.log))
        finally:
            self._stop_everything()
            self.proxy.stop()
            self.shop.stop()
            self.direct.close()
            self.redis.stop()
            with contextlib.suppress(Exception):
                client = self.mongo.client(serverSelectionTimeoutMS=5000)
                client.drop_database(self.database)
                client.close()
        record["seconds"] = round(time.monotonic() - started, 1)
        return record

    def _settings_env(self) -> dict[str, str]:
        return {
            "REDIS_URL": self.proxy.url,
            "MONGO_URI": self.mongo_uri,
            "DISTCRAWL_HOME": str(self.work / "home"),
        }

    def start_node(self, node_id: str | None = None) -> Member:
        with self.lock:
            n = len(self.members) + 1
            node = Node(
                "catalog",
                node_id=node_id or f"n{n}",
                log_dir=self._log_dir(n),
                settings=self.settings,
                env=self._settings_env(),
            )
            member = Member(node, self.now())
            self.members.append(member)
        self.say(f"started {member.node_id} (pid {node.pid})")
        return member

    def _log_dir(self, n: int) -> Path:
        folder = self.work / f"p{n}"
        folder.mkdir(parents=True, exist_ok=True)
        return folder

    def alive(self) -> list[Member]:
        with self.lock:
            return [m for m in self.members if m.alive]

    def _crawl(self) -> None:
        schedule = self.schedule
        self.total_pages = expected_pages(schedule.products)
        self.t0 = time.monotonic()
        self.wall_t0 = time.time()
        if schedule.seed_first:
            self.direct.lpush(START_URLS_KEY, self.shop.url)
        for _ in range(schedule.nodes):
            self.start_node()
        seeded = schedule.seed_first
        pending = list(schedule.events)
        fetched: set[str] = set()
        last_t = self.wall_t0
        while True:
            if not seeded and self.now() >= 1.0:
                self.direct.lpush(START_URLS_KEY, self.shop.url)
                seeded = True
            new = page_fetches(self.shop.log(since=last_t))
            if new:
                last_t = new[-1]["t"]
                fetched.update(e["path"] for e in new)
            self.progress = len(fetched) / self.total_pages
            for event in list(pending):
                due = (event.at_s is not None and self.now() >= event.at_s) or (
                    event.at_progress is not None and self.progress >= event.at_progress
                )
                if due:
                    pending.remove(event)
                    self._fire(event)
            self._note_exits()
            busy = any(t.is_alive() for t in self._threads)
            if not self.alive() and not busy:
                if pending:
                    self.say(f"crawl over before {len(pending)} event(s): skipped")
                    for event in pending:
                        self.fired.append(Fired(event, self.now(), self.now(), "skipped"))
                break
            if self.now() > self.timeout:
                self.hung = True
                self.say(f"hung: not over after {self.timeout:g}s")
                break
            time.sleep(POLL)

    def _note_exits(self) -> None:
        for member in list(self.members):
            if member.exit_s is None and not member.node.alive:
                member.exit_s = self.now()
                member.exit_code = member.node.proc.returncode
                member.journal_at_exit = self._journal_of(member.node.pid)
                self.say(f"{member.node_id} exited with status {member.exit_code}")

    def _journal_of(self, pid: int) -> int:
        """Products in the journal segments process ``pid`` wrote that are still there."""
        total = 0
        for path in (self.work / "home" / "journal").glob(f"*/*-{pid}-*.jsonl"):
            with contextlib.suppress(OSError):
                lines = path.read_text(errors="replace").splitlines()
                total += sum(1 for line in lines[1:] if line.strip())
        return total

    def _stop_everything(self) -> None:
        for member in self.members:
            with contextlib.suppress(ProcessLookupError):
                os.kill(member.node.pid, signal.SIGCONT)
            if member.node.alive:
                member.signals.append((self.now(), "SIGKILL (harness)"))
                member.node.kill9()
        self._note_exits()
        for thread in self._threads:
            thread.join(60)
        self.proxy.clear()
        if not self.redis.running:
            with contextlib.suppress(Exception):
                self.redis.start()
        if not self.mongo.running:
            with contextlib.suppress(Exception):
                self.mongo.start()

    # -- events ----------------------------------------------------------------------------

    def _fire(self, event: Event) -> None:
        fired = Fired(event, self.now())
        with self.lock:
            self.fired.append(fired)
        self.say(f"{event.describe()}")

        def run() -> None:
            try:
                fired.note = self._do(event) or ""
            except Exception:
                self.harness_errors.append(traceback.format_exc(limit=6))
            fired.end_s = self.now()

        thread = threading.Thread(target=run, daemon=True)
        self._threads.append(thread)
        thread.start()

    def _wait(self, seconds: float) -> None:
        """Sleep ``seconds``, or less when the run is over its time."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and not self.hung:
            time.sleep(min(0.05, max(0.0, deadline - time.monotonic())))

    def _leases(self, node_id: str) -> int:
        try:
            return sum(int(self.direct.hlen(sh.held(node_id))) for sh in KEYS.all_shards())
        except redis.RedisError:
            return 0

    def _pick(self, event: Event) -> Member | None:
        alive = self.alive()
        return alive[event.node % len(alive)] if alive else None

    def _do(self, event: Event) -> str | None:
        kind = event.kind
        if kind in ("proxy-error", "proxy-drop", "proxy-cut", "proxy-delay", "proxy-stall-reply"):
            fault = self.proxy.add(event.make_fault())
            deadline = time.monotonic() + event.seconds
            while time.monotonic() < deadline and not fault.removed and not self.hung:
                if fault.count is not None and fault.count <= 0:
                    break
                if not self.alive():
                    break
                time.sleep(0.05)
            self.proxy.remove(fault)
            return f"{fault.hits} commands picked"
        if kind == "proxy-stall":
            self.proxy.stall()
            self._wait(event.seconds)
            self.proxy.resume()
            return None
        if kind == "proxy-disconnect":
            if event.seconds:
                self.proxy.refuse()
            self.proxy.disconnect()
            self._wait(event.seconds)
            self.proxy.refuse(False)
            return None
        if kind in ("node-term", "node-kill"):
            return self._signal(event, "SIGTERM" if kind == "node-term" else "SIGKILL")
        if kind == "node-freeze":
            return self._freeze(event)
        if kind in ("redis-restart", "redis-crash", "redis-wipe"):
            if kind == "redis-restart":
                self.redis.stop()
            else:
                self.redis.kill()
            if kind == "redis-wipe":
                self.wiped_at = self.now()
                shutil.rmtree(self.redis.data_dir, ignore_errors=True)
            self._wait(event.seconds)
            self.redis.start()
            return None
        if kind == "redis-flush":
            self.wiped_at = self.now()
            self.direct.flushall()
            return None
        if kind == "mongo-down":
            self.mongo.kill()
            self._wait(event.seconds)
            self.mongo.start()
            if event.replay_signal:
                self._wait(event.replay_after)
                return self._signal(event, event.replay_signal)
            return None
        if kind == "mongo-slow":
            pid = self.mongo.pid
            assert pid is not None
            deadline = time.monotonic() + event.seconds
            try:
                while time.monotonic() < deadline and not self.hung:
                    os.kill(pid, signal.SIGSTOP)
                    time.sleep(0.4)
                    os.kill(pid, signal.SIGCONT)
                    time.sleep(0.1)
            finally:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGCONT)
            return None
        raise ValueError(f"unknown event {kind!r}")

    def _signal(self, event: Event, name: str) -> str | None:
        member = self._pick(event)
        if member is None:
            return "no live node"
        leases = self._leases(member.node_id)
        member.leases_at_fault = max(member.leases_at_fault, leases)
        member.signals.append((self.now(), name))
        os.kill(member.node.pid, getattr(signal, name))
        note = f"{name} {member.node_id} holding {leases} leases"
        if name == "SIGKILL":
            member.node.proc.wait()
            self._note_exits()
            replacement = self.start_node(member.node_id if event.same_id else None)
        else:
            replacement = self.start_node()
            # a graceful stop must end: a node still running long after it is killed
            deadline = time.monotonic() + TERM_GRACE
            while member.node.alive and time.monotonic() < deadline:
                time.sleep(0.05)
            if member.node.alive:
                note += f"; still running {TERM_GRACE:g}s after SIGTERM: killed"
                member.signals.append((self.now(), "SIGKILL (harness)"))
                member.node.kill9()
            self._note_exits()
        self._replaced += 1
        return f"{note}; started {replacement.node_id}"

    def _freeze(self, event: Event) -> str | None:
        member = self._pick(event)
        if member is None:
            return "no live node"
        leases = self._leases(member.node_id)
        member.leases_at_fault = max(member.leases_at_fault, leases)
        start = self.now()
        os.kill(member.node.pid, signal.SIGSTOP)
        try:
            self._wait(event.seconds)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(member.node.pid, signal.SIGCONT)
        member.frozen.append((start, self.now()))
        return f"froze {member.node_id} holding {leases} leases"

    # -- the operator's steps ---------------------------------------------------------------

    def drained(self) -> list[int] | None:
        try:
            return list(FrontierStore(self.direct, KEYS).drained())
        except redis.RedisError:
            return None

    def _operator_steps(self) -> None:
        """What the docs tell an operator to do after such a crawl: replay journals nodes
        left, and re-seed a crawl whose state vanished (once the nodes said so)."""
        journal = self.work / "home" / "journal"
        if any(journal.glob("*/*.jsonl")):
            for directory in sorted(p for p in journal.iterdir() if p.is_dir()):
                cli = Path(sys.executable).parent / "distcrawl"
                cmd = [str(cli), "journal", "replay", str(directory), "--mongo-uri"]
                done = subprocess.run(
                    [*cmd, self.mongo_uri], capture_output=True, text=True, timeout=120
                )
                self.operator.append(f"journal replay {directory.name}: exit {done.returncode}")
        if self.wiped_at is not None and not self.hung and self.members:
            from chaos_invariants import vanished_status

            status = vanished_status()
            after = [m for m in self.members if m.exit_s is not None and m.exit_s >= self.wiped_at]
            if status is not None and any(m.exit_code == status for m in after):
                # what the nodes' message says: reset the crawl, seed it again
                cli = Path(sys.executable).parent / "distcrawl"
                reset = [str(cli), "control", "catalog", "reset", "--yes-really"]
                done = subprocess.run(
                    reset,
                    capture_output=True,
                    text=True,
                    timeout=120,
                    env={**os.environ, **self._settings_env(), "REDIS_URL": self.redis.url},
                    cwd=self.work,
                )
                self.operator.append(f"control catalog reset: exit {done.returncode}")
                self.operator.append("re-seeded the vanished crawl and started the nodes again")
                self.reseeded_at = self.now()
                self.direct.lpush(START_URLS_KEY, self.shop.url)
                for _ in range(self.schedule.nodes):
                    self.start_node()
                deadline = time.monotonic() + self.timeout
                while self.alive() and time.monotonic() < deadline:
                    time.sleep(POLL)
                self._note_exits()
                self.hung = bool(self.alive())


# -- the search ----------------------------------------------------------------------------

#: schedules between two fresh MongoDB servers (SecantusDB slows as it serves writes)
MONGO_FRESH_EVERY = 20


def search(args: Any) -> int:
    """``--search N`` / ``--replay SEED``: run the schedules, print and return the report."""
    import random
    import tempfile
    from collections import Counter

    from _accounting import load_average
    from _results import write_result
    from chaos_invariants import INVARIANTS
    from chaos_schedule import schedule_seeds

    if args.replay is not None:
        seed, seeds = None, [args.replay]
    else:
        seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 30)
        seeds = schedule_seeds(seed, args.search)
    root = Path(tempfile.mkdtemp(prefix="distcrawl-chaos-search-"))
    load_before = load_average()
    started = time.monotonic()
    records: list[dict[str, Any]] = []
    mongo: MongoServer | None = None
    kept: list[str] = []

    def report_of(complete: bool) -> dict[str, Any]:
        violations = [{**v, "schedule": r["schedule"]} for r in records for v in r["violations"]]
        by_invariant = Counter(v["invariant"] for v in violations)
        runs = records
        events = Counter(e["kind"] for r in runs for e in r["events"] if e["note"] != "skipped")
        return {
            "schedules": len(records),
            "schedules_asked": len(seeds),
            "complete": complete,
            "until_violation": bool(getattr(args, "until_violation", False)),
            "seed": seed,
            "replay": args.replay,
            "planted_bug": plant,
            "violations": violations,
            "violations_by_invariant": {k: by_invariant.get(k, 0) for k in INVARIANTS},
            "schedules_with_violations": sum(1 for r in records if r["violations"]),
            "events_fired": dict(sorted(events.items())),
            "events_skipped": sum(1 for r in runs for e in r["events"] if e["note"] == "skipped"),
            "seconds": round(time.monotonic() - started, 1),
            "seconds_per_schedule": [r["seconds"] for r in records],
            "runs": [{k: v for k, v in r.items() if k not in ("schedule",)} for r in records],
            # the folders' names: their paths (this machine's) go to stderr and --json only
            "kept_logs": [Path(k).name for k in kept],
            "machine": {"load_before": load_before, "load_after": load_average()},
        }

    plant = getattr(args, "plant_bug", None)
    planted = f" --plant-bug {plant}" if plant else ""
    try:
        for i, schedule_seed in enumerate(seeds):
            if mongo is None or i % MONGO_FRESH_EVERY == 0:
                if mongo is not None:
                    mongo.stop()
                home = root / f"mongo{i}"
                mongo = MongoServer(data_dir=home / "data", log_path=home / "mongo.log").start()
            schedule = Schedule.draw(schedule_seed)
            print(f"[{i + 1}/{len(seeds)}] {schedule.describe()}", file=sys.stderr, flush=True)
            work = root / f"s{schedule_seed}"
            record = ScheduleRun(
                schedule,
                work,
                mongo,
                timeout=args.schedule_timeout,
                quiet=args.quiet,
            ).run()
            for v in record["violations"]:
                print(
                    f"VIOLATION seed {v['seed']}: {v['invariant']}: {v['seen']}\n"
                    f"  replay: .venv/bin/python bench/chaos.py --replay {v['seed']}{planted}",
                    file=sys.stderr,
                    flush=True,
                )
            if record["violations"] or args.keep:
                kept.append(str(work))
            else:
                shutil.rmtree(work, ignore_errors=True)
            records.append(record)
            if len(seeds) > 1:
                # a search stopped early leaves what it ran, with its real count
                write_result(report_of(complete=False))
            if record["violations"] and getattr(args, "until_violation", False):
                break
    finally:
        if mongo is not None:
            mongo.stop()
        shutil.rmtree(root / "mongo0", ignore_errors=True)
        for path in root.glob("mongo*"):
            shutil.rmtree(path, ignore_errors=True)
        if not kept:
            shutil.rmtree(root, ignore_errors=True)
    report = report_of(complete=True)
    violations = report["violations"]
    write_result(report)
    if kept:
        print(f"logs kept in {root}: {', '.join(report['kept_logs'])}", file=sys.stderr)
    if args.json:
        print(json.dumps({**report, "kept_logs": kept}))
    else:
        print(
            f"{report['schedules']} schedules, {len(violations)} violations "
            f"{report['violations_by_invariant']}, {report['seconds']:.0f}s"
        )
    return 1 if violations else 0
