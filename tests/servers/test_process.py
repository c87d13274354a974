"""Starting a real server on a port chosen free: another process can take the port between
the choice and the bind, and the server then starts on other ports instead of failing."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from distcrawl.servers.cluster import ClusterNodeServer
from distcrawl.servers.process import (
    PORT_ATTEMPTS,
    MongoServer,
    RedisServer,
    ServerProcess,
    ServiceError,
)


@pytest.fixture
def taken() -> Iterator[int]:
    """A port another process listens on."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


def _still_listening(port: int) -> bool:
    with socket.create_connection(("127.0.0.1", port), timeout=2):
        return True


@pytest.mark.parametrize(
    ("kind", "attribute"),
    [
        (RedisServer, "port"),
        (MongoServer, "port"),
        (ClusterNodeServer, "port"),
        (ClusterNodeServer, "bus_port"),
    ],
)
def test_a_chosen_port_taken_before_the_bind_moves_the_server_to_free_ones(
    tmp_path: Path, taken: int, kind: type[ServerProcess], attribute: str
) -> None:
    server = kind(data_dir=tmp_path / "data")
    setattr(server, attribute, taken)  # what a race leaves: the chosen port is someone else's
    try:
        server.start()
        assert server.ping()
        assert taken not in (server.port, getattr(server, "bus_port", None))
        assert "Address already in use" in server.log_path.read_text(errors="replace")
    finally:
        server.stop()
    assert _still_listening(taken)


def test_a_port_taken_by_another_redis_is_not_mistaken_for_ours(tmp_path: Path) -> None:
    other = RedisServer(data_dir=tmp_path / "other" / "data").start()
    server = RedisServer(data_dir=tmp_path / "ours" / "data")
    server.port = other.port
    try:
        server.start()
        assert server.port != other.port
        assert server.pid is not None and server.answers_as(server.pid)
        assert other.pid is not None and other.answers_as(other.pid)
    finally:
        server.stop()
        other.stop()


def test_a_port_the_caller_gave_is_never_moved_and_the_error_names_it(
    tmp_path: Path, taken: int
) -> None:
    server = RedisServer(data_dir=tmp_path / "data", port=taken)
    with pytest.raises(ServiceError, match=rf"could not bind its port \(127\.0\.0\.1:{taken}\)"):
        server.start()
    assert server.port == taken
    assert not server.running


def test_a_server_that_answered_once_restarts_on_its_own_port(tmp_path: Path, taken: int) -> None:
    server = ClusterNodeServer(data_dir=tmp_path / "data").start()
    port, bus = server.port, server.bus_port
    try:
        server.restart()
        assert (server.port, server.bus_port) == (port, bus)
        server.stop()
        server.port = taken  # others know its address now: it must not wander off
        with pytest.raises(ServiceError, match="another process took it"):
            server.start()
        assert server.port == taken
    finally:
        server.stop()


class _Unlucky(RedisServer):
    """Every new choice lands on the same taken port."""

    def __init__(self, taken: int, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.taken = taken
        self.choices = 0
        self.port = taken

    def choose_ports(self) -> None:
        self.choices += 1
        self.port = self.taken


def test_starting_gives_up_after_its_attempts_with_a_clear_error(
    tmp_path: Path, taken: int
) -> None:
    server = _Unlucky(taken, data_dir=tmp_path / "data")
    with pytest.raises(ServiceError, match="another process took it"):
        server.start()
    assert server.choices == PORT_ATTEMPTS - 1
    assert server.log_path.read_text().count("Address already in use") == PORT_ATTEMPTS
