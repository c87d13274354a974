"""Shared helpers of the benchmarks: the demo shop and real servers in processes of their own,
crawl node processes, CPU and Redis accounting, and a delaying TCP proxy.

Node processes load this module as a spider module (``SPIDER_MODULES`` with ``bench/`` on
``PYTHONPATH``) for the two spiders the baselines need: the catalog spider on plain Scrapy
(``bench_plain``, seeded by the ``seed`` spider argument) and on vanilla scrapy-redis
(``bench_scrapy_redis``, seeded from ``catalog:start_urls``). Both reuse ``CatalogSpider``'s
seed request and ``parse`` unchanged, so every variant crawls with the same logic.

``python bench/_common.py proxy --target HOST:PORT --delay-ms MS --stats FILE`` runs the
delaying proxy on its own (that is how :class:`Proxy` starts it).
"""

from __future__ import annotations

import argparse
import bisect
import contextlib
import json
import os
import queue
import re
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import AsyncIterator, Iterable
from pathlib import Path
from typing import Any

from scrapy_redis.spiders import RedisSpider
from scrapy_redis.utils import bytes_to_str

from distcrawl.node.seeds.parse import Seed, parse_seed
from distcrawl.node.spiders.catalog import CatalogSpider

BENCH_DIR = Path(__file__).resolve().parent
#: the seed list every Redis-based variant reads (scrapy-redis and distcrawl alike)
START_URLS_KEY = "catalog:start_urls"
#: hosts the nodes may crawl although they are private (the shop is on loopback)
ALLOW_PRIVATE = "127.0.0.1,localhost"
#: Scrapy settings every variant runs with (on top of distcrawl.settings): same concurrency,
#: same CONCURRENT_ITEMS, same middlewares, robots.txt obeyed, item pipeline off
COMMON_SETTINGS: dict[str, str] = {
    "CONCURRENT_REQUESTS": "16",
    "CONCURRENT_REQUESTS_PER_DOMAIN": "16",
    "CONCURRENT_ITEMS": "16",
    "ROBOTSTXT_OBEY": "True",
    "LOG_LEVEL": "INFO",
    "TELNETCONSOLE_ENABLED": "False",
    "DISTCRAWL_EMBEDDED": "False",
    "ITEM_PIPELINES": "{}",
    # the operator's periodic cluster-progress log line reads Redis: off, so that only the
    # frontier talks to Redis and plain Scrapy runs exactly what the others run
    "DISTCRAWL_PROGRESS_INTERVAL": "0",
    # Scrapy re-reads and re-parses the callback's source (inspect.getsource + ast) to warn
    # about generators that return values; its cache is keyed by weak references to bound
    # methods, which die with their request, so it misses on 5-20 % of the node's CPU and
    # erratically (it depends on how long requests live, which differs by design). Off for
    # every variant, so the figures compare frontiers, not this cache's luck.
    "WARN_ON_GENERATOR_RETURN_VALUE": "False",
    # the cluster-wide pages-per-site budget (a safety guard kept in Redis, one INCRBY per 16
    # pages) is not the frontier, and plain Scrapy has no Redis to keep it in: without one it
    # tries to connect for every page. Off for every variant.
    "DISTCRAWL_MAX_PAGES_PER_SITE": "0",
}
#: scrapy-redis 0.9.1 as its README sets it up: its scheduler, dupefilter, priority queue and
#: default (pickle) serializer; SCHEDULER_PERSIST so a closing node keeps the shared queue
SCRAPY_REDIS_SETTINGS: dict[str, str] = {
    "SCHEDULER": "scrapy_redis.scheduler.Scheduler",
    "DUPEFILTER_CLASS": "scrapy_redis.dupefilter.RFPDupeFilter",
    "SCHEDULER_QUEUE_CLASS": "scrapy_redis.queue.PriorityQueue",
    "SCHEDULER_PERSIST": "True",
}
#: plain Scrapy: its in-memory scheduler and dupefilter
PLAIN_SETTINGS: dict[str, str] = {
    "SCHEDULER": "scrapy.core.scheduler.Scheduler",
    "DUPEFILTER_CLASS": "scrapy.dupefilters.RFPDupeFilter",
}


