"""The dashboard over HTTP against a real Redis: reads, /metrics, actions behind the token and
CSRF, the bind refusal, and the Redis cost of a refresh with 10 and with 10,000 sites."""

from __future__ import annotations

import asyncio
import json
import os
import re
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pymongo
import pytest
import redis
import redis.asyncio as aioredis
from crawl_writes import queue_raw
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from distcrawl.frontier.protocol.spec import SCORE_SPAN, level_score
from distcrawl.frontier.store import FrontierKeys, FrontierStore
from distcrawl.ops.products import ProductStore
from distcrawl.web.app import WebConfig
from distcrawl.web.metrics import METRICS, render_metrics
from distcrawl.web.sampler import Sampler
from distcrawl.web.security import HostCheck, UnsafeBind, check_bind
from distcrawl.web.server import DashboardServer

KEYS = FrontierKeys(spider="catalog", start_urls="catalog:start_urls")
#: the shards of the crawl's keys (one when the keys have no shards)
SHARDS: list[Any] = list(getattr(KEYS, "all_shards", lambda: [KEYS])())


def site_shard(site: str) -> Any:
    """The keys of the shard *site* lives in (the crawl's keys when there are no shards)."""
    return KEYS.site_keys(site) if hasattr(KEYS, "site_keys") else KEYS


TOKEN = "correct horse battery staple"


