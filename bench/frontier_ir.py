"""Redis instructions per page of the frontier, counted by callgrind: an A/B figure the machine's
load does not move.

On a shared 2-core machine the CPU time ``bench/frontier.py`` reads from INFO grows with the
load (hyperthreads share a core) by more than most changes of the script move it. This bench
runs valkey-server under valgrind's callgrind instead, with its instrumentation on only for
the measured window, and drives it with one simulated node of ``bench/frontier.py`` (the same
links, payloads, fingerprints, fenced calls and known fingerprints) for a fixed number of
flushes, its random choices seeded and the order the node visits the shards in fixed. It
reports the instructions the server executed per page (``redis_instructions_per_page``) and
per script call, and the commands per page the script made; two runs of one commit differ by
~1-2 % (the server's hash seeds). Instructions are not time (cache misses are not counted),
but what they count is the work a change adds or removes: the commands, the Lua work, the
allocations. valgrind (Debian's ``valgrind``) must be installed.

``--cluster M`` runs the same load a second time through an M-master Redis Cluster
(:class:`~distcrawl.servers.cluster.LocalRedisCluster`, each master under callgrind the same
way) and counts each master's instructions: ``cluster_instructions_overhead`` is the masters'
instructions per page, summed, over the single server's, and ``cluster_projected_speedup_ir``
the masters' total over the busiest master's, divided by that overhead (how much more a cluster
of M such masters can serve, by instructions, than one server).

    .venv/bin/python bench/frontier_ir.py --json
    .venv/bin/python bench/frontier_ir.py --flushes 300 --shards 1 --json
    .venv/bin/python bench/frontier_ir.py --cluster 3 --json
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import redis
from redis.crc import key_slot

sys.path.insert(0, str(Path(__file__).resolve().parent))

import frontier as fb
from _results import print_report

from distcrawl.base.recent import RecentKeys
from distcrawl.frontier import connection
from distcrawl.servers.cluster import SLOTS, ClusterNodeServer, LocalRedisCluster
from distcrawl.servers.process import redis_server_binary

HEADLINE = ("redis_instructions_per_page", "instructions_per_call", "commands_per_page")
CLUSTER_HEADLINE = (
    "redis_instructions_per_page",
    "cluster_instructions_overhead",
    "cluster_projected_speedup_ir",
)
#: flushes before the measured window (connections made, the shards' views filled)
WARMUP = 50
#: seconds a server under valgrind may take to answer its first PING (a busy machine)
START_TIMEOUT = 180.0
#: a cluster node under callgrind answers the cluster bus slowly: no node is taken for failed
NODE_TIMEOUT_MS = 120_000


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _callgrind(out: Path, cache_sim: bool) -> list[str]:
    """valgrind's command line: callgrind, instrumentation off until turned on."""
    return [
        "valgrind",
        "--tool=callgrind",
        "--instr-atstart=no",
        *(["--cache-sim=yes"] if cache_sim else []),
        f"--callgrind-out-file={out}",
    ]


class Counter:
    """callgrind's counts of one server process (its pid), dumped next to ``out``."""

    def __init__(self, pid: int, out: Path) -> None:
        self.pid = pid
        self.out = out

    def _control(self, *args: str) -> None:
        subprocess.run(["callgrind_control", *args, str(self.pid)], check=True, capture_output=True)

    def start_counting(self) -> None:
        self._control("-z")
        self._control("-i", "on")

    def stop_counting(self) -> list[int]:
        """callgrind's totals since :meth:`start_counting`: instructions, and with the cache
        simulation Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw after them."""
        self._control("-i", "off")
        self._control("-d")
        for _ in range(100):
            # the newest dump, <out>.<n> with n counted up (".10" sorts before ".9")
            dumps = sorted(
                self.out.parent.glob(f"{self.out.name}.*"), key=lambda p: int(p.suffix[1:])
            )
            if dumps:
                for line in dumps[-1].read_text().splitlines():
                    if line.startswith("totals:"):
                        return [int(n) for n in line.split()[1:]]
            time.sleep(0.1)
        raise RuntimeError("callgrind wrote no dump")


