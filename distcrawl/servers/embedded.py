"""Embedded Redis and MongoDB for one machine: start a real server, or reuse the one another node
on the same machine already started.

Everything lives under one *home* directory (``DISTCRAWL_HOME``; default ``.distcrawl/`` in the
current working directory, so a project checkout keeps its own crawl state)::

    <home>/redis/        Redis data directory (append-only file: a restart loses no queued work)
    <home>/redis.json    state of the running Redis: pid, port, url
    <home>/redis.port    the port it was first started on: it starts there again
    <home>/redis.log     its log
    <home>/redis.lock    fcntl lock: nodes starting at the same moment agree on one server
    <home>/mongo/ ...    the same for MongoDB (SecantusDB's WiredTiger storage path)

A server is reused when its state file names a port that answers (``PING`` / ``ping``).
Servers are started detached (a session of their own), so a server started by one node serves
the other nodes of the machine after that one exits. They bind 127.0.0.1 only, on a free port
the first time; a server that died or was stopped starts again on the port its home recorded,
so the nodes still running reconnect to it (on another port only when that one is taken, with
a warning saying so).

Nodes register as users of the servers (``<home>/users/<pid>.json``) and leave when they exit;
the last node to leave stops the servers a node started (:func:`leave_services`). Servers
started by hand (``distcrawl services start``), by the demo or by a command keep running until
``distcrawl services stop``.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from distcrawl.base.config import SETTINGS
from distcrawl.base.processes import pid_alive, pid_runs, port_free, terminate_pid
from distcrawl.servers.process import (
    SERVER_START_TIMEOUT,
    MongoServer,
    RedisServer,
    ServerProcess,
    ServiceError,
    mongo_answers,
    redis_answers,
)

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = [
    "DEFAULT_HOME",
    "HOME_ENV",
    "ensure_mongo",
    "ensure_redis",
    "join_service",
    "join_services",
    "leave_services",
    "resolve_home",
    "services_status",
    "stop_services",
]

logger = logging.getLogger(__name__)

#: environment variable (and setting) naming the home directory of the embedded services
HOME_ENV = "DISTCRAWL_HOME"
#: home directory when neither the setting nor the environment names one (relative to the cwd)
DEFAULT_HOME = ".distcrawl"
#: database name in the URI of the embedded MongoDB
DEFAULT_MONGO_DATABASE = "catalog"
#: how many free ports to try when another process grabs the port between pick and bind
START_ATTEMPTS = 3


def resolve_home(home: str | os.PathLike[str] | None = None) -> Path:
    """The home directory: *home* if given, else ``$DISTCRAWL_HOME``, else ``./.distcrawl``."""
    value = (
        os.fspath(home) if home else SETTINGS.from_environment(os.environ, HOME_ENV) or DEFAULT_HOME
    )
    return Path(value).expanduser().resolve()


@contextlib.contextmanager
def _locked(path: Path, timeout: float) -> Iterator[None]:
    """Hold an exclusive fcntl lock on *path* (released if this process dies)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+b") as handle:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise ServiceError(f"timed out waiting for the lock {path}") from None
                time.sleep(0.05)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _read_state(path: Path) -> dict[str, Any] | None:
    try:
        state = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return state if isinstance(state, dict) else None


def _write_state(path: Path, state: dict[str, Any]) -> None:
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(state, indent=2) + "\n")
    os.replace(tmp, path)


def _server(kind: type[ServerProcess], home: Path, port: int | None = None) -> ServerProcess:
    return kind(data_dir=home / kind.name, port=port, log_path=home / f"{kind.name}.log")


#: who started a server, as its state file says: a node (the last node out stops it) or
#: anything else (``distcrawl services start``, the demo, a command: it runs until stopped)
BY_NODE = "node"
BY_HAND = "services"


def _ensure(
    kind: type[ServerProcess], home: Path, *, by: str = BY_HAND, user: bool = False
) -> tuple[ServerProcess, bool]:
    """The running server of *kind* under *home*, started if needed (its state file saying
    *by* whom); and whether we started it. *user*: this process registers as a user of the
    servers, under the same lock (a node leaving at that moment cannot stop it meanwhile)."""
    home = resolve_home(home)
    state_path = home / f"{kind.name}.json"
    with _locked(home / f"{kind.name}.lock", timeout=SERVER_START_TIMEOUT + 30):
        if user:
            _register(home)
        state = _read_state(state_path)
        if state is not None:
            server = _server(kind, home, int(state["port"]))
            server.pid = int(state["pid"])
            if server.ping():
                return server, False
            if pid_runs(server.pid, kind.marker):
                # Alive but silent: give it the time a start takes, then replace it (its data
                # directory is locked while it lives, so a second server could not open it).
                deadline = time.monotonic() + 10.0
                while time.monotonic() < deadline:
                    if server.ping():
                        return server, False
                    time.sleep(0.2)
                logger.warning(
                    "Embedded %s (pid %d) does not answer; restarting", kind.name, server.pid
                )
                terminate_pid(server.pid)
            state_path.unlink(missing_ok=True)
        last_error: ServiceError | None = None
        recorded = _recorded_port(home, kind)
        for attempt in range(START_ATTEMPTS):
            port = recorded if attempt == 0 else None
            if port is not None and not port_free(port):
                logger.warning(
                    "The embedded %s's port %d (recorded in %s) is taken by another process; "
                    "starting it on another port: nodes started before must be given its new URL",
                    kind.name,
                    port,
                    home,
                )
                port = None
            server = _server(kind, home, port)
            try:
                server.start(detached=True)
            except ServiceError as exc:  # most likely the port was taken before the bind
                last_error = exc
                if port is not None:
                    logger.warning(
                        "The embedded %s did not start on its recorded port %d (%s); starting "
                        "it on another port: nodes started before must be given its new URL",
                        kind.name,
                        port,
                        exc,
                    )
                continue
            assert server.pid is not None
            _port_file(home, kind).write_text(f"{server.port}\n")
            state = {
                "pid": server.pid,
                "port": server.port,
                "url": _url_of(server),
                "started_at": time.time(),
                "started_by": by,
            }
            _write_state(state_path, state)
            return server, True
        raise ServiceError(f"could not start the embedded {kind.name}: {last_error}")