def plain_settings() -> dict[str, str]:
    """PLAIN_SETTINGS plus the project's downloader middlewares without the one that shares
    robots.txt through Redis (plain Scrapy has no Redis; it would try 127.0.0.1:6379)."""
    from distcrawl import settings as project

    middlewares = dict(project.DOWNLOADER_MIDDLEWARES)
    middlewares["distcrawl.node.middlewares.robots.SharedRobotsTxt"] = None
    return {**PLAIN_SETTINGS, "DOWNLOADER_MIDDLEWARES": json.dumps(middlewares)}


#: scrapy-redis keys of the bench_scrapy_redis spider
SCRAPY_REDIS_QUEUE = "bench_scrapy_redis:requests"
SCRAPY_REDIS_DUPEFILTER = "bench_scrapy_redis:dupefilter"
_CLK_TCK = os.sysconf("SC_CLK_TCK")


# -- the baseline spiders (loaded by node processes through SPIDER_MODULES) ------------------


class PlainCatalogSpider(CatalogSpider):
    """The catalog spider on plain Scrapy: ``-a seed=URL`` is its one start request."""

    name = "bench_plain"

    def __init__(self, *args: Any, seed: str = "", **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.seed_url = seed

    async def start(self) -> AsyncIterator[Any]:
        yield self.make_request_from_seed(parse_seed(self.seed_url, allow_private=True))


class ScrapyRedisCatalogSpider(RedisSpider, CatalogSpider):  # type: ignore[misc]
    """The catalog spider on vanilla scrapy-redis: seeds from ``catalog:start_urls``, read
    when the spider goes idle (scrapy-redis' way); the seed request is CatalogSpider's."""

    name = "bench_scrapy_redis"
    redis_key = START_URLS_KEY

    def make_request_from_data(self, data: bytes) -> Any:
        return self.make_request_from_seed(Seed(url=bytes_to_str(data).strip()))


# -- processes -------------------------------------------------------------------------------


def stop_process(proc: subprocess.Popen[Any], timeout: float = 20.0) -> None:
    """SIGTERM *proc* (only this PID), wait, then SIGKILL it; a no-op if it has exited."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class ShopProcess:
    """The demo shop (``python -m distcrawl.demo.server``) in a process of its own, so it never
    shares a GIL with the benchmark driver; checked over its ``/_shop/`` HTTP API."""

    def __init__(
        self,
        *,
        products: int,
        latency_ms: float = 0.0,
        jitter_ms: float = 0.0,
        seed: int = 0,
        hostile: bool = False,
    ) -> None:
        self.products = products
        self.latency_ms = latency_ms
        cmd = [sys.executable, "-m", "distcrawl.demo.server", "--products", str(products)]
        cmd += ["--seed", str(seed), "--latency", str(latency_ms)]
        cmd += ["--latency-jitter", str(jitter_ms)]
        if hostile:
            cmd.append("--hostile")  # the trap and garbage pages too
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            self.proc.wait()
            raise RuntimeError(f"the demo shop did not start (exit {self.proc.returncode})")
        self.url: str = json.loads(line)["url"]
        self.port = int(self.url.rstrip("/").rsplit(":", 1)[1])
        self.pid = self.proc.pid

    def _get(self, path: str) -> Any:
        with urllib.request.urlopen(self.url.rstrip("/") + path, timeout=60) as answer:
            return json.loads(answer.read())

    def log(self, since: float | None = None) -> list[dict[str, Any]]:
        """The shop's request log (``/_shop/*`` excluded), entries after *since*."""
        return self._get("/_shop/log" + (f"?since={since!r}" if since is not None else ""))

    def truth(self) -> dict[str, Any]:
        return self._get("/_shop/truth")

    def stop(self) -> None:
        stop_process(self.proc)
        if self.proc.stdout is not None:
            self.proc.stdout.close()

    def __enter__(self) -> ShopProcess:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def expected_pages(products: int, seed: int = 0) -> int:
    """Pages a complete crawl fetches: home, category pages, listing pages, product pages."""
    from distcrawl.demo.catalog import Catalog

    catalog = Catalog(products, seed=seed)
    listings = sum(catalog.page_count(leaf) for leaf in catalog.leaves())
    return 1 + len(catalog.tops) + listings + products


def page_fetches(entries: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The successful page fetches of a request log (robots.txt excluded)."""
    return [e for e in entries if e["status"] == 200 and e["path"] != "/robots.txt"]


class Node:
    """One ``scrapy crawl SPIDER`` process on the project settings, with its own log file."""

    def __init__(
        self,
        spider: str,
        *,
        node_id: str,
        log_dir: Path,
        settings: dict[str, str],
        env: dict[str, str] | None = None,
        spider_args: dict[str, str] | None = None,
    ) -> None:
        self.spider = spider
        self.node_id = node_id
        self.log_file = log_dir / f"{node_id}.log"
        self.out_file = log_dir / f"{node_id}.out"
        cmd = [sys.executable, "-m", "scrapy", "crawl", spider]
        for key, value in {**settings, "LOG_FILE": str(self.log_file)}.items():
            cmd += ["-s", f"{key}={value}"]
        for key, value in (spider_args or {}).items():
            cmd += ["-a", f"{key}={value}"]
        full_env = dict(os.environ)
        python_path = [str(BENCH_DIR), *filter(None, [full_env.get("PYTHONPATH", "")])]
        full_env.update(
            SCRAPY_SETTINGS_MODULE="distcrawl.settings",
            PYTHONPATH=os.pathsep.join(python_path),
            DISTCRAWL_NODE_ID=node_id,
            DISTCRAWL_ALLOW_PRIVATE=ALLOW_PRIVATE,
            **(env or {}),
        )
        with open(self.out_file, "wb") as out:
            self.proc = subprocess.Popen(
                cmd,
                env=full_env,
                cwd=log_dir,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        self.pid = self.proc.pid
        self.started = time.monotonic()
        self._opened_at: float | None = None

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def crawling_for(self) -> float:
        """Seconds since the node logged "Spider opened" (0 before that)."""
        if self._opened_at is None:
            with contextlib.suppress(OSError):
                if "Spider opened" in self.log_file.read_text(errors="replace"):
                    self._opened_at = time.monotonic()
        return 0.0 if self._opened_at is None else time.monotonic() - self._opened_at

    def kill9(self) -> None:
        """``kill -9`` this node (its PID only), as a crash or power loss would."""
        if self.alive:
            os.kill(self.pid, signal.SIGKILL)
            self.proc.wait()

    def stop(self, timeout: float = 30.0) -> None:
        stop_process(self.proc, timeout)

    def wait(self, timeout: float) -> int | None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            return self.proc.wait(timeout=timeout)
        return None

    def log(self) -> str:
        files = (self.log_file, self.out_file)
        return "\n".join(p.read_text(errors="replace") for p in files if p.exists())


#: where each run writes its result file (a folder; empty: nowhere), default bench/results/
RESULTS_ENV = "DISTCRAWL_BENCH_RESULTS"
#: when this process started (the result file's started_at) and the load then
_STARTED_AT = time.time()
_LOAD_BEFORE = [round(x, 2) for x in os.getloadavg()]


def _cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return "unknown"


def write_result(report: dict[str, Any], argv: list[str] | None = None) -> Path | None:
    """Write this run's result to ``bench/results/<tool>[--<options>].json`` (one file per
    command, the latest run of it): the command, when it ran, the machine and the report that
    ``--json`` prints. The documentation's benchmarks page is built from these files."""
    folder = os.environ.get(RESULTS_ENV, str(BENCH_DIR / "results"))
    if not folder:
        return None
    argv = list(sys.argv if argv is None else argv)
    tool = Path(argv[0]).stem
    args = [a for a in argv[1:] if a != "--json"]
    slug = re.sub(r"[^A-Za-z0-9.,=_-]+", "_", "_".join(a.lstrip("-") for a in args)).strip("_")
    name = f"{tool}--{slug[:120]}.json" if slug else f"{tool}.json"
    result = {
        "tool": tool,
        "command": shlex.join([".venv/bin/python", f"bench/{tool}.py", *args, "--json"]),
        "argv": args,
        "started_at": round(_STARTED_AT, 3),
        "finished_at": round(time.time(), 3),
        "machine": {
            "cpus": os.cpu_count(),
            "cpu_model": _cpu_model(),
            "load_before": _LOAD_BEFORE,
            "load_after": [round(x, 2) for x in os.getloadavg()],
            "python": sys.version.split()[0],
        },
        "report": report,
    }
    path = Path(folder) / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, sort_keys=True, indent=1, default=str) + "\n")
    print(f"result written to {path}", file=sys.stderr)
    return path