class CallgrindServer:
    """valkey-server under callgrind, instrumentation off until its counter turns it on."""

    def __init__(self, home: Path, *, cache_sim: bool = False) -> None:
        self.home = home
        self.port = _free_port()
        self.out = home / "callgrind.out"
        cmd = [
            *_callgrind(self.out, cache_sim),
            str(redis_server_binary()),
            "--bind", "127.0.0.1",
            "--port", str(self.port),
            "--dir", str(home),
            "--appendonly", "yes",
            "--appendfsync", "everysec",
            "--save", "",
        ]  # fmt: skip
        self.log = (home / "server.log").open("wb")
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT)
        self.url = f"redis://127.0.0.1:{self.port}/0"
        deadline = time.monotonic() + START_TIMEOUT  # valgrind starts slowly on a busy machine
        while True:
            try:
                redis.Redis(port=self.port).ping()
                break
            except redis.ConnectionError as err:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(
                        f"valkey-server under valgrind did not start: {home}"
                    ) from err
                time.sleep(0.5)
        self.counter = Counter(self.proc.pid, self.out)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


class CallgrindClusterNode(ClusterNodeServer):
    """One master of a Redis Cluster under callgrind, as :class:`CallgrindServer` runs one."""

    cache_sim = False

    @property
    def out(self) -> Path:
        return self.data_dir / "callgrind.out"

    def command(self) -> list[str]:
        return [*_callgrind(self.out, self.cache_sim), *super().command()]

    def start(self, *, detached: bool = False, timeout: float = START_TIMEOUT) -> Any:
        return super().start(detached=detached, timeout=timeout)

    @property
    def counter(self) -> Counter:
        assert self.pid is not None
        return Counter(self.pid, self.out)


class CallgrindCluster(LocalRedisCluster):
    """A local Redis Cluster whose masters run under callgrind."""

    def _node(self, name: str, node_timeout_ms: int) -> ClusterNodeServer:
        base = self.home / name
        return CallgrindClusterNode(
            data_dir=base / "data", log_path=base / "valkey.log", node_timeout_ms=node_timeout_ms
        )


def drive(
    url: str, counters: list[Counter], stats: list[redis.Redis], args: argparse.Namespace
) -> dict[str, Any]:
    """One node: ``args.flushes`` flushes of ``bench/frontier.py``'s load against ``url``,
    counted by ``counters`` (one per server) and by the servers' commandstats."""
    params = fb.node_args(args)
    client = connection.client(url, socket_timeout=600)
    for c in stats:
        c.flushall()
    fb.preload(url, args.sites, params)
    store = fb.make_store(client, params)
    for i in range(store.keys.shards):
        store.views[i].salt = i / store.keys.shards  # the shards' turns in a fixed order
    rng = random.Random(7)
    payloads = fb.Payloads(fb.queue_payload)
    known = RecentKeys(args.known) if args.known > 0 else None
    children: list[Any] = []
    acks: list[Any] = []
    fresh = pages = calls = 0
    store.heartbeat("sim-0", "{}")
    for step in range(WARMUP + args.flushes):
        if step == WARMUP:
            for c in stats:
                c.config_resetstat()
            for counter in counters:
                counter.start_counting()
            pages = calls = 0
        reply = store.sync("sim-0", children=children, acks=acks, lease=args.lease, tag="ir0")
        calls += reply.shards_called
        children, acks = [], []
        for leased in reply.leased:
            page_url = json.loads(leased.payload)["u"]
            acks.append(leased.lease)
            site = fb._site_of(page_url)
            for _ in range(args.links):
                if rng.random() < args.seen:
                    u, kind, prio = (
                        fb.url_of(site, rng.randrange(fb.PRELOAD_PER_SITE)),
                        "product",
                        100,
                    )
                else:
                    fresh += 1
                    u = fb.url_of(site, 10**9 + fresh)
                    kind, prio = fb.pick_kind(rng)
                if known is not None:
                    key = fb.fingerprint(u).hex()
                    if key in known:
                        continue
                    known.add(key)
                children.append(fb.child(payloads, u, kind, prio, page_url))
        pages += len(reply.leased)
    totals = [counter.stop_counting() for counter in counters]
    inner = 0
    for c in stats:
        by_name = c.info("commandstats")
        inner += sum(
            v["calls"]
            for k, v in by_name.items()
            if k not in ("cmdstat_evalsha", "cmdstat_fcall") and not k.startswith("cmdstat_config")
        )
    client.close()
    instructions = sum(t[0] for t in totals)
    pages = max(1, pages)
    out: dict[str, Any] = {
        "pages": pages,
        "script_calls": calls,
        "pages_per_call": round(pages / max(1, calls), 2),
        "redis_instructions_per_page": round(instructions / pages),
        "instructions_per_call": round(instructions / max(1, calls)),
        "commands_per_page": round(inner / pages, 2),
        "instructions_per_page_by_server": [round(t[0] / pages) for t in totals],
    }
    if all(len(t) > 3 for t in totals):
        # with --cache-sim: first-level cache misses (instruction, data read, data write)
        out["l1_misses_per_page"] = round(sum(sum(t[3:6]) for t in totals) / pages)
    return out


