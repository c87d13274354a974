"""A delaying TCP proxy that adds round-trip time to Redis and counts its commands and round
trips. ``python bench/_proxy.py proxy --target HOST:PORT --delay-ms MS --stats FILE`` runs it
on its own (that is how :class:`Proxy` starts it)."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import queue
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from _processes import stop_process


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
    parser = argparse.ArgumentParser(prog="bench/_proxy.py")
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
