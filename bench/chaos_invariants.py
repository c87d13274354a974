"""Chaos search: the promises a finished schedule is checked against.

- ``stored_once``: no product is stored twice (by its identity in the shop, not its URL);
- ``nothing_lost``: every product the shop offers is in MongoDB once the operator replayed the
  journals the nodes left, and the frontier holds nothing (queue, leases, seeds);
- ``no_live_recovered``: no node is recovered as dead unless it was killed, frozen longer than
  the heartbeat timeout, or left its leases behind (an exit status that says so);
- ``refetch_bounded``: pages fetched twice are no more than the leases held by the nodes that
  were killed, stopped or frozen longer than the heartbeat timeout, plus the pages fetched in
  the seconds before a Redis crash (the acks an append-only file may lose);
- ``log_lines_bounded``: each node logs at most :data:`LOG_BASE` records plus
  :data:`LOG_PER_EVENT` per event;
- ``no_tracebacks``: no node logs a traceback (an expected fault deserves a line, not a stack;
  an error reply of a class nobody knows may show one);
- ``exit_status``: each node exits with the status the docs give for what happened: 0 for a
  clean stop or a drained crawl (or the signal's own status for a SIGTERM that came before
  Scrapy started the node's log: Python was still importing, nothing was reached); 3 when
  products still wait in its journal (never 0 then); 4 only when Redis was away as it
  stopped; the status of a vanished crawl after a wipe; never 1, 2 or 5 here;
- ``wiped_reported``: a crawl whose Redis was wiped or flushed is reported (the nodes exit with
  the vanished crawl's status), never crawled again in silence;
- ``hung``: the schedule ended within its time; ``harness``: the bench itself failed.
"""

from __future__ import annotations

import re
import signal
import sys
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _processes import page_fetches
from chaos_checks import RECOVERED_LINE, frontier_left, product_check, recovered_names
from chaos_schedule import HEARTBEAT_TIMEOUT, REDIS_EVENTS

from distcrawl.base.names import exits
from distcrawl.servers.faultproxy import ERRORS

if TYPE_CHECKING:
    from chaos_search import Member, ScheduleRun

#: the invariants, in the order they are reported
INVARIANTS = (
    "stored_once",
    "nothing_lost",
    "no_live_recovered",
    "refetch_bounded",
    "log_lines_bounded",
    "no_tracebacks",
    "exit_status",
    "wiped_reported",
    "hung",
    "harness",
)
#: log records a node may write in a schedule without faults (start-up, progress, close)
LOG_BASE = 150
#: and for each event of its schedule
LOG_PER_EVENT = 40
#: the error reply of a class no client knows (the proxy's UNKNOWN)
UNKNOWN_ERROR = ERRORS["UNKNOWN"][0].split(" ", 1)[0]
#: a node's log line when it took back the leases of an earlier run under its id
RETURNED_LINE = re.compile(r"Returned (\d+) requests leased by an earlier run of node (\S+)")
#: a log record's first line (Scrapy's default format)
_RECORD = re.compile(rb"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", re.MULTILINE)
#: seconds before a Redis crash whose acks its append-only file may not hold
CRASH_WINDOW = 2.5
#: a freeze this much shorter than the heartbeat timeout may still pass for a death (the
#: node beat up to an interval before it, and beats again a moment after)
FREEZE_MARGIN = 1.0
#: statuses the docs give (distcrawl.commands.crawl) that a search's node may exit with
_CLEAN, _JOURNAL, _LEASES = 0, exits.JOURNAL_HELD, exits.LEASES_HELD


def vanished_status() -> int | None:
    """The exit status of a node whose crawl's state vanished, as ``scrapy crawl`` defines it
    (:data:`distcrawl.base.names.exits.STATE_LOST`), or None where it defines none."""
    found = getattr(exits, "STATE_LOST", None)
    return found if isinstance(found, int) else None


def _violation(run: ScheduleRun, invariant: str, seen: str) -> dict[str, Any]:
    return {"seed": run.schedule.seed, "invariant": invariant, "seen": seen}


def _log_text(member: Member) -> str:
    return member.node.log()


def _killed(member: Member) -> bool:
    return any(name.startswith("SIGKILL") for _, name in member.signals)


def _terminated(member: Member) -> bool:
    return any(name == "SIGTERM" for _, name in member.signals)


