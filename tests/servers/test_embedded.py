"""Embedded services: start-or-reuse across processes, durability across restarts, masking, the
Scrapy add-on, the ``distcrawl services`` command, and the server fixtures themselves."""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pymongo
import pytest
import redis
from crawl_nodes import Node, assert_each_product_once, wait_for
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scrapy.utils.test import get_crawler

from distcrawl import cli
from distcrawl.base.processes import pid_alive
from distcrawl.base.urls import mask_url
from distcrawl.node.embedded import EmbeddedServices
from distcrawl.servers.embedded import (
    ensure_mongo,
    ensure_redis,
    resolve_home,
    services_status,
    stop_services,
)
from distcrawl.servers.process import MongoServer, RedisServer

ENSURE_SCRIPT = """
import sys
from pathlib import Path
from distcrawl.servers.embedded import ensure_redis, ensure_mongo
ensure = ensure_redis if sys.argv[1] == "redis" else ensure_mongo
print(ensure(Path(sys.argv[2])))
"""


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A home for embedded services, whose servers are stopped after the module."""
    path = tmp_path_factory.mktemp("home")
    try:
        yield path
    finally:
        stop_services(path)


def _ensure_in_processes(kind: str, home: Path, count: int) -> list[str]:
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", ENSURE_SCRIPT, kind, str(home)],
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(count)
    ]
    outputs = [proc.communicate(timeout=120)[0].strip() for proc in procs]
    assert all(proc.returncode == 0 for proc in procs)
    return outputs


def test_two_processes_starting_at_once_share_one_redis(home: Path) -> None:
    urls = _ensure_in_processes("redis", home, 2)
    assert urls[0] == urls[1]
    assert urls[0].startswith("redis://127.0.0.1:")
    assert ensure_redis(home) == urls[0]  # and this process reuses it too
    client = redis.Redis.from_url(urls[0])
    try:
        assert client.ping()
        assert client.config_get("appendonly")["appendonly"] == "yes"
    finally:
        client.close()


def test_two_processes_starting_at_once_share_one_mongo(home: Path) -> None:
    uris = _ensure_in_processes("mongo", home, 2)
    assert uris[0] == uris[1]
    assert uris[0].endswith("/catalog?directConnection=true")
    assert ensure_mongo(home) == uris[0]
    client: pymongo.MongoClient[dict[str, object]] = pymongo.MongoClient(uris[0])
    try:
        assert client.get_default_database().name == "catalog"
        client.get_default_database().probe.insert_one({"ok": 1})
    finally:
        client.close()


def test_embedded_redis_that_died_is_restarted_with_its_data(home: Path) -> None:
    url = ensure_redis(home)
    client = redis.Redis.from_url(url)
    client.rpush("catalog:start_urls", b"https://shop.example/")
    client.close()
    state = json.loads((home / "redis.json").read_text())
    os.kill(state["pid"], signal.SIGTERM)  # a clean stop flushes the append-only file
    deadline = time.monotonic() + 10
    while redis_answers_at(url) and time.monotonic() < deadline:
        time.sleep(0.05)
    new_url = ensure_redis(home)
    client = redis.Redis.from_url(new_url)
    try:
        assert client.lrange("catalog:start_urls", 0, -1) == [b"https://shop.example/"]
    finally:
        client.close()


def redis_answers_at(url: str) -> bool:
    client = redis.Redis.from_url(url, socket_connect_timeout=0.2)
    try:
        return bool(client.ping())
    except redis.ConnectionError:
        return False
    finally:
        client.close()


def test_addon_fills_empty_urls_with_the_embedded_servers(
    home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="distcrawl.node.embedded")
    crawler = get_crawler(
        settings_dict={
            "ADDONS": {EmbeddedServices: 0},
            "DISTCRAWL_HOME": str(home),
            "REDIS_URL": "",
            "MONGO_URI": "",
        }
    )
    assert crawler.settings["REDIS_URL"] == ensure_redis(home)
    assert crawler.settings["MONGO_URI"] == ensure_mongo(home)
    lines = [r.getMessage() for r in caplog.records if r.name == "distcrawl.node.embedded"]
    assert len(lines) == 1
    assert "Redis redis://127.0.0.1:" in lines[0]
    assert "MongoDB mongodb://127.0.0.1:" in lines[0]
    assert "embedded" in lines[0]


def test_addon_leaves_external_urls_alone_and_masks_them(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="distcrawl.node.embedded")
    crawler = get_crawler(
        settings_dict={
            "ADDONS": {EmbeddedServices: 0},
            "DISTCRAWL_HOME": str(tmp_path),
            "REDIS_URL": "redis://:s3cret@frontier:6379/0",
            "MONGO_URI": "mongodb://crawler:hunter2@store:27017/catalog",
        }
    )
    assert crawler.settings["REDIS_URL"] == "redis://:s3cret@frontier:6379/0"
    (line,) = [r.getMessage() for r in caplog.records if r.name == "distcrawl.node.embedded"]
    assert "s3cret" not in line and "hunter2" not in line
    assert "redis://:***@frontier:6379/0 (external)" in line
    assert "mongodb://crawler:***@store:27017/catalog (external)" in line
    assert not (tmp_path / "redis.json").exists()


def test_services_command_status_start_stop(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["services", "status", "--home", str(tmp_path), "--json"]) == 1
    status = json.loads(capsys.readouterr().out)
    assert status["redis"]["running"] is False
    try:
        assert cli.main(["services", "start", "--home", str(tmp_path), "--json"]) == 0
        started = json.loads(capsys.readouterr().out)
        assert cli.main(["services", "status", "--home", str(tmp_path), "--json"]) == 0
        status = json.loads(capsys.readouterr().out)
        assert status["redis"]["url"] == started["redis_url"]
        assert status["mongo"]["url"] == started["mongo_uri"]
        pids = [status["redis"]["pid"], status["mongo"]["pid"]]
    finally:
        assert cli.main(["services", "stop", "--home", str(tmp_path), "--json"]) == 0
    assert sorted(json.loads(capsys.readouterr().out)["stopped"]) == ["mongo", "redis"]
    # gone (a zombie waiting for its parent to reap it is gone too: /proc still lists it)
    assert not any(pid_alive(pid) for pid in pids)
    assert services_status(tmp_path)["mongo"]["running"] is False


@pytest.mark.parametrize(
    ("url", "masked"),
    [
        ("redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"),
        ("redis://:secret@host:6379/0", "redis://:***@host:6379/0"),
        ("rediss://user:secret@host:6380", "rediss://user:***@host:6380"),
        ("mongodb://u:p%40ss@h1:1,h2:2/db?replicaSet=rs", "mongodb://u:***@h1:1,h2:2/db?replicaSet=rs"),
        ("mongodb://user@host/db", "mongodb://user@host/db"),
        ("redis://host/0?password=secret&db=1", "redis://host/0?password=***&db=1"),
        ("mongodb+srv://a:b@cluster.example/?directConnection=true",
         "mongodb+srv://a:***@cluster.example/?directConnection=true"),
        ("", ""),
    ],
)  # fmt: skip
def test_mask_url(url: str, masked: str) -> None:
    assert mask_url(url) == masked


def test_resolve_home_prefers_argument_then_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DISTCRAWL_HOME", str(tmp_path / "env"))
    assert resolve_home(tmp_path / "arg") == tmp_path / "arg"
    assert resolve_home(None) == tmp_path / "env"
    monkeypatch.delenv("DISTCRAWL_HOME")
    monkeypatch.chdir(tmp_path)
    assert resolve_home(None) == tmp_path / ".distcrawl"


# --------------------------------------------------------------------------- the fixtures


def test_redis_fixture_append_only_file_survives_restart(redis_server: RedisServer) -> None:
    client = redis_server.client()
    client.zadd("catalog:queue", {b"req-1": 1.0})
    client.close()
    port = redis_server.port
    redis_server.restart()
    assert redis_server.port == port
    client = redis_server.client()
    try:
        assert client.zrange("catalog:queue", 0, -1) == [b"req-1"]
    finally:
        client.close()


def test_redis_url_fixture_gives_an_empty_database(redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url)
    try:
        assert client.dbsize() == 0
        client.set("left-behind", 1)
    finally:
        client.close()


def test_redis_url_fixture_restarts_a_stopped_server_and_empties_it(
    redis_server: RedisServer, redis_cli: Path, request: pytest.FixtureRequest
) -> None:
    # one test, in order: a key left behind, the server stopped, then the fixture asked for
    client = redis_server.client()
    client.set("left-behind", 1)
    client.close()
    redis_server.stop()
    assert not redis_server.ping()
    redis_url = request.getfixturevalue("redis_url")
    out = subprocess.run(
        [str(redis_cli), "-u", redis_url, "DBSIZE"], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "0"


def test_redis_cli_fixture_pushes_a_seed(redis_url: str, redis_cli: Path) -> None:
    subprocess.run(
        [str(redis_cli), "-u", redis_url, "LPUSH", "catalog:start_urls", "https://a.example/"],
        check=True,
        capture_output=True,
    )
    client = redis.Redis.from_url(redis_url)
    try:
        assert client.lrange("catalog:start_urls", 0, -1) == [b"https://a.example/"]
    finally:
        client.close()


def test_mongo_fixture_keeps_data_across_restart(mongo_server: MongoServer, mongo_uri: str) -> None:
    client: pymongo.MongoClient[dict[str, object]] = pymongo.MongoClient(mongo_uri)
    database = client.get_default_database()
    database.products.insert_one({"url": "https://a.example/p/1"})
    client.close()
    mongo_server.restart()
    client = mongo_server.client()
    try:
        assert client[database.name].products.count_documents({}) == 1
    finally:
        client.close()


def test_mongo_uri_fixture_names_a_fresh_database(mongo_uri: str) -> None:
    client: pymongo.MongoClient[dict[str, object]] = pymongo.MongoClient(mongo_uri)
    try:
        assert "directConnection=true" in mongo_uri
        assert client.get_default_database().list_collection_names() == []
    finally:
        client.close()


# --------------------------------------------------------------------------- nodes as users

JOIN_SCRIPT = """
import json, sys
from pathlib import Path
from distcrawl.servers.embedded import join_services, leave_services
home = Path(sys.argv[1])
print(json.dumps(join_services(home)), flush=True)
sys.stdin.readline()  # until the test says leave
print(json.dumps(leave_services(home)), flush=True)
"""


class LocalNode:
    """A process that uses the embedded servers as a node does, and leaves when told."""

    def __init__(self, home: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", JOIN_SCRIPT, str(home)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        self.joined = json.loads(self.proc.stdout.readline())

    def leave(self) -> list[str]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write("\n")
        self.proc.stdin.flush()
        stopped = json.loads(self.proc.stdout.readline())
        assert self.proc.wait(timeout=120) == 0
        return list(stopped)


def test_the_last_local_node_out_stops_the_servers_a_node_started(tmp_path: Path) -> None:
    first = LocalNode(tmp_path)
    try:
        assert first.joined["redis"][1] is True and first.joined["mongo"][1] is True
        second = LocalNode(tmp_path)
        try:
            assert second.joined["redis"] == [first.joined["redis"][0], False]
            assert first.leave() == []  # the other node still uses them
            assert services_status(tmp_path)["redis"]["running"]
        finally:
            stopped = second.leave()
        assert sorted(stopped) == ["mongo", "redis"]
        status = services_status(tmp_path)
        assert not status["redis"]["running"] and not status["mongo"]["running"]
    finally:
        for node in (first,):
            if node.proc.poll() is None:
                node.proc.kill()
        stop_services(tmp_path)


def test_a_node_that_died_does_not_keep_the_servers_in_use(tmp_path: Path) -> None:
    dead = LocalNode(tmp_path)
    try:
        dead.proc.kill()  # kill -9: it never leaves
        dead.proc.wait()
        survivor = LocalNode(tmp_path)
        assert survivor.joined["redis"][1] is False  # reused
        assert sorted(survivor.leave()) == ["mongo", "redis"]
    finally:
        stop_services(tmp_path)


def test_a_node_never_stops_servers_started_by_hand(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["services", "start", "--home", str(tmp_path), "--json"]) == 0
    capsys.readouterr()
    try:
        node = LocalNode(tmp_path)
        assert node.joined["redis"][1] is False
        assert node.leave() == []
        assert services_status(tmp_path)["redis"]["running"]
    finally:
        assert cli.main(["services", "stop", "--home", str(tmp_path), "--json"]) == 0


@pytest.mark.slow
def test_a_node_without_redis_url_says_so_first_and_stops_what_it_started(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "MONGO_URI")}
    env.update(SCRAPY_SETTINGS_MODULE="distcrawl.settings", DISTCRAWL_HOME=str(tmp_path / "home"))
    log = tmp_path / "node.log"
    try:
        done = subprocess.run(
            [sys.executable, "-m", "scrapy", "crawl", "catalog", "-s", "CLOSESPIDER_TIMEOUT=1",
             "-s", f"LOG_FILE={log}"],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=300,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-2000:]
        lines = log.read_text().splitlines()
        (where,) = [i for i, line in enumerate(lines) if "Node uses Redis" in line]
        first = [line for line in lines[:where] if line[:4].isdigit()]
        assert len(first) <= 3  # only Scrapy's own start and versions lines come before it
        assert "WARNING: Node uses Redis redis://127.0.0.1:" in lines[where]
        assert "embedded, started by this node" in lines[where]
        assert "no REDIS_URL or MONGO_URI given" in lines[where]
        assert "Stopped the embedded redis and mongo" in lines[-1]
        status = services_status(tmp_path / "home")
        assert not status["redis"]["running"] and not status["mongo"]["running"]
    finally:
        stop_services(tmp_path / "home")


# --------------------------------------------------------------------------- the recorded ports


def _kill(home: Path, name: str) -> None:
    """kill -9 the server of *home* named *name*, as a crash would."""
    state = json.loads((home / f"{name}.json").read_text())
    os.kill(int(state["pid"]), signal.SIGKILL)
    deadline = time.monotonic() + 30
    while pid_alive(int(state["pid"])) and time.monotonic() < deadline:
        time.sleep(0.05)


#: what may happen to a home's servers, in any order
EVENTS = ("kill redis", "kill mongo", "services stop", "services start", "node joins and leaves")


@settings(
    max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(events=st.lists(st.sampled_from(EVENTS), min_size=3, max_size=6))
def test_servers_come_back_on_the_ports_their_home_recorded_whatever_happened(
    tmp_path_factory: pytest.TempPathFactory, events: list[str]
) -> None:
    home = tmp_path_factory.mktemp("ports")
    first = {"redis": ensure_redis(home), "mongo": ensure_mongo(home)}
    try:
        for event in events:
            if event.startswith("kill "):
                name = event.split()[1]
                if services_status(home)[name]["running"]:
                    _kill(home, name)
            elif event == "services stop":
                stop_services(home)
            elif event == "services start":
                assert {"redis": ensure_redis(home), "mongo": ensure_mongo(home)} == first
            else:
                node = LocalNode(home)
                assert {n: node.joined[n][0] for n in ("redis", "mongo")} == first
                node.leave()
        assert {"redis": ensure_redis(home), "mongo": ensure_mongo(home)} == first
    finally:
        stop_services(home)


def test_a_recorded_port_another_process_took_is_given_up_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    url = ensure_redis(tmp_path)
    port = int(json.loads((tmp_path / "redis.json").read_text())["port"])
    stop_services(tmp_path)
    squatter = socket.socket()
    squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    squatter.bind(("127.0.0.1", port))
    squatter.listen()
    try:
        with caplog.at_level(logging.WARNING, logger="distcrawl.servers.embedded"):
            moved = ensure_redis(tmp_path)
        assert moved != url and redis_answers_at(moved)
        (line,) = [r.getMessage() for r in caplog.records]
        assert f"port {port}" in line and "nodes started before must be given its new URL" in line
    finally:
        squatter.close()
        stop_services(tmp_path)
    assert ensure_redis(tmp_path) == moved  # the new port is the one recorded now
    stop_services(tmp_path)


@pytest.mark.slow
def test_a_running_node_reconnects_to_servers_started_again_by_hand(
    tmp_path: Path, shop_factory: Any
) -> None:
    """`distcrawl services start` after both servers died: the node still running carries on
    with the same URLs, and the crawl ends with every product stored."""
    home = tmp_path / "home"
    shop = shop_factory(products=120, latency_ms=150)
    urls = {"redis": ensure_redis(home), "mongo": ensure_mongo(home)}
    node = Node(
        redis_url=urls["redis"],
        mongo_uri=urls["mongo"],
        log_dir=tmp_path,
        node_id="back",
        settings={"CONCURRENT_REQUESTS": "4"},
    )
    try:
        client = redis.Redis.from_url(urls["redis"])
        client.lpush("catalog:start_urls", shop.url)
        client.close()
        assert wait_for(lambda: len(shop.request_log()) > 20, 120), node.log()[-3000:]
        _kill(home, "redis")
        _kill(home, "mongo")
        assert wait_for(lambda: "Redis unavailable" in node.log(), 120)
        assert cli.main(["services", "start", "--home", str(home), "--json"]) == 0
        assert node.wait() == 0, node.log()[-3000:]
        assert "Redis is back" in node.log()
        assert_each_product_once(urls["mongo"], shop)
    finally:
        node.kill()
        stop_services(home)
