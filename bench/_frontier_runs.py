"""The load windows of bench/frontier.py: node processes against a target (a single Redis or
the masters of a cluster), and what Redis spent meanwhile."""

from __future__ import annotations

import argparse
import itertools
import multiprocessing as mp
import time
from typing import Any

from _accounting import redis_delta, redis_snapshot
from _frontier_load import node_args
from _frontier_nodes import distcrawl_node


def _snapshots(target: Any) -> list[dict[str, Any]]:
    out = []
    for c in target["clients"]:
        snap = redis_snapshot(c)
        stats = c.info("stats")
        snap["net_in"] = int(stats["total_net_input_bytes"])
        snap["net_out"] = int(stats["total_net_output_bytes"])
        out.append(snap)
    return out


#: a number per simulated node process of the whole run: the new URLs a node makes carry it, so
#: that the nodes of a later window on the same server never make an earlier window's URLs again
#: (those would be filtered, and the queue would drain over the windows)
_node_numbers = itertools.count()


def run_load(
    target: dict[str, Any],
    node_main: Any,
    args: argparse.Namespace,
    seconds: float | None = None,
    pace: float = 0.0,
) -> dict[str, Any]:
    """*args.nodes* node processes for *seconds* (default ``--seconds``); what they did and
    what Redis spent. ``pace``: the pages per second of all nodes together (0: as many as
    they can)."""
    ctx = mp.get_context("fork")
    start, stop, out = ctx.Event(), ctx.Event(), ctx.Queue()
    procs = []
    for i in range(args.nodes):
        params = {**node_args(args), "index": next(_node_numbers), "pace": pace / args.nodes}
        p = ctx.Process(
            target=node_main, args=(target["url"], f"sim-{i}", params, start, stop, out)
        )
        p.start()
        procs.append(p)
    time.sleep(0.5)  # let the processes connect before the window opens
    before = _snapshots(target)
    t0 = time.perf_counter()
    start.set()
    time.sleep(args.seconds if seconds is None else seconds)
    stop.set()
    results = [out.get(timeout=60) for _ in procs]
    wall = time.perf_counter() - t0
    after = _snapshots(target)
    for p in procs:
        p.join(timeout=30)
    deltas = [redis_delta(b, a) for b, a in zip(before, after, strict=True)]
    pages = sum(r["pages"] for r in results) or 1
    net_in = sum(a["net_in"] - b["net_in"] for b, a in zip(before, after, strict=True))
    net_out = sum(a["net_out"] - b["net_out"] for b, a in zip(before, after, strict=True))
    cpu = [d["cpu_s"] for d in deltas]
    by_name: dict[str, int] = {}
    usec_by_name: dict[str, int] = {}
    for d in deltas:
        for name, n in d["by_command"].items():
            by_name[name] = by_name.get(name, 0) + n
        for name, n in d["usec_by_command"].items():
            usec_by_name[name] = usec_by_name.get(name, 0) + n
    return {
        "pages": pages,
        "pages_per_second": round(pages / wall, 1),
        "redis_cpu_us_per_page": round(sum(cpu) / pages * 1e6, 2),
        "commands_per_page": round(sum(d["commands"] for d in deltas) / pages, 2),
        "roundtrips_per_page": round(sum(r["roundtrips"] for r in results) / pages, 4),
        # links that reached Redis per page (the rest the node knew it had sent already)
        "children_sent_per_page": round(sum(r.get("children_sent", 0) for r in results) / pages, 2),
        "priority_inversions": sum(r.get("inversions", 0) for r in results),
        "shard_calls_per_roundtrip": round(
            sum(r.get("shard_calls", 0) for r in results)
            / max(1, sum(r["roundtrips"] for r in results)),
            2,
        ),
        # where the commands go (those inside the script included), most frequent first
        "commands_per_page_by_name": {
            name: round(n / pages, 2)
            for name, n in sorted(by_name.items(), key=lambda kv: -kv[1])
            if n / pages >= 0.01
        },
        # Redis' own timing (INFO commandstats usec) per page: evalsha includes the
        # script's redis.calls, listed again under their names. Wall-clock time inside the
        # command, not CPU: on a loaded machine it includes time the server was preempted
        "command_us_per_page_by_name": {
            name: round(n / pages, 2)
            for name, n in sorted(usec_by_name.items(), key=lambda kv: -kv[1])
            if n / pages >= 0.01
        },
        "net_in_bytes_per_page": round(net_in / pages),
        "net_out_bytes_per_page": round(net_out / pages),
        "cpu_per_master": cpu,
        # each master's commands per page (a cluster's balance: which master does what)
        "commands_per_page_by_master": [
            {
                name: round(n / pages, 3)
                for name, n in sorted(d["by_command"].items(), key=lambda kv: -kv[1])
                if n / pages >= 0.001
            }
            for d in deltas
        ],
    }


def run_alternating(
    single: dict[str, Any], cluster: dict[str, Any], args: argparse.Namespace
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """The distcrawl load on the single Redis and on the cluster in ``--rounds`` alternating
    windows of ``--seconds / --rounds`` each, so that both see the same machine load however
    the rest of the machine's work comes and goes; then, in each round, the single Redis held
    to the cluster's rate over its masters. Returns the three runs, windows combined."""
    seconds = args.seconds / args.rounds
    on_single, on_cluster, at_rate = [], [], []
    for _ in range(args.rounds):
        on_single.append(run_load(single, distcrawl_node, args, seconds))
        on_cluster.append(run_load(cluster, distcrawl_node, args, seconds))
        # and the single Redis held to the pages per second one master just served: what a
        # server costs per page depends on how busy it is (on this VM a server that idles
        # between calls runs them with cold caches), so this compares like with like
        rate = on_cluster[-1]["pages_per_second"] / args.cluster
        at_rate.append(run_load(single, distcrawl_node, args, seconds, pace=rate))
    return combine(on_single), combine(on_cluster), combine(at_rate)


def combine(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Windows of one target as one run: counts summed, per-page figures weighted by pages,
    per-round-trip ones by round trips, CPU per master summed."""
    if len(runs) == 1:
        return runs[0]
    pages = sum(r["pages"] for r in runs)
    trips = [r["pages"] * r["roundtrips_per_page"] for r in runs]
    out = dict(runs[0])
    for key, value in runs[0].items():
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            continue
        values = [r[key] for r in runs]
        if key.endswith("_per_page"):
            digits = 4 if key.startswith("roundtrips") else 2
            weighted = sum(v * r["pages"] for v, r in zip(values, runs, strict=True))
            out[key] = round(weighted / pages, digits)
        elif key.endswith("_per_roundtrip"):
            out[key] = round(
                sum(v * t for v, t in zip(values, trips, strict=True)) / max(1e-9, sum(trips)), 2
            )
        elif key == "pages_per_second":
            wall = sum(r["pages"] / v for r, v in zip(runs, values, strict=True) if v)
            out[key] = round(pages / wall, 1) if wall else 0.0
        else:
            out[key] = sum(values)
    out["cpu_per_master"] = [sum(c) for c in zip(*(r["cpu_per_master"] for r in runs), strict=True)]
    return out