@pytest.fixture
def r(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()


def dashboard(redis_url: str, token: str | None = TOKEN, interval: float = 0.2) -> DashboardServer:
    config = WebConfig(
        keys=KEYS,
        redis_url=redis_url,
        heartbeat_timeout=30.0,
        token=token,
        allow_private=frozenset({"127.0.0.1"}),
        interval=interval,
    )
    return DashboardServer(config, port=0).start()


@pytest.fixture
def web(redis_url: str) -> Iterator[DashboardServer]:
    server = dashboard(redis_url)
    yield server
    server.stop()


def get(url: str) -> tuple[int, bytes, dict[str, str]]:
    try:
        with urllib.request.urlopen(url, timeout=30) as resp:
            return resp.status, resp.read(), dict(resp.headers)
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, exc.read(), dict(exc.headers)


def post(
    server: DashboardServer,
    path: str,
    body: Any = None,
    *,
    token: str | None = TOKEN,
    csrf: str | None = "page",
    origin: str | None = None,
    content_type: str = "application/json",
) -> tuple[int, dict[str, Any]]:
    headers = {"Content-Type": content_type}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    if csrf is not None:
        headers["X-CSRF-Token"] = server.app.state.guard.csrf if csrf == "page" else csrf
    if origin is not None:
        headers["Origin"] = origin
    data = json.dumps(body or {}).encode()
    req = urllib.request.Request(server.url + path.lstrip("/"), data, headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, json.loads(exc.read())


def wait_for(check: Any, what: str, timeout: float = 60.0) -> Any:
    import time

    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def metric_values(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    values = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            values[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return values


# --------------------------------------------------------------------------- binding


def test_binding_beyond_loopback_without_a_token_is_refused(redis_url: str) -> None:
    check_bind("127.0.0.1", None)
    check_bind("::1", None)
    check_bind("localhost", None)
    check_bind("0.0.0.0", TOKEN)
    with pytest.raises(UnsafeBind, match="DISTCRAWL_WEB_TOKEN"):
        check_bind("0.0.0.0", None)
    env = {k: v for k, v in os.environ.items() if k != "DISTCRAWL_WEB_TOKEN"}
    env["REDIS_URL"] = redis_url
    for command in (["distcrawl.cli", "web"], ["scrapy", "web"]):
        done = subprocess.run(
            [sys.executable, "-m", *command, "catalog", "--host", "0.0.0.0"],
            cwd=Path(__file__).resolve().parents[2],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 2, done.stderr
        assert "refusing to serve the dashboard on '0.0.0.0' without a token" in done.stderr


def test_a_blank_or_short_token_is_refused_wherever_the_dashboard_listens(redis_url: str) -> None:
    for host in ("127.0.0.1", "0.0.0.0"):
        for weak in (" ", "\t\n", "", "x" * 15):
            if weak == "" and host == "127.0.0.1":
                continue  # an empty value is no token: a read-only dashboard on loopback
            with pytest.raises(UnsafeBind):
                check_bind(host, weak)
        check_bind(host, "x" * 16)
    env = {k: v for k, v in os.environ.items() if k != "DISTCRAWL_WEB_TOKEN"}
    env["REDIS_URL"] = redis_url
    for token, host, message in (
        (" ", "0.0.0.0", "refusing a blank DISTCRAWL_WEB_TOKEN"),
        (" ", "127.0.0.1", "refusing a blank DISTCRAWL_WEB_TOKEN"),
        ("short-token", "127.0.0.1", "refusing a DISTCRAWL_WEB_TOKEN of 11 characters"),
    ):
        done = subprocess.run(
            [sys.executable, "-m", "distcrawl.cli", "web", "catalog", "--host", host],
            cwd=Path(__file__).resolve().parents[2],
            env={**env, "DISTCRAWL_WEB_TOKEN": token},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 2, done.stderr
        assert message in done.stderr


#: tokens as they come: typed, pasted, read from a file with its final newline
tokens = st.one_of(
    st.text(min_size=14, max_size=40),
    st.from_regex(r"[ \t\n]{0,2}[A-Za-z0-9_-]{16,40}[ \t\r\n]{0,2}", fullmatch=True),
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(token=tokens)
def test_a_token_the_dashboard_accepts_at_start_is_one_a_request_can_match(
    redis_url: str, token: str
) -> None:
    """No token is accepted at start and then never matched: a request carrying it, as an
    HTTP client sends it, may act; any other is refused at start, without showing it."""
    try:
        server = dashboard(redis_url, token=token)
    except UnsafeBind as refused:
        assert token.strip() not in str(refused) or not token.strip()
        return
    try:
        status, body = post(server, "/api/resume", token=token)
        assert status == 200, (token, body)
    finally:
        server.stop()


def test_a_token_with_a_trailing_newline_or_space_is_refused_at_start(redis_url: str) -> None:
    env = {k: v for k, v in os.environ.items() if k != "DISTCRAWL_WEB_TOKEN"}
    env["REDIS_URL"] = redis_url
    for token in (TOKEN + "\n", TOKEN + " ", " " + TOKEN):
        done = subprocess.run(
            [sys.executable, "-m", "distcrawl.cli", "web", "catalog"],
            cwd=Path(__file__).resolve().parents[2],
            env={**env, "DISTCRAWL_WEB_TOKEN": token},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 2, done.stderr
        assert "refusing a DISTCRAWL_WEB_TOKEN with spaces or a newline around it" in done.stderr
        assert TOKEN not in done.stderr


def raw_get(server: DashboardServer, path: str, host: str | None) -> tuple[int, bytes]:
    """GET *path* with exactly the ``Host`` header given (None: none at all), HTTP/1.0."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        head = f"GET {path} HTTP/1.0\r\n" + (f"Host: {host}\r\n" if host is not None else "")
        sock.sendall((head + "\r\n").encode())
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    status = int(data.split(b" ", 2)[1])
    return status, data.partition(b"\r\n\r\n")[2]


def test_a_rebound_name_gets_no_page_no_data_and_no_csrf_value(web: DashboardServer) -> None:
    # DNS rebinding: a page at evil.example points its name at 127.0.0.1, and the operator's
    # browser then asks the dashboard with Host: evil.example:<port>
    csrf = web.app.state.guard.csrf.encode()
    port = web.port
    paths = ("/", "/api/status", "/api/deadletters", "/metrics", "/events", "/static/dashboard.css")
    for path in paths:
        status, body = raw_get(web, path, f"evil.example:{port}")
        assert status == 421, (path, status)
        assert csrf not in body and b"catalog" not in body
    status, body = raw_get(web, "/", None)
    assert status == 400 and csrf not in body
    assert raw_get(web, "/", "evil.example:not-a-port")[0] == 400
    # the names of this machine's loopback are served
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", "localhost", f"[::1]:{port}"):
        status, body = raw_get(web, "/", host)
        assert status == 200 and csrf in body, host
    assert raw_get(web, "/api/status", f"127.0.0.2:{port}")[0] == 200
    # a rebound name cannot act either
    req = urllib.request.Request(
        web.url + "api/pause",
        b"{}",
        {"Host": f"evil.example:{port}", "Content-Type": "application/json"},
        method="POST",
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(req, timeout=30)
    assert refused.value.code == 421


def test_beyond_loopback_the_dashboard_answers_ip_addresses_and_the_names_it_is_given() -> None:
    check = HostCheck.of("0.0.0.0", "crawl.example.com, Dash.Example.com.")
    assert check.refusal("crawl.example.com:8470") is None
    assert check.refusal("dash.example.com") is None
    assert check.refusal("10.0.0.5:8470") is None
    assert check.refusal("[2001:db8::1]:8470") is None
    assert check.refusal("localhost:8470") is None
    assert check.refusal("evil.example:8470") == (
        421,
        "this dashboard does not answer to 'evil.example' (see DISTCRAWL_WEB_HOSTS)",
    )
    assert check.refusal("") == (400, "a request names its Host")
    # on loopback, an address of the network is no name of this dashboard
    assert HostCheck.of("127.0.0.1", None).refusal("10.0.0.5:8470") is not None
    assert HostCheck.of("127.0.0.1", ["proxy.example"]).refusal("proxy.example") is None


# --------------------------------------------------------------------------- reads


def test_page_status_and_metrics_show_the_crawl(web: DashboardServer, r: redis.Redis) -> None:
    queue_raw(r, KEYS.shard(0), 100, "1")
    queue_raw(r, KEYS.shard(0), 300, "2")
    stats = {"response_received_count": 12, "catalog/pages/product": 12, "item_scraped_count": 9}
    FrontierStore(r, KEYS).heartbeat("n1", json.dumps({"pid": 1, "host": "h", "stats": stats}))
    dead = {"url": "http://127.0.0.1/x", "reason": "http_503"}
    r.hset(KEYS.shard(0).dead, "d1", json.dumps(dead))

    status, page, headers = get(web.url)
    assert status == 200
    assert "script-src 'self'" in headers["content-security-policy"]
    assert b'<meta name="writable" content="1">' in page
    # no CDN: every script, style and link is the process' own (the CSRF token is random
    # text, so a word search of the page could match it)
    links = re.findall(rb'(?:src|href)="([^"]*)"', page)
    assert links and all(link.startswith((b"/", b"#", b"data:")) for link in links), links
    assert b"https://" not in page and b"http://" not in page
    for asset in ("uPlot.iife.min.js", "uPlot.min.css", "dashboard.js", "dashboard.css"):
        assert get(f"{web.url}static/{asset}")[0] == 200

    def current() -> Any:
        body = json.loads(get(web.url + "api/status")[1])
        status = body["status"]
        done = status and status["frontier"]["queued"] == 2 and status["dead_letters"]["total"]
        return body if done else None

    body = wait_for(current, "the status to show the queue and the dead letter")
    assert body["status"]["frontier"]["queued_by_kind"] == {
        "seed": 0,
        "category": 1,
        "listing": 0,
        "product": 1,
    }
    assert [n["node"] for n in body["status"]["nodes"]] == ["n1"]

    status, text, headers = get(web.url + "metrics")
    assert status == 200 and headers["content-type"].startswith("text/plain; version=0.0.4")
    values = metric_values(text.decode())
    assert values[("distcrawl_frontier_requests", (("kind", "product"),))] == 1
    assert values[("distcrawl_frontier_requests", (("kind", "category"),))] == 1
    assert values[("distcrawl_frontier_queued_requests", ())] == 2
    assert values[("distcrawl_responses_total", ())] == 12
    assert values[("distcrawl_items_total", ())] == 9
    assert values[("distcrawl_nodes", (("state", "live"),))] == 1
    assert values[("distcrawl_nodes", (("state", "dead"),))] == 0
    assert values[("distcrawl_dead_letters", (("reason", "http_503"),))] == 1
    assert values[("distcrawl_up", ())] == 1
    names = {family.name for family in text_string_to_metric_families(text.decode())}
    assert names <= set(METRICS), names - set(METRICS)
    # no URL is ever a label value
    assert "://" not in "".join(str(labels) for _, labels in values)

    # a site's Crawl-delay and its source, a held site, a server of two sites
    store = FrontierStore(r, KEYS)
    store.sync(
        "n1", children=[("fpd", 100, False, 0, "delayed.test", '{"u":"http://delayed.test/"}')]
    )
    store.set_site_robots("delayed.test", delay_ms=2000, source="robots_txt")
    store.set_site_robots("held.test", hold_ms=60_000, why="retry_after")
    store.sync("n1", lease=1)
    store.note_servers([("a.test", "10.0.0.1"), ("b.test", "10.0.0.1")])

    def politeness() -> Any:
        values = metric_values(get(web.url + "metrics")[1].decode())
        return (
            values
            if ("distcrawl_sites_held", ()) in values
            and values[("distcrawl_sites_held", ())] == 1
            and ("distcrawl_server_sites", (("server", "10.0.0.1"),)) in values
            else None
        )

    values = wait_for(politeness, "the metrics to show the Crawl-delay, the hold, the server")
    delay = (
        "distcrawl_site_crawl_delay_seconds",
        (("site", "delayed.test"), ("source", "robots_txt")),
    )
    assert values[delay] == 2.0
    assert values[("distcrawl_sites_with_crawl_delay", ())] == 1
    assert values[("distcrawl_server_sites", (("server", "10.0.0.1"),))] == 2
    held = [k for k in values if k[0] == "distcrawl_site_hold_remaining_seconds"]
    assert held == [
        ("distcrawl_site_hold_remaining_seconds", (("cause", "retry_after"), ("site", "held.test")))
    ]

    dead = json.loads(get(web.url + "api/deadletters?reason=http_503")[1])
    assert [(d["id"], d["site"]) for d in dead["rows"]] == [("d1", "127.0.0.1")]
    assert dead["cursor"] is None  # the last page
    assert json.loads(get(web.url + "api/deadletters?reason=other")[1])["rows"] == []


def test_metrics_label_only_the_top_sites_and_reasons(web: DashboardServer, r: redis.Redis) -> None:
    pipe = r.pipeline(transaction=False)
    for i in range(300):
        site = f"site{i}.example"
        pipe.hset(KEYS.site(site), mapping={"factor": 1})
        pipe.hset(site_shard(site).active, site, 1 + i % 5)
        pipe.zadd(KEYS.wait(site), {f"w{i}": -100 * SCORE_SPAN + i + 1})
        pipe.zadd(site_shard(site).waiting, {site: 1000 + i})
        dead = {"url": f"http://s{i}/", "reason": f"r{i}"}
        pipe.hset(KEYS.shard(0).dead, f"d{i}", json.dumps(dead))
    pipe.execute()

    def metrics() -> Any:
        values = metric_values(get(web.url + "metrics")[1].decode())
        dead = sum(v for k, v in values.items() if k[0] == "distcrawl_dead_letters")
        return values if dead == 300 else None  # a read after the writes above

    values = wait_for(metrics, "metrics")
    sites = [k for k in values if k[0] == "distcrawl_site_requests_in_flight"]
    assert 0 < len(sites) <= 20
    reasons = {
        dict(k[1])["reason"]: v for k, v in values.items() if k[0] == "distcrawl_dead_letters"
    }
    assert len(reasons) == 21 and reasons["other"] == 280
    assert sum(reasons.values()) == 300


def test_a_hundred_nodes_and_ten_thousand_sites_come_in_pages(
    web: DashboardServer, r: redis.Redis
) -> None:
    store = FrontierStore(r, KEYS)
    for i in range(100):
        stats = {"response_received_count": i, "catalog/pages/product": i, "item_scraped_count": i}
        store.heartbeat(f"node-{i:03d}", json.dumps({"pid": i, "host": "h", "stats": stats}))
    pipe = r.pipeline(transaction=False)
    seconds, _ = r.time()
    cut = {"factor": 0.5, "fts": seconds * 1000, "cut_at": seconds * 1000, "recover_ms": 10**9}
    for i in range(10_000):
        site = f"shop{i:05d}.example"
        pipe.hset(KEYS.site(site), mapping=cut)  # a cut as the library writes it, lasting
        pipe.hset(site_shard(site).active, site, 1 + i % 7)
        pipe.zadd(KEYS.wait(site), {f"w{i}": -100 * SCORE_SPAN + i + 1})
        pipe.zadd(site_shard(site).waiting, {site: 1000 + i})
        if len(pipe) > 5000:
            pipe.execute()
    pipe.execute()

    def status() -> Any:
        body = json.loads(get(web.url + "api/status")[1])["status"]
        return body if body and len(body["nodes"]) == 100 and body["sites"] else None

    body = wait_for(status, "100 nodes and the busy sites")
    assert 0 < len(body["sites"]) <= 20
    assert len(json.dumps(body)) < 100_000  # the page gets top lists, not one row per site
    slow = json.loads(get(web.url + "api/sites?order=slowest&page=2&per_page=10")[1])
    assert slow["total"] == 10_000
    assert [row["site"] for row in slow["rows"]] == [
        f"shop{i:05d}.example" for i in range(9979, 9969, -1)
    ]
    assert all(row["factor"] == 0.5 and row["waiting"] == 1 for row in slow["rows"])
    busiest = json.loads(get(web.url + "api/sites?order=busiest&page=1&per_page=5")[1])
    assert busiest["total"] == len(body["sites"]) and len(busiest["rows"]) == 5


def test_mongodb_products_write_rate_and_outage(mongo_uri: str) -> None:
    client: pymongo.MongoClient[dict[str, Any]] = pymongo.MongoClient(mongo_uri)
    collection = client.get_default_database()["products"]
    collection.insert_many([{"_id": f"p{i}", "name": f"product {i}"} for i in range(5)])
    store = ProductStore(mongo_uri, database=None, collection="products")
    away = ProductStore(
        "mongodb://127.0.0.1:1/x?directConnection=true&serverSelectionTimeoutMS=200",
        database=None,
        collection="products",
    )
    try:
        sampler = Sampler(client=None, keys=KEYS, heartbeat_timeout=30.0)
        sampler.store_figures = store.figures
        assert asyncio.run(sampler.refresh_store())["in_collection"] == 5
        collection.insert_many([{"_id": f"q{i}", "name": f"product {i}"} for i in range(5)])
        state = asyncio.run(sampler.refresh_store())
        assert state["reachable"] and state["in_collection"] == 10 and state["writes_per_s"] > 0
        # no node has started the crawl: no start to count this crawl's products from, and why
        assert state["this_crawl"] is None and "no node has started" in state["error"]
        assert metric_values(render_metrics(sampler).decode())[("distcrawl_store_up", ())] == 1
        assert [p["name"] for p in store.latest(3) or []]  # the latest products, named

        sampler.store_figures = away.figures
        state = asyncio.run(sampler.refresh_store())
        assert not state["reachable"] and state["outage_since"] and state["in_collection"] == 10
        assert state["error"].startswith("MongoDB at mongodb://127.0.0.1:1/"), state["error"]
        values = metric_values(render_metrics(sampler).decode())
        assert values[("distcrawl_store_up", ())] == 0
        assert away.latest(3) is None
    finally:
        store.close()
        away.close()
        client.close()


# --------------------------------------------------------------------------- actions


def test_actions_need_the_token_and_the_page_csrf_value(
    web: DashboardServer, r: redis.Redis
) -> None:
    assert post(web, "/api/pause", token=None)[0] == 401
    assert post(web, "/api/pause", token="wrong")[0] == 401
    assert post(web, "/api/pause", csrf=None)[0] == 403
    assert post(web, "/api/pause", csrf="forged")[0] == 403
    assert post(web, "/api/pause", origin="http://evil.example")[0] == 403
    assert post(web, "/api/pause", content_type="text/plain")[0] == 415
    assert not r.exists(KEYS.paused)
    assert get(web.url + "api/pause")[0] == 405  # a link cannot act

    status, body = post(web, "/api/pause", origin=web.url.rstrip("/"))
    assert status == 200 and body["ok"] and body["paused"]
    assert r.exists(KEYS.paused)
    status, body = post(web, "/api/resume")
    assert status == 200 and body["was_paused"]
    assert not r.exists(KEYS.paused)


def test_seed_and_requeue_from_the_dashboard(web: DashboardServer, r: redis.Redis) -> None:
    status, body = post(
        web, "/api/seed", {"urls": ["http://127.0.0.1:1/a", "javascript:<script>alert(1)</script>"]}
    )
    assert status == 200 and body["queued"] == 1
    assert [x["seed"] for x in body["refused"]] == ["javascript:<script>alert(1)</script>"]
    assert r.lrange(KEYS.start_urls, 0, -1) == [b"http://127.0.0.1:1/a"]
    assert post(web, "/api/seed", {"urls": "not a list"})[0] == 400

    store = FrontierStore(r, KEYS)
    request = json.dumps({"url": "http://127.0.0.1:1/p", "priority": 100})
    for dead_id, reason in (("a", "http_503"), ("b", "http_503"), ("c", "timeout")):
        record = {"url": "http://127.0.0.1:1/p", "reason": reason, "request": request}
        r.hset(KEYS.shard(0).dead, f"{dead_id}", json.dumps(record))
    status, body = post(web, "/api/deadletters/requeue", {"reason": "http_503"})
    assert status == 200 and body["requeued"] == 2
    assert r.hkeys(KEYS.shard(0).dead) == [b"c"]
    status, body = post(web, "/api/deadletters/requeue", {"ids": ["c"]})
    assert status == 200 and body["requeued"] == 1
    assert int(store.drained()[0]) == 3
    assert post(web, "/api/deadletters/requeue", {})[0] == 400


def test_without_a_token_the_dashboard_is_read_only(redis_url: str, r: redis.Redis) -> None:
    server = dashboard(redis_url, token=None)
    try:
        status, page, _ = get(server.url)
        assert b'<meta name="writable" content="0">' in page
        status, body = post(server, "/api/pause")
        assert status == 403 and "read-only" in body["error"]
        assert not r.exists(KEYS.paused)
    finally:
        server.stop()


# --------------------------------------------------------------------------- Redis cost


def _calls(client: redis.Redis) -> dict[str, int]:
    stats: Any = client.info("commandstats")
    return {
        name.removeprefix("cmdstat_"): int(value["calls"])
        for name, value in stats.items()
        if name not in ("cmdstat_info",)
    }


def _cost(client: redis.Redis, action: Any) -> dict[str, int]:
    before = _calls(client)
    action()
    after = _calls(client)
    return {k: v - before.get(k, 0) for k, v in after.items() if v - before.get(k, 0)}


def _fill(client: redis.Redis, sites: int) -> None:
    """*sites* sites, each with its budget, a request waiting for it, a queued request and a
    seen URL; 50 dead letters and three nodes."""
    client.flushall()
    pipe = client.pipeline(transaction=False)
    seconds, _ = client.time()
    cut = {"factor": 0.5, "fts": seconds * 1000, "cut_at": seconds * 1000, "recover_ms": 10**9}
    for i in range(sites):
        site = f"shop{i}.example"
        pipe.hset(KEYS.site(site), mapping={**cut, "limit_rate": 4})
        pipe.hset(site_shard(site).active, site, 2)
        pipe.zadd(KEYS.wait(site), {f"w{i}": -100 * SCORE_SPAN + i + 1})
        pipe.zadd(site_shard(site).waiting, {site: 1000 + i})
        pipe.sadd(KEYS.shard(0).dupefilter, f"fp{i}")
        pipe.rpush(KEYS.shard(0).queue(100), f"q{i}")
        pipe.zadd(KEYS.shard(0).levels, {"100": level_score(100, 0)}, nx=True)
        pipe.zincrby(KEYS.shard(0).levels, 1, "100")
        if len(pipe) > 5000:
            pipe.execute()
    for i in range(50):
        record = {"url": f"http://shop{i}.example/", "reason": "http_503"}
        pipe.hset(KEYS.shard(0).dead, f"d{i}", json.dumps(record))
    pipe.execute()
    store = FrontierStore(client, KEYS)
    for node in ("n1", "n2", "n3"):
        store.heartbeat(node, json.dumps({"pid": 1, "host": "h", "stats": {}}))


def test_a_refresh_costs_a_bounded_number_of_redis_commands(redis_url: str) -> None:
    """With 10, 1,000 and 10,000 sites: a refresh of the dashboard (the status read) costs the
    same past the top sites, the pages and /metrics cost nothing, a page of a list a page."""
    client = redis.Redis.from_url(redis_url)

    async def refresh() -> dict[str, int]:
        aclient = aioredis.Redis.from_url(redis_url)
        try:
            await aclient.ping()  # connect outside the measured refresh
            sampler = Sampler(client=aclient, keys=KEYS, heartbeat_timeout=30.0)
            await sampler.refresh()  # the rates' first sample
            before = _calls(client)
            await sampler.refresh()
            after = _calls(client)
            return {k: v - before.get(k, 0) for k, v in after.items() if v != before.get(k)}
        finally:
            await aclient.aclose()

    costs: dict[int, tuple[int, int, int, int]] = {}
    try:
        for sites in (10, 1_000, 10_000):
            _fill(client, sites)
            refresh_cost = asyncio.run(refresh())
            server = dashboard(redis_url, interval=3600)  # one read at start, then none
            try:
                wait_for(lambda s=server: s.app.state.sampler.refreshes, "the first read")
                pages = ("metrics", "api/status", "api/series", "api/sites?order=busiest")
                page_cost = _cost(client, lambda s=server, ps=pages: [get(s.url + p) for p in ps])
                sites_cost = _cost(
                    client, lambda s=server: get(s.url + "api/sites?order=slowest&page=0")
                )
                dead_cost = _cost(client, lambda s=server: get(s.url + "api/deadletters?limit=20"))
                rejected_cost = _cost(client, lambda s=server: get(s.url + "api/rejected?page=2"))
            finally:
                server.stop()
            assert page_cost == {}, (sites, "pages and /metrics are served from the last read")
            costs[sites] = (
                sum(refresh_cost.values()),
                sum(sites_cost.values()),
                sum(dead_cost.values()),
                sum(rejected_cost.values()),
            )
            print(sites, "sites: a refresh costs", refresh_cost, "pages", costs[sites][1:])
    finally:
        client.close()
    big = costs[10_000]
    # the top sites are read in detail, nothing past them: 1,000 sites cost what 10,000 do
    assert costs[1_000] == big, costs
    assert big[0] < 1_000, costs
    # one page of sites: ZCARD and ZREVRANGE per shard, HGETALL and ZCARD per site shown,
    # their requests in flight (one HMGET per shard)
    assert big[1] <= 3 * len(SHARDS) + 2 * 10, big
    assert big[2] <= len(SHARDS) + 5 and big[3] == 2
