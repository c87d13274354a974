"""What a run costs: CPU time of processes and of the machine (from ``/proc``), Redis'
commands, round trips and CPU (``INFO``), Redis' round-trip time."""

from __future__ import annotations

import bisect
import os
import statistics
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

_CLK_TCK = os.sysconf("SC_CLK_TCK")


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