def run_single(home: Path, args: argparse.Namespace) -> dict[str, Any]:
    home.mkdir(parents=True)
    server = CallgrindServer(home, cache_sim=args.cache_sim)
    stats = redis.Redis(port=server.port, socket_timeout=600)
    try:
        result = drive(server.url, [server.counter], [stats], args)
    finally:
        stats.close()
        server.stop()
    result.pop("instructions_per_page_by_server")
    return result


def run_cluster(home: Path, args: argparse.Namespace) -> dict[str, Any]:
    """The same load through an ``args.cluster``-master cluster: the masters' instructions."""
    CallgrindClusterNode.cache_sim = args.cache_sim
    cluster = CallgrindCluster(home, masters=args.cluster, node_timeout_ms=NODE_TIMEOUT_MS)
    cluster.start(timeout=START_TIMEOUT)
    stats = [redis.Redis(host=m.host, port=m.port, socket_timeout=600) for m in cluster.masters]
    try:
        counters = [m.counter for m in cluster.masters]  # type: ignore[attr-defined]
        result = drive(cluster.url, counters, stats, args)
        # the shards each master holds (slots in equal ranges, as the cluster assigns them)
        keys = fb.make_store(stats[0], fb.node_args(args)).keys
        n = args.cluster
        firsts = [i * SLOTS // n for i in range(n)]
        owners = [
            max(i for i in range(n) if firsts[i] <= key_slot(s.prefix.encode()))
            for s in keys.all_shards()
        ]
        result["shards_by_master"] = [owners.count(i) for i in range(n)]
    finally:
        for c in stats:
            c.close()
        cluster.stop()
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--flushes", type=int, default=150, help="measured flushes")
    parser.add_argument("--sites", type=int, default=1000)
    parser.add_argument("--links", type=int, default=20)
    parser.add_argument("--seen", type=float, default=0.95)
    parser.add_argument("--lease", type=int, default=32)
    parser.add_argument(
        "--shards",
        type=int,
        default=None,
        help=f"frontier shards (default {fb.DEFAULT_SHARDS}; with --cluster M, the first multiple "
        f"of M from {fb.DEFAULT_SHARDS}, as the docs advise for a cluster, for both runs)",
    )
    parser.add_argument("--known", type=int, default=fb.DEFAULT_KNOWN_FINGERPRINTS)
    parser.add_argument("--cache-sim", action="store_true", help="also count cache misses (slower)")
    parser.add_argument(
        "--cluster", type=int, default=0, help="also run the load through a cluster of N masters"
    )
    args = parser.parse_args(argv)
    if args.shards is None:
        args.shards = fb.cluster_shards(args.cluster) if args.cluster else fb.DEFAULT_SHARDS
    for tool in ("valgrind", "callgrind_control"):
        if shutil.which(tool) is None:
            parser.error(f"{tool} is not installed (Debian: apt-get install valgrind)")
    # what bench/frontier.py's node_args reads besides these
    args.dupefilter, args.urls, args.revisit = "exact", 0, False
    args.revisit_interval, args.forget = 5.0, 1e6
    home = Path(tempfile.mkdtemp(prefix="distcrawl-bench-ir-"))
    report: dict[str, Any] = {"flushes": args.flushes, "shards": args.shards, "lease": args.lease}
    try:
        report |= run_single(home / "single", args)
        if args.cluster:
            run = run_cluster(home / "cluster", args)
            by_master = run["instructions_per_page_by_server"]
            overhead = run["redis_instructions_per_page"] / report["redis_instructions_per_page"]
            spread = sum(by_master) / max(by_master)  # masters' total over the busiest one's
            report |= {
                "cluster_masters": args.cluster,
                "cluster_pages": run["pages"],
                "cluster_script_calls": run["script_calls"],
                "cluster_redis_instructions_per_page": run["redis_instructions_per_page"],
                "cluster_commands_per_page": run["commands_per_page"],
                "cluster_instructions_per_page_by_master": by_master,
                "cluster_shards_by_master": run["shards_by_master"],
                "cluster_busiest_master_share": round(max(by_master) / sum(by_master), 3),
                "cluster_instructions_overhead": round(overhead, 3),
                "cluster_projected_speedup_ir": round(spread / overhead, 2),
            }
    finally:
        shutil.rmtree(home, ignore_errors=True)
    print_report(report, CLUSTER_HEADLINE if args.cluster else HEADLINE, as_json=args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
