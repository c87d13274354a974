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

    .venv/bin/python bench/frontier_ir.py --json
    .venv/bin/python bench/frontier_ir.py --flushes 300 --shards 1 --json
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

sys.path.insert(0, str(Path(__file__).resolve().parent))

import frontier as fb
from _common import print_report

from distcrawl.base.recent import RecentKeys
from distcrawl.frontier import connection
from distcrawl.servers.process import redis_server_binary

HEADLINE = ("redis_instructions_per_page", "instructions_per_call", "commands_per_page")
#: flushes before the measured window (connections made, the shards' views filled)
WARMUP = 50


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class CallgrindServer:
    """valkey-server under callgrind, instrumentation off until :meth:`measure` turns it on."""

    def __init__(self, home: Path, *, cache_sim: bool = False) -> None:
        self.home = home
        self.port = _free_port()
        self.out = home / "callgrind.out"
        cmd = [
            "valgrind",
            "--tool=callgrind",
            "--instr-atstart=no",
            *(["--cache-sim=yes"] if cache_sim else []),
            f"--callgrind-out-file={self.out}",
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
        deadline = time.monotonic() + 120  # valgrind starts slowly on a busy machine
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

    def _control(self, *args: str) -> None:
        subprocess.run(
            ["callgrind_control", *args, str(self.proc.pid)], check=True, capture_output=True
        )

    def start_counting(self) -> None:
        self._control("-z")
        self._control("-i", "on")

    def stop_counting(self) -> list[int]:
        """callgrind's totals since :meth:`start_counting`: instructions, and with the cache
        simulation Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw after them."""
        self._control("-i", "off")
        self._control("-d")
        for _ in range(100):
            # the newest dump, callgrind.out.<n> with n counted up (".10" sorts before ".9")
            dumps = sorted(self.home.glob("callgrind.out.*"), key=lambda p: int(p.suffix[1:]))
            if dumps:
                for line in dumps[-1].read_text().splitlines():
                    if line.startswith("totals:"):
                        return [int(n) for n in line.split()[1:]]
            time.sleep(0.1)
        raise RuntimeError("callgrind wrote no dump")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def drive(server: CallgrindServer, args: argparse.Namespace) -> dict[str, Any]:
    """One node: ``args.flushes`` flushes of ``bench/frontier.py``'s load, counted."""
    params = fb.node_args(args)
    client = connection.client(server.url, socket_timeout=600)
    client.flushall()
    fb.preload(server.url, args.sites, params)
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
            client.config_resetstat()
            server.start_counting()
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
    totals = server.stop_counting()
    instructions = totals[0]
    stats = client.info("commandstats")
    client.close()
    inner = sum(
        v["calls"] for k, v in stats.items() if k not in ("cmdstat_evalsha", "cmdstat_fcall")
    )
    inner -= sum(v["calls"] for k, v in stats.items() if k.startswith("cmdstat_config"))
    pages = max(1, pages)
    return {
        "pages": pages,
        "script_calls": calls,
        "pages_per_call": round(pages / max(1, calls), 2),
        "redis_instructions_per_page": round(instructions / pages),
        "instructions_per_call": round(instructions / max(1, calls)),
        "commands_per_page": round(inner / pages, 2),
        # with --cache-sim: first-level cache misses (instruction, data read, data write)
        **({"l1_misses_per_page": round(sum(totals[3:6]) / pages)} if len(totals) > 3 else {}),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--flushes", type=int, default=150, help="measured flushes")
    parser.add_argument("--sites", type=int, default=1000)
    parser.add_argument("--links", type=int, default=20)
    parser.add_argument("--seen", type=float, default=0.95)
    parser.add_argument("--lease", type=int, default=32)
    parser.add_argument("--shards", type=int, default=fb.DEFAULT_SHARDS)
    parser.add_argument("--known", type=int, default=fb.DEFAULT_KNOWN_FINGERPRINTS)
    parser.add_argument("--cache-sim", action="store_true", help="also count cache misses (slower)")
    args = parser.parse_args(argv)
    for tool in ("valgrind", "callgrind_control"):
        if shutil.which(tool) is None:
            parser.error(f"{tool} is not installed (Debian: apt-get install valgrind)")
    # what bench/frontier.py's node_args reads besides these
    args.dupefilter, args.urls, args.revisit = "exact", 0, False
    args.revisit_interval, args.forget = 5.0, 1e6
    home = Path(tempfile.mkdtemp(prefix="distcrawl-bench-ir-"))
    server = CallgrindServer(home, cache_sim=args.cache_sim)
    try:
        report: dict[str, Any] = {
            "flushes": args.flushes,
            "shards": args.shards,
            "lease": args.lease,
            **drive(server, args),
        }
    finally:
        server.stop()
        shutil.rmtree(home, ignore_errors=True)
    print_report(report, HEADLINE, as_json=args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