def print_report(report: dict[str, Any], keys: Iterable[str], *, as_json: bool) -> None:
    """A tool's result: one JSON object with ``--json``, else the headline keys, one a line;
    and its result file (:func:`write_result`)."""
    write_result(report)
    if as_json:
        print(json.dumps(report, sort_keys=True))
        return
    for key in keys:
        print(f"{key:>22}: {report.get(key)}")


def spider_modules_setting() -> dict[str, str]:
    """Settings that let a node find the bench spiders next to the catalog spider."""
    return {"SPIDER_MODULES": "distcrawl.node.spiders,_common"}


def wait_all(nodes: Iterable[Node], timeout: float) -> bool:
    """Wait until every node exited; False (and nothing stopped) when *timeout* ran out."""
    deadline = time.monotonic() + timeout
    return all(node.wait(max(0.0, deadline - time.monotonic())) is not None for node in nodes)


class Services:
    """A fresh Redis-protocol server (and optionally SecantusDB) in a temporary folder.

    valkey-server with its append-only file (``appendfsync everysec``), as the embedded
    default runs; stopped by PID with :meth:`stop`.
    """

    def __init__(self, *, mongo: bool = False, home: Path | None = None) -> None:
        from distcrawl.servers.process import MongoServer, RedisServer

        #: a folder this object made is removed by :meth:`stop` (a bench's Redis data and
        #: append-only file: hundreds of MB after a memory run)
        self._made_home = home is None
        self.home = home or Path(tempfile.mkdtemp(prefix="distcrawl-bench-"))
        self.redis = RedisServer(data_dir=self.home / "redis", log_path=self.home / "redis.log")
        self.mongo = (
            MongoServer(data_dir=self.home / "mongo", log_path=self.home / "mongo.log")
            if mongo
            else None
        )
        try:
            self.redis.start()
            if self.mongo is not None:
                self.mongo.start()
        except BaseException:
            self.stop()
            raise

    @property
    def redis_url(self) -> str:
        return self.redis.url

    @property
    def mongo_uri(self) -> str:
        assert self.mongo is not None
        return self.mongo.uri_for("catalog")

    def stop(self) -> None:
        try:
            self.redis.stop()
            if self.mongo is not None:
                self.mongo.stop()
        finally:
            if self._made_home:
                shutil.rmtree(self.home, ignore_errors=True)

    def __enter__(self) -> Services:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