def _frozen_long(member: Member) -> bool:
    return any(end - start > HEARTBEAT_TIMEOUT - FREEZE_MARGIN for start, end in member.frozen)


def _redis_away(run: ScheduleRun, start: float, end: float) -> bool:
    """Whether an event that makes Redis unavailable overlapped ``[start, end]``."""
    for fired in run.fired:
        if fired.event.kind not in REDIS_EVENTS or fired.note == "skipped":
            continue
        stop = fired.end_s if fired.end_s is not None else end
        if fired.start_s <= end and stop >= start:
            return True
    return False


def check(run: ScheduleRun) -> dict[str, Any]:
    """Check a finished run; its record (what happened, what was seen, the violations)."""
    violations: list[dict[str, Any]] = []
    record: dict[str, Any] = {"seed": run.schedule.seed, "schedule": run.schedule.describe()}
    fired_kinds = [f.event.kind for f in run.fired if f.note != "skipped"]
    record["events"] = [
        {"kind": f.event.kind, "start_s": round(f.start_s, 2), "note": f.note} for f in run.fired
    ]
    record["nodes"] = [
        {
            "node": m.node_id,
            "pid": m.node.pid,
            "exit": m.exit_code,
            "signals": [f"{name}@{t:.1f}s" for t, name in m.signals],
            "frozen": [f"{a:.1f}-{b:.1f}s" for a, b in m.frozen],
            "journal_at_exit": m.journal_at_exit,
        }
        for m in run.members
    ]
    if run.operator:
        record["operator"] = run.operator
    if run.hung:
        alive = [m.node_id for m in run.members if m.exit_code is None or m.exit_code == -9]
        violations.append(_violation(run, "hung", f"not over after {run.timeout:g}s ({alive})"))
    for error in run.harness_errors:
        violations.append(_violation(run, "harness", error.strip().splitlines()[-1]))

    # -- products and the frontier ------------------------------------------------------------
    products = product_check(run.mongo_uri, run.database, run.truth)
    left = frontier_left(run.direct) if run.redis.running else {}
    record.update(
        {k: products[k] for k in ("expected", "stored", "lost", "duplicates", "lost_sample")}
    )
    record["frontier_left"] = {
        k: left.get(k) for k in ("inflight_left", "queued_left", "seeding_left")
    }
    if products["duplicates"]:
        violations.append(
            _violation(run, "stored_once", f"{products['duplicates']} products stored twice")
        )
    wiped = run.wiped_at is not None
    reseeded = getattr(run, "reseeded_at", None) is not None
    if not run.hung and (not wiped or reseeded):
        problems = []
        if products["lost"]:
            problems.append(f"{products['lost']} of {products['expected']} products lost")
        for key in ("inflight_left", "queued_left", "seeding_left"):
            if left.get(key):
                problems.append(f"{key} {left[key]}")
        if problems:
            violations.append(_violation(run, "nothing_lost", "; ".join(problems)))

    # -- recoveries -------------------------------------------------------------------------
    may_die = {
        m.node_id
        for m in run.members
        if _killed(m) or _frozen_long(m) or m.exit_code not in (None, _CLEAN, _JOURNAL)
    }
    recovered: set[str] = set()
    for member in run.members:
        names, _ = recovered_names(_log_text(member))
        recovered |= names
    live = sorted(recovered - may_die)
    record["recovered"] = sorted(recovered)
    if live:
        violations.append(_violation(run, "no_live_recovered", f"recovered live node(s) {live}"))

    # -- pages fetched twice ----------------------------------------------------------------
    log = page_fetches(run.log)
    start = run.wall_t0
    until = None
    if wiped:
        until = start + run.wiped_at
    fetches = [e for e in log if e["t"] >= start and (until is None or e["t"] < until)]
    twice = sum(1 for c in Counter(e["path"] for e in fetches).values() if c > 1)
    # what each node held when it was signalled or frozen, or (when Redis could not say so
    # then) what other nodes recovered of it, or a later run of it returned
    taken_back: Counter[str] = Counter()
    for member in run.members:
        text = _log_text(member)
        for match in RECOVERED_LINE.finditer(text):
            for name in match[2].split(","):
                taken_back[name.strip()] += int(match[1])
        for match in RETURNED_LINE.finditer(text):
            taken_back[match[2]] += int(match[1])
    budget = sum(
        max(m.leases_at_fault, taken_back[m.node_id])
        for m in run.members
        if _killed(m) or _terminated(m) or _frozen_long(m) or m.exit_code not in (None, 0, 3)
    )
    for fired in run.fired:
        if fired.event.kind == "redis-crash" and fired.note != "skipped":
            t = start + fired.start_s
            budget += sum(1 for e in fetches if t - CRASH_WINDOW <= e["t"] <= t)
    record.update(pages_fetched_twice=twice, refetch_budget=budget)
    if twice > budget:
        violations.append(
            _violation(run, "refetch_bounded", f"{twice} pages fetched twice, at most {budget}")
        )

    # -- the nodes' logs --------------------------------------------------------------------
    bound = LOG_BASE + LOG_PER_EVENT * len(fired_kinds)
    tracebacks: list[str] = []
    record["log_records_max"] = 0
    for member in run.members:
        text = _log_text(member)
        records = len(_RECORD.findall(text.encode()))
        record["log_records_max"] = max(record["log_records_max"], records)
        if records > bound:
            violations.append(
                _violation(
                    run,
                    "log_lines_bounded",
                    f"{member.node_id} logged {records} records (at most {bound})",
                )
            )
        lines = text.splitlines()
        for i, line in enumerate(lines):
            if line.startswith("Traceback (most recent call last)"):
                end = next(
                    (j for j in range(i + 1, len(lines)) if not lines[j].startswith((" ", "\t"))),
                    len(lines) - 1,
                )
                error = lines[end].strip()
                # an error reply of a class nobody knows may be a bug: its traceback is due
                if UNKNOWN_ERROR not in error:
                    tracebacks.append(f"{member.node_id}: {error[:200]}")
    if tracebacks:
        counted = Counter(tracebacks)
        seen = "; ".join(f"{t} (x{n})" if n > 1 else t for t, n in counted.most_common(3))
        violations.append(_violation(run, "no_tracebacks", seen))

    # -- exit statuses ----------------------------------------------------------------------
    vanished = vanished_status()
    mongo_events = any(k.startswith("mongo-") for k in fired_kinds)
    for member in run.members:
        code = member.exit_code
        if code is None or _killed(member):
            continue
        if (
            code == -signal.SIGTERM
            and _terminated(member)
            and not _RECORD.search(_log_text(member).encode())
        ):
            continue  # stopped before Scrapy started its log: the docs' "first moments"
        allowed = {_CLEAN}
        if mongo_events:
            allowed.add(_JOURNAL)
        if member.journal_at_exit:
            allowed = {_JOURNAL}
        began = member.signals[0][0] if _terminated(member) else (member.exit_s or 0) - 10
        if _redis_away(run, began - 1.0, member.exit_s or run.now()):
            allowed.add(_LEASES)
        if wiped and member.exit_s is not None and member.exit_s >= (run.wiped_at or 0):
            if member.started_s < (run.wiped_at or 0) and not _terminated(member):
                allowed = {vanished} if vanished is not None else {-1}
            elif vanished is not None:
                allowed.add(vanished)
        if code not in allowed:
            held = member.journal_at_exit
            why = f" with {held} products in its journal" if code == 0 and held else ""
            violations.append(
                _violation(
                    run,
                    "exit_status",
                    f"{member.node_id} exited {code}{why}, expected {sorted(allowed)}",
                )
            )

    # -- a wiped crawl ----------------------------------------------------------------------
    if wiped:
        wipe_t = start + (run.wiped_at or 0)
        reseed_t = start + getattr(run, "reseeded_at", 1e12)
        before = {e["path"] for e in log if start <= e["t"] < wipe_t}
        again = {e["path"] for e in log if wipe_t <= e["t"] < reseed_t and e["path"] in before}
        in_flight = sum(m.leases_at_fault for m in run.members)
        codes = [m.exit_code for m in run.members if m.exit_s and m.exit_s >= (run.wiped_at or 0)]
        problems = []
        if vanished is None:
            problems.append("scrapy crawl has no exit status for a vanished crawl")
        elif vanished not in codes:
            problems.append(f"no node exited with status {vanished}: {codes}")
        if len(again) > max(in_flight, 16):
            problems.append(f"{len(again)} pages fetched again after the wipe")
        if problems:
            violations.append(_violation(run, "wiped_reported", "; ".join(problems)))
    record["violations"] = violations
    return record
