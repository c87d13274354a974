"""Make a real Redis refuse the frontier with an error reply of a chosen class, and stop it: each
class the way it happens in production (a failed save, memory, an ACL or a password changed, a
long script, a replica, a cluster slot down or moving).

- :class:`RefusingRedis`: valkey-server with its protected configs and ``DEBUG`` enabled, and
  two users: ``admin`` (the test's) and ``crawler`` (the nodes', :data:`CRAWLER_PASSWORD`).
- :func:`node_url`: the URL a node uses for a class (the default user for ``NOAUTH``).
- :func:`refusing`: a context manager: the server refuses with that class until it exits;
  yields the URL that refuses (a replica's for ``READONLY`` / ``MASTERDOWN``).
"""

from __future__ import annotations

import contextlib
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import redis

from distcrawl.base.processes import free_port
from distcrawl.servers.process import RedisServer

__all__ = [
    "ADMIN_PASSWORD",
    "CRAWLER_PASSWORD",
    "NODE_CLASSES",
    "RefusingRedis",
    "node_url",
    "refusing",
]

ADMIN_PASSWORD = "admin-pw"
CRAWLER_PASSWORD = "crawler-pw"
#: the classes :func:`refusing` makes a single server (and its replica) answer
NODE_CLASSES = (
    "OOM",
    "MISCONF",
    "NOREPLICAS",
    "BUSY",
    "LOADING",
    "READONLY",
    "MASTERDOWN",
    "NOAUTH",
    "WRONGPASS",
    "NOPERM",
)


class RefusingRedis(RedisServer):
    """A Redis a test may make refuse writes in every way production does; its users come
    from an ACL file (so a restarted server has them while it loads its data)."""

    name = "redis-refusing"
    #: more arguments of the server's command line, for its next start
    extra: tuple[str, ...] = ()

    def command(self) -> list[str]:
        acl = self.data_dir.parent / "users.acl"
        acl.write_text(
            "user default on nopass ~* &* +@all\n"
            f"user admin on >{ADMIN_PASSWORD} ~* &* +@all\n"
            f"user crawler on >{CRAWLER_PASSWORD} ~* &* +@all\n"
        )
        return [
            *super().command(),
            "--enable-protected-configs", "yes",
            "--enable-debug-command", "yes",
            "--aclfile", str(acl),
            *self.extra,
        ]  # fmt: skip

    def admin(self) -> redis.Redis:
        return redis.Redis(
            host=self.host, port=self.port, username="admin", password=ADMIN_PASSWORD
        )


def node_url(server: RedisServer, code: str = "") -> str:
    """The URL a node uses: as ``crawler``, or as the default user for ``NOAUTH`` (a node that
    gives no password, on a server that comes to ask for one)."""
    if code == "NOAUTH":
        return server.url
    return f"redis://crawler:{CRAWLER_PASSWORD}@{server.host}:{server.port}/0"