# -- accounting ------------------------------------------------------------------------------


class CpuSampler:
    """Samples the CPU time (user + system, all threads) of some processes from /proc, so the
    CPU spent between two wall-clock instants (e.g. first and last page) can be read back.

    The whole machine's busy time (every CPU, every process: ``/proc/stat``) is sampled too,
    under :data:`MACHINE`, so a result can say how busy the machine was meanwhile.
    """

    #: the pseudo-pid of the whole machine
    MACHINE = -1

    def __init__(self, interval: float = 0.1) -> None:
        self.interval = interval
        self._samples: dict[int, tuple[list[float], list[float]]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="cpu-sampler", daemon=True)
        self.watch(self.MACHINE)
        self._thread.start()

    def watch(self, pid: int) -> None:
        with self._lock:
            self._samples.setdefault(pid, ([], []))
        self._sample(pid)

    @staticmethod
    def _read(pid: int) -> float | None:
        if pid == CpuSampler.MACHINE:
            try:
                jiffies = [
                    int(x) for x in Path("/proc/stat").read_text().split("\n")[0].split()[1:]
                ]
            except (OSError, ValueError):
                return None
            return (sum(jiffies[:8]) - jiffies[3] - jiffies[4]) / _CLK_TCK  # not idle, not iowait
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return None
        fields = stat.rpartition(")")[2].split()
        if fields[0] == "Z":
            return None
        return (int(fields[11]) + int(fields[12])) / _CLK_TCK  # utime + stime

    def _sample(self, pid: int) -> None:
        value = self._read(pid)
        if value is None:
            return
        now = time.time()
        with self._lock:
            times, values = self._samples[pid]
            times.append(now)
            values.append(value)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            with self._lock:
                pids = list(self._samples)
            for pid in pids:
                self._sample(pid)

    def cpu_at(self, pid: int, t: float) -> float:
        """CPU seconds of *pid* at wall-clock time *t* (linear between samples)."""
        with self._lock:
            times, values = self._samples.get(pid, ([], []))
            times, values = list(times), list(values)
        if not times:
            return 0.0
        i = bisect.bisect_left(times, t)
        if i == 0:
            return values[0]
        if i >= len(times):
            return values[-1]
        t0, t1, v0, v1 = times[i - 1], times[i], values[i - 1], values[i]
        return v0 + (v1 - v0) * (t - t0) / (t1 - t0) if t1 > t0 else v1

    def cpu_between(self, pids: Iterable[int], t0: float, t1: float) -> float:
        return sum(self.cpu_at(pid, t1) - self.cpu_at(pid, t0) for pid in pids)

    def total(self, pids: Iterable[int]) -> float:
        """Last CPU reading of each process (its whole life, if sampled until it exited)."""
        with self._lock:
            return sum(self._samples[p][1][-1] for p in pids if self._samples.get(p, ([], []))[1])

    def close(self) -> None:
        self._stop.set()
        self._thread.join()


