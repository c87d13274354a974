"""Small process helpers: free ports, whether a PID lives, stopping a PID we started."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

__all__ = ["free_port", "pid_alive", "pid_runs", "port_free", "spawned", "terminate_pid"]

#: seconds to wait for a process to exit after SIGTERM before SIGKILL (SecantusDB needs ~3 s)
DEFAULT_STOP_TIMEOUT = 20.0

# Detached servers we started: keeping the Popen objects alive stops the interpreter from
# warning that they "are still running" and lets stop() reap them instead of leaving zombies.
spawned: dict[int, subprocess.Popen[bytes]] = {}


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that nothing listens on right now (the caller must still handle a race)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def port_free(port: int, host: str = "127.0.0.1") -> bool:
    """Whether nothing listens on *port* right now (a bind succeeds)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
        return True


def _reap(pid: int) -> None:
    proc = spawned.get(pid)
    if proc is not None:
        if proc.poll() is not None:
            del spawned[pid]
        return
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def pid_alive(pid: int) -> bool:
    """Whether process *pid* runs (a zombie child of ours is reaped and counts as gone)."""
    _reap(pid)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(OSError):
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rpartition(")")[2].split()[0] != "Z"
    return True


def pid_runs(pid: int, marker: str) -> bool:
    """Whether *pid* is alive and its command line mentions *marker* (guards against PID reuse)."""
    if not pid_alive(pid):
        return False
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return True  # no /proc (macOS): trust the state file
    return marker.encode() in cmdline


def terminate_pid(pid: int, timeout: float = DEFAULT_STOP_TIMEOUT) -> None:
    """SIGTERM *pid*, wait up to *timeout* for it to exit, then SIGKILL it."""
    for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 5.0)):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            break
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if not pid_alive(pid):
                return
            time.sleep(0.05)
    spawned.pop(pid, None)