def _port_file(home: Path, kind: type[ServerProcess]) -> Path:
    return home / f"{kind.name}.port"


def _recorded_port(home: Path, kind: type[ServerProcess]) -> int | None:
    """The port *home* recorded for its server of *kind* (None: never started)."""
    try:
        port = int(_port_file(home, kind).read_text().strip())
    except (OSError, ValueError):
        return None
    return port if 0 < port < 65536 else None


def _started_at(pid: int) -> str | None:
    """When *pid* started (clock ticks since boot, from /proc): a PID reused by another
    process has another. None without /proc."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[19]
    except (OSError, IndexError):
        return None


def _register(home: Path) -> None:
    users = home / "users"
    users.mkdir(parents=True, exist_ok=True)
    pid = os.getpid()
    record = {"pid": pid, "started_at": _started_at(pid)}
    path = users / f"{pid}.json"
    if _read_state(path) != record:
        _write_state(path, record)


def _other_users(home: Path) -> list[int]:
    """The live processes other than this one registered as users (stale records go)."""
    live = []
    for path in (home / "users").glob("*.json"):
        record = _read_state(path) or {}
        pid = int(record.get("pid") or 0)
        if pid == os.getpid():
            continue
        if pid and pid_alive(pid) and record.get("started_at") == _started_at(pid):
            live.append(pid)
        else:
            path.unlink(missing_ok=True)
    return live


def join_services(home: Path) -> dict[str, tuple[str, bool]]:
    """A node's embedded servers under *home*: ``{"redis": (url, started), "mongo": ...}``,
    each reused or started (``started``: by this call), with this process registered as a
    user until :func:`leave_services`."""
    redis_server, redis_started = _ensure(RedisServer, home, by=BY_NODE, user=True)
    mongo_server, mongo_started = _ensure(MongoServer, home, by=BY_NODE, user=True)
    return {
        "redis": (_url_of(redis_server), redis_started),
        "mongo": (_url_of(mongo_server), mongo_started),
    }


def join_service(name: str, home: Path) -> tuple[str, bool]:
    """:func:`join_services` for one server (``"redis"`` or ``"mongo"``)."""
    kind: type[ServerProcess] = RedisServer if name == "redis" else MongoServer
    server, started = _ensure(kind, home, by=BY_NODE, user=True)
    return _url_of(server), started


def leave_services(home: Path) -> list[str]:
    """This process stops using the servers under *home*. Servers a node started stop when no
    other live process uses them; returns the names of those stopped."""
    home = resolve_home(home)
    stopped = []
    for kind in (RedisServer, MongoServer):
        state_path = home / f"{kind.name}.json"
        with _locked(home / f"{kind.name}.lock", timeout=SERVER_START_TIMEOUT + 30):
            state = _read_state(state_path)
            if state is None or state.get("started_by") != BY_NODE or _other_users(home):
                continue
            if pid_runs(int(state["pid"]), kind.marker):
                terminate_pid(int(state["pid"]))
                stopped.append(kind.name)
            state_path.unlink(missing_ok=True)
    (home / "users" / f"{os.getpid()}.json").unlink(missing_ok=True)
    return stopped


def _url_of(server: ServerProcess) -> str:
    if isinstance(server, MongoServer):
        return server.uri_for(DEFAULT_MONGO_DATABASE)
    assert isinstance(server, RedisServer)
    return server.url


def ensure_redis(home: Path) -> str:
    """The URL of the embedded Redis under *home*, started if no live one is recorded there."""
    return _url_of(_ensure(RedisServer, home)[0])


def ensure_mongo(home: Path) -> str:
    """The URI (database ``catalog``, ``directConnection=true``) of the embedded MongoDB under
    *home*, started if no live one is recorded there."""
    return _url_of(_ensure(MongoServer, home)[0])


def stop_services(home: Path) -> list[str]:
    """Stop the embedded servers recorded under *home*; return the names of those stopped."""
    home = resolve_home(home)
    stopped = []
    for kind in (RedisServer, MongoServer):
        state_path = home / f"{kind.name}.json"
        if not state_path.exists():
            continue
        with _locked(home / f"{kind.name}.lock", timeout=SERVER_START_TIMEOUT + 30):
            state = _read_state(state_path)
            if state is not None and pid_runs(int(state["pid"]), kind.marker):
                terminate_pid(int(state["pid"]))
                stopped.append(kind.name)
            state_path.unlink(missing_ok=True)
    return stopped


def services_status(home: Path) -> dict[str, dict[str, Any]]:
    """For each embedded service under *home*: ``running``, ``pid``, ``port``, ``url``."""
    home = resolve_home(home)
    status: dict[str, dict[str, Any]] = {}
    for kind in (RedisServer, MongoServer):
        state = _read_state(home / f"{kind.name}.json") or {}
        url = state.get("url")
        answers = False
        if url:
            answers = redis_answers(url) if kind is RedisServer else mongo_answers(url)
        status[kind.name] = {
            "running": answers,
            "pid": state.get("pid"),
            "port": state.get("port"),
            "url": url,
            "data_dir": str(home / kind.name),
        }
    return status