#: commands the benchmark driver itself sends between two snapshots; never counted
_OWN_COMMANDS = frozenset(
    {"info", "config|resetstat", "config|set", "config|get", "flushall", "flushdb", "client|list"}
)
#: commands that run a server-side script: one round trip, however much the script does
SCRIPT_COMMANDS = frozenset({"evalsha", "eval", "evalsha_ro", "eval_ro", "fcall", "fcall_ro"})


def redis_snapshot(client: Any) -> dict[str, Any]:
    """One ``INFO stats commandstats cpu`` (a single command, so a single round trip)."""
    info = client.execute_command("INFO", "stats", "commandstats", "cpu")
    calls = {
        key[len("cmdstat_") :]: int(value["calls"])
        for key, value in info.items()
        if key.startswith("cmdstat_")
    }
    usec = {
        key[len("cmdstat_") :]: int(value["usec"])
        for key, value in info.items()
        if key.startswith("cmdstat_")
    }
    return {
        "calls": calls,
        "usec": usec,
        "reads": int(info["total_reads_processed"]),
        "commands_processed": int(info["total_commands_processed"]),
        "cpu": float(info["used_cpu_user"]) + float(info["used_cpu_sys"]),
    }


def redis_delta(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """What the nodes cost Redis between two snapshots (the driver's own commands excluded).

    ``commands``: commands the server executed, those run inside scripts included (Redis and
    valkey count a script's ``redis.call`` in INFO commandstats). ``script_calls``: EVALSHA /
    EVAL / FCALL. ``roundtrips``: read events the server processed on client sockets
    (``total_reads_processed``), i.e. request batches the clients sent and waited for; minus
    the one read of the closing snapshot itself.
    """
    calls = {
        name: after["calls"].get(name, 0) - before["calls"].get(name, 0)
        for name in after["calls"]
        if name not in _OWN_COMMANDS
    }
    calls = {k: v for k, v in calls.items() if v}
    # microseconds Redis timed per command (a script's own time includes its redis.calls)
    usec = {
        name: after.get("usec", {}).get(name, 0) - before.get("usec", {}).get(name, 0)
        for name in calls
    }
    return {
        "commands": sum(calls.values()),
        "script_calls": sum(v for k, v in calls.items() if k in SCRIPT_COMMANDS),
        "transactions": calls.get("exec", 0),
        "roundtrips": after["reads"] - before["reads"] - 1,
        "cpu_s": round(after["cpu"] - before["cpu"], 3),
        "by_command": dict(sorted(calls.items(), key=lambda kv: -kv[1])),
        "usec_by_command": dict(sorted(usec.items(), key=lambda kv: -kv[1])),
    }


def measure_rtt(url: str, count: int = 200) -> float:
    """Median milliseconds of a PING round trip to the Redis at *url*."""
    import redis

    client = redis.Redis.from_url(url)
    try:
        client.ping()
        times = []
        for _ in range(count):
            t = time.perf_counter()
            client.ping()
            times.append(time.perf_counter() - t)
        return round(statistics.median(times) * 1000, 3)
    finally:
        client.close()


def median(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


# -- the delaying TCP proxy ------------------------------------------------------------------


class _RespCounter:
    """Counts the commands in a client's RESP stream (arrays of bulk strings, or inline)."""

    def __init__(self) -> None:
        self.buf = bytearray()
        self.commands = 0

    def feed(self, data: bytes) -> None:
        self.buf += data
        pos = 0
        while pos < len(self.buf):
            end = self._one(pos)
            if end is None:
                break
            self.commands += 1
            pos = end
        del self.buf[:pos]

    def _one(self, pos: int) -> int | None:
        buf = self.buf
        if buf[pos] != ord("*"):
            nl = buf.find(b"\n", pos)
            return None if nl < 0 else nl + 1
        nl = buf.find(b"\r\n", pos)
        if nl < 0:
            return None
        p = nl + 2
        for _ in range(int(buf[pos + 1 : nl])):
            nl = buf.find(b"\r\n", p)
            if nl < 0:
                return None
            p = nl + 2 + int(buf[p + 1 : nl]) + 2
            if p > len(buf):
                return None
        return p


class _ProxyStats:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.connections = 0
        self.commands = 0
        self.roundtrips = 0
        self.bytes_up = 0
        self.bytes_down = 0

    def as_dict(self) -> dict[str, int]:
        with self.lock:
            return {
                "connections": self.connections,
                "commands": self.commands,
                "roundtrips": self.roundtrips,
                "bytes_up": self.bytes_up,
                "bytes_down": self.bytes_down,
            }


def _tight_timer_slack() -> None:
    """Ask Linux to wake this thread within 1 µs of its timer (default slack: 50 µs)."""
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL(None).prctl(29, 1000, 0, 0, 0)  # PR_SET_TIMERSLACK, in ns


#: how late time.sleep() wakes up on this machine (measured when the proxy starts)
_WAKE_UP_LATE = 0.0


def _calibrate_wake_up(delay: float) -> float:
    """Median lateness of ``time.sleep(delay)`` here (0.05-0.3 ms on a loaded VM)."""
    if delay <= 0:
        return 0.0
    _tight_timer_slack()
    late = []
    for _ in range(40):
        t = time.perf_counter()
        time.sleep(delay)
        late.append(time.perf_counter() - t - delay)
    return min(statistics.median(late), delay)


def _precise_sleep_until(due: float) -> None:
    # time.sleep() wakes up late (an event loop's timers even round up to whole ms): aim that
    # much early, so the added round-trip time is what was asked for
    while (left := due - time.perf_counter() - _WAKE_UP_LATE) > 0:
        time.sleep(left)


class _ProxyConnection:
    """One proxied client connection. Each direction has a reader and a writer thread; the
    replies are held back ``delay`` seconds (the whole added round-trip time on one leg, so a
    round trip pays one timer wake-up, not two), order kept."""

    def __init__(self, client: socket.socket, target: tuple[str, int], delay: float,
                 stats: _ProxyStats) -> None:  # fmt: skip
        self.client = client
        self.server = socket.create_connection(target)
        for sock in (client, self.server):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.stats = stats
        self.counter = _RespCounter()
        self.client_spoke_last = False
        for source, sink, up in ((client, self.server, True), (self.server, client, False)):
            outbox: queue.SimpleQueue[tuple[float, bytes]] = queue.SimpleQueue()
            hold = 0.0 if up else delay
            for run, args in (
                (self._read, (source, outbox, up, hold)),
                (self._write, (sink, outbox)),
            ):
                threading.Thread(target=run, args=args, daemon=True).start()

    def _seen(self, data: bytes, up: bool) -> None:
        stats = self.stats
        with stats.lock:
            if up:
                if not self.client_spoke_last:  # a new request after a reply: a round trip
                    stats.roundtrips += 1
                self.client_spoke_last = True
                stats.bytes_up += len(data)
                self.counter.feed(data)
                stats.commands += self.counter.commands
                self.counter.commands = 0
            else:
                self.client_spoke_last = False
                stats.bytes_down += len(data)

    def _read(self, source: socket.socket, outbox: queue.SimpleQueue[tuple[float, bytes]],
              up: bool, hold: float) -> None:  # fmt: skip
        while True:
            try:
                data = source.recv(65536)
            except OSError:
                data = b""
            if data:
                self._seen(data, up)
            outbox.put((time.perf_counter() + hold, data))
            if not data:
                return

    def _write(self, sink: socket.socket, outbox: queue.SimpleQueue[tuple[float, bytes]]) -> None:
        _tight_timer_slack()
        while True:
            due, data = outbox.get()
            if not data:
                break
            _precise_sleep_until(due)
            try:
                sink.sendall(data)
            except OSError:
                break
        for sock in (self.client, self.server):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


def _proxy_main(args: argparse.Namespace) -> int:
    global _WAKE_UP_LATE
    _WAKE_UP_LATE = _calibrate_wake_up(args.delay_ms / 1000.0)
    host, _, port = args.target.rpartition(":")
    target = (host, int(port))
    stats = _ProxyStats()
    listener = socket.create_server(("127.0.0.1", args.listen_port), backlog=128)
    stopping = threading.Event()

    def on_signal(signum: int, frame: Any) -> None:
        stopping.set()
        with contextlib.suppress(OSError):
            listener.shutdown(socket.SHUT_RDWR)
        listener.close()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    def accept_loop() -> None:
        while not stopping.is_set():
            try:
                client, _ = listener.accept()
            except OSError:
                return
            with stats.lock:
                stats.connections += 1
            try:
                _ProxyConnection(client, target, args.delay_ms / 1000.0, stats)
            except OSError:
                client.close()

    threading.Thread(target=accept_loop, daemon=True).start()
    print(json.dumps({"port": listener.getsockname()[1], "pid": os.getpid()}), flush=True)
    while not stopping.wait(0.2):
        pass
    Path(args.stats).write_text(json.dumps(stats.as_dict()))
    return 0


class Proxy:
    """The delaying proxy in a process of its own: adds *rtt_ms* to every round trip (half
    each way) and counts client commands and round trips (a client turn after a reply)."""

    def __init__(self, target_url: str, rtt_ms: float, work_dir: Path) -> None:
        from urllib.parse import urlsplit

        parts = urlsplit(target_url)
        self.stats_file = work_dir / f"proxy-{time.monotonic_ns()}.json"
        cmd = [sys.executable, str(Path(__file__).resolve()), "proxy"]
        cmd += ["--target", f"{parts.hostname}:{parts.port}", "--delay-ms", str(rtt_ms)]
        cmd += ["--stats", str(self.stats_file)]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            self.proc.wait()
            raise RuntimeError("the delaying proxy did not start")
        self.port = int(json.loads(line)["port"])
        self.url = f"redis://127.0.0.1:{self.port}{parts.path or '/0'}"
        self.pid = self.proc.pid

    def stop(self) -> dict[str, int]:
        """Stop the proxy; returns what it counted."""
        stop_process(self.proc)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        try:
            return dict(json.loads(self.stats_file.read_text()))
        except (OSError, ValueError):
            return {}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench/_common.py")
    sub = parser.add_subparsers(dest="command", required=True)
    proxy = sub.add_parser("proxy", help="a delaying TCP proxy that counts Redis commands")
    proxy.add_argument("--listen-port", type=int, default=0)
    proxy.add_argument("--target", required=True, help="HOST:PORT (loopback)")
    proxy.add_argument("--delay-ms", type=float, default=0.0, help="added round-trip time")
    proxy.add_argument("--stats", required=True, help="JSON file written on exit")
    args = parser.parse_args(argv)
    return _proxy_main(args)


if __name__ == "__main__":
    sys.exit(main())