def _wait(condition: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("the server never reached the state the test needs")
        time.sleep(0.05)


def _config(admin: redis.Redis, name: str) -> str:
    return str(admin.config_get(name)[name])


@contextlib.contextmanager
def refusing(server: RefusingRedis, code: str, *, hold: float = 2.0) -> Iterator[str]:
    """*server* answers the nodes with *code* until the block ends; yields the URL that does.
    ``hold``: seconds ``BUSY`` and ``LOADING`` last at most (a running script, a reload)."""
    admin = server.admin()
    try:
        with _REFUSALS[code](server, admin, hold) as url:
            yield url
    finally:
        admin.close()


@contextlib.contextmanager
def _oom(server: RefusingRedis, admin: redis.Redis, hold: float) -> Iterator[str]:
    # maxmemory under the memory in use, noeviction: no write is taken
    admin.config_set("maxmemory-policy", "noeviction")
    admin.config_set("maxmemory", 1)
    try:
        yield node_url(server)
    finally:
        admin.config_set("maxmemory", 0)


@contextlib.contextmanager
def _misconf(server: RefusingRedis, admin: redis.Redis, hold: float) -> Iterator[str]:
    # a background save fails (its directory vanished: a full or lost disk) with
    # stop-writes-on-bgsave-error yes: Redis stops taking writes until a save succeeds
    saved_dir, saved_save = _config(admin, "dir"), _config(admin, "save")
    gone = Path(tempfile.mkdtemp(prefix="misconf-"))
    admin.config_set("stop-writes-on-bgsave-error", "yes")
    admin.config_set("save", "3600 1")
    admin.config_set("dir", str(gone))
    gone.rmdir()
    admin.bgsave()
    _wait(lambda: admin.info("persistence")["rdb_last_bgsave_status"] == "err")
    try:
        yield node_url(server)
    finally:
        admin.config_set("dir", saved_dir)
        _wait(lambda: not admin.info("persistence")["rdb_bgsave_in_progress"])
        admin.bgsave()
        _wait(lambda: admin.info("persistence")["rdb_last_bgsave_status"] == "ok")
        admin.config_set("save", saved_save)


@contextlib.contextmanager
def _noreplicas(server: RefusingRedis, admin: redis.Redis, hold: float) -> Iterator[str]:
    admin.config_set("min-replicas-to-write", 1)
    try:
        yield node_url(server)
    finally:
        admin.config_set("min-replicas-to-write", 0)


@contextlib.contextmanager
def _busy(server: RefusingRedis, admin: redis.Redis, hold: float) -> Iterator[str]:
    # a read-only script that outlives busy-reply-threshold: everyone else gets BUSY until it
    # ends or SCRIPT KILL ends it
    before = _config(admin, "busy-reply-threshold")
    admin.config_set("busy-reply-threshold", 50)
    script = (
        "local stop = tonumber(redis.call('TIME')[1]) + tonumber(ARGV[1]) "
        "while tonumber(redis.call('TIME')[1]) < stop do end return 1"
    )
    runner = redis.Redis(
        host=server.host,
        port=server.port,
        username="admin",
        password=ADMIN_PASSWORD,
        socket_timeout=hold + 60,
    )
    ended = threading.Event()

    def run() -> None:
        with contextlib.suppress(redis.RedisError):
            runner.eval(script, 0, int(hold) + 1)
        ended.set()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    probe = server.admin()

    def busy() -> bool:
        try:
            probe.ping()
        except redis.ResponseError as exc:
            return "BUSY" in str(exc)
        return False

    try:
        _wait(busy)
        yield node_url(server)
    finally:
        with contextlib.suppress(redis.RedisError):
            probe.script_kill()
        thread.join(hold + 60)
        probe.close()
        runner.close()
        admin.config_set("busy-reply-threshold", before)


@contextlib.contextmanager
def _loading(server: RefusingRedis, admin: redis.Redis, hold: float) -> Iterator[str]:
    # a restart that reads enough keys, each slowly: Redis answers LOADING meanwhile
    keys = 2000
    pipe = admin.pipeline(transaction=False)
    for i in range(keys):
        pipe.set(f"loading-filler:{i}", "x")
    pipe.execute()
    admin.bgrewriteaof()  # the keys in the append-only file's RDB base, loaded key by key
    _wait(lambda: not admin.info("persistence")["aof_rewrite_in_progress"])
    server.stop()
    server.extra = (
        "--key-load-delay", str(int(hold * 1_000_000 / keys)),
        "--loading-process-events-interval-bytes", "1024",
    )  # fmt: skip
    starting = threading.Thread(target=server.start)
    starting.start()
    probe = redis.Redis.from_url(node_url(server), socket_timeout=10)

    def loading() -> bool:
        try:
            probe.get("loading-probe")
        except redis.exceptions.BusyLoadingError:
            return True
        except redis.ConnectionError:
            pass
        return False

    try:
        _wait(loading)
        yield node_url(server)
    finally:
        starting.join(hold + 60)
        server.extra = ()
        probe.close()
        after = server.admin()
        try:
            after.delete(*(f"loading-filler:{i}" for i in range(keys)))
        finally:
            after.close()


@contextlib.contextmanager
def _replica(
    server: RefusingRedis, admin: redis.Redis, *, serve_stale: bool
) -> Iterator[RefusingRedis]:
    """A replica of a master out of reach (a failover left it behind)."""
    replica = RefusingRedis(
        data_dir=server.data_dir.parent / "replica" / "data",
        log_path=server.data_dir.parent / "replica" / "valkey.log",
    ).start()
    try:
        r = replica.admin()
        try:
            r.config_set("replica-serve-stale-data", "yes" if serve_stale else "no")
            r.execute_command("REPLICAOF", "127.0.0.1", free_port())
        finally:
            r.close()
        yield replica
    finally:
        replica.stop()


@contextlib.contextmanager
def _readonly(server: RefusingRedis, admin: redis.Redis, hold: float) -> Iterator[str]:
    with _replica(server, admin, serve_stale=True) as replica:
        yield node_url(replica)


@contextlib.contextmanager
def _masterdown(server: RefusingRedis, admin: redis.Redis, hold: float) -> Iterator[str]:
    with _replica(server, admin, serve_stale=False) as replica:
        yield node_url(replica)


@contextlib.contextmanager
def _noauth(server: RefusingRedis, admin: redis.Redis, hold: float) -> Iterator[str]:
    # a password set on the default user; its connections are closed and must authenticate
    admin.execute_command("ACL", "SETUSER", "default", "resetpass", ">now-required")
    admin.execute_command("CLIENT", "KILL", "USER", "default")
    try:
        yield node_url(server, "NOAUTH")
    finally:
        admin.execute_command("ACL", "SETUSER", "default", "resetpass", "nopass")


@contextlib.contextmanager
def _wrongpass(server: RefusingRedis, admin: redis.Redis, hold: float) -> Iterator[str]:
    # the crawler's password rotated: its connections are closed and authenticate again
    admin.execute_command("ACL", "SETUSER", "crawler", "resetpass", ">rotated")
    admin.execute_command("CLIENT", "KILL", "USER", "crawler")
    try:
        yield node_url(server)
    finally:
        admin.execute_command("ACL", "SETUSER", "crawler", "resetpass", f">{CRAWLER_PASSWORD}")


@contextlib.contextmanager
def _noperm(server: RefusingRedis, admin: redis.Redis, hold: float) -> Iterator[str]:
    # the crawler's ACL changed: it may run no command now
    admin.execute_command("ACL", "SETUSER", "crawler", "-@all")
    try:
        yield node_url(server)
    finally:
        admin.execute_command("ACL", "SETUSER", "crawler", "+@all")


_REFUSALS: dict[str, Callable[[RefusingRedis, redis.Redis, float], Any]] = {
    "OOM": _oom,
    "MISCONF": _misconf,
    "NOREPLICAS": _noreplicas,
    "BUSY": _busy,
    "LOADING": _loading,
    "READONLY": _readonly,
    "MASTERDOWN": _masterdown,
    "NOAUTH": _noauth,
    "WRONGPASS": _wrongpass,
    "NOPERM": _noperm,
}
assert set(_REFUSALS) == set(NODE_CLASSES)
