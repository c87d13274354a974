"""scrapyd deployment end to end: two real scrapyd daemons on loopback, the project egg built and
deployed to both with scrapyd-client's ``scrapyd-deploy``, ``catalog`` scheduled on both through
``schedule.json`` with its settings passed the scrapyd way (``setting=NAME=VALUE``).

The daemons get a clean environment (no REDIS_URL, MONGO_URI, DISTCRAWL_*): whatever a job
knows, it got from ``schedule.json``. ``scrapyd-deploy`` writes a ``setup.py`` into the project
when it has none, so it runs on a copy of the project (``DISTCRAWL_SCRAPYD_PROJECT`` names
another tree to deploy; default: this checkout).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.parse
import urllib.request
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from crawl_nodes import assert_each_product_once, stored_urls, wait_for
from frontier_state import KEYS, leased

from distcrawl.base.processes import free_port

pytestmark = pytest.mark.slow

ROOT = Path(os.environ.get("DISTCRAWL_SCRAPYD_PROJECT") or Path(__file__).resolve().parents[2])
BIN = Path(sys.executable).parent
PROJECT = "distcrawl"
#: a job may take this long before the test gives up on it
JOB_TIMEOUT = 180.0
_PRIVATE_ENV = ("REDIS_URL", "MONGO_URI", "MONGO_DATABASE", "SCRAPY_SETTINGS_MODULE")


class Scrapyd:
    """One scrapyd daemon with its own folder, config and port; stopped by :meth:`stop`."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/"
        home.mkdir(parents=True, exist_ok=True)
        (home / "scrapyd.conf").write_text(
            "[scrapyd]\n"
            f"eggs_dir = {home / 'eggs'}\n"
            f"logs_dir = {home / 'logs'}\n"
            f"dbs_dir = {home / 'dbs'}\n"
            "items_dir =\n"
            "bind_address = 127.0.0.1\n"
            f"http_port = {self.port}\n"
            "poll_interval = 0.5\n"
            "max_proc = 4\n"
        )
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in _PRIVATE_ENV and not k.startswith("DISTCRAWL_")
        }
        self.log = open(home / "scrapyd.out", "wb")  # noqa: SIM115 (closed in stop())
        self.proc = subprocess.Popen(
            [str(BIN / "scrapyd"), "--pidfile", ""],
            cwd=home,
            env=env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        if not wait_for(self._answers, 30, 0.2):
            self.stop()
            raise RuntimeError(f"scrapyd on {self.url} did not start: {self.output()}")

    def _answers(self) -> bool:
        try:
            return self.get("daemonstatus.json")["status"] == "ok"
        except OSError:
            return False

    def output(self) -> str:
        path = self.home / "scrapyd.out"
        return path.read_text(errors="replace")[-3000:] if path.exists() else ""

    def get(self, endpoint: str, **params: str) -> dict[str, Any]:
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        with urllib.request.urlopen(self.url + endpoint + query, timeout=10) as response:
            answer: dict[str, Any] = json.load(response)
            return answer

    def post(self, endpoint: str, fields: list[tuple[str, str]]) -> dict[str, Any]:
        data = urllib.parse.urlencode(fields).encode()
        with urllib.request.urlopen(self.url + endpoint, data=data, timeout=10) as response:
            answer: dict[str, Any] = json.load(response)
            return answer

    def schedule(self, settings: dict[str, Any]) -> str:
        fields = [("project", PROJECT), ("spider", "catalog")]
        fields += [("setting", f"{k}={v}") for k, v in settings.items()]
        answer = self.post("schedule.json", fields)
        assert answer["status"] == "ok", answer
        return str(answer["jobid"])

    def state(self, job: str) -> str:
        jobs = self.get("listjobs.json", project=PROJECT)
        for state in ("pending", "running", "finished"):
            if any(j["id"] == job for j in jobs.get(state, [])):
                return state
        return "unknown"

    def job_log(self, job: str) -> str:
        path = self.home / "logs" / PROJECT / "catalog" / f"{job}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


@pytest.fixture(scope="module")
def daemons(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[Scrapyd]]:
    started: list[Scrapyd] = []
    try:
        for name in ("node1", "node2"):
            started.append(Scrapyd(tmp_path_factory.mktemp(f"scrapyd-{name}")))
        yield started
    finally:
        for daemon in started:
            daemon.stop()


def project_copy(dest: Path, daemons: list[Scrapyd]) -> Path:
    """The project as a user has it, with ``scrapy.cfg`` deploy targets at the test ports."""
    shutil.copytree(
        ROOT / "distcrawl", dest / "distcrawl", ignore=shutil.ignore_patterns("__pycache__")
    )
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, dest / name)
    targets = "".join(
        f"\n[deploy:node{i}]\nurl = {d.url}\nproject = {PROJECT}\n"
        for i, d in enumerate(daemons, 1)
    )
    (dest / "scrapy.cfg").write_text(f"[settings]\ndefault = distcrawl.settings\n{targets}")
    return dest


@pytest.fixture(scope="module")
def deployed(daemons: list[Scrapyd], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Deploy as the scrapyd guide says: ``scrapyd-deploy node1``, ``scrapyd-deploy node2``."""
    project = project_copy(tmp_path_factory.mktemp("project"), daemons)
    egg = project.parent / "distcrawl.egg"
    deploy = str(BIN / "scrapyd-deploy")
    done = subprocess.run(
        [deploy, "--build-egg", str(egg)], cwd=project, capture_output=True, text=True, timeout=180
    )
    assert done.returncode == 0, done.stdout + done.stderr
    with zipfile.ZipFile(egg) as archive:
        names = set(archive.namelist())
        entry_points = archive.read("EGG-INFO/entry_points.txt").decode()
    # scrapyd's runner finds the project's settings through this entry point only
    assert "[scrapy]" in entry_points and "distcrawl.settings" in entry_points, (
        'pyproject.toml needs [project.entry-points.scrapy] settings = "distcrawl.settings" '
        f"(scrapyd-deploy's own setup.py entry point is ignored next to [project]):\n{entry_points}"
    )
    # the node needs its Lua script and the bundled site profiles inside the egg
    assert "distcrawl/frontier/lua/shard/sync.lua" in names
    assert "distcrawl/demo/profiles/demo-plain.toml" in names
    for target in ("node1", "node2"):
        done = subprocess.run(
            [deploy, target], cwd=project, capture_output=True, text=True, timeout=180
        )
        assert done.returncode == 0, done.stdout + done.stderr
        assert json.loads(done.stdout)["status"] == "ok", done.stdout + done.stderr
    for daemon in daemons:
        assert daemon.get("listspiders.json", project=PROJECT)["spiders"] == ["catalog"]
    return project


def node_settings(redis_url: str, mongo_uri: str, node_id: str, **extra: Any) -> dict[str, Any]:
    return {
        "REDIS_URL": redis_url,
        "MONGO_URI": mongo_uri,
        "DISTCRAWL_NODE_ID": node_id,
        "DISTCRAWL_ALLOW_PRIVATE": "127.0.0.1",
        "DISTCRAWL_CLOSE_WHEN_DRAINED": 1,
        "DISTCRAWL_DRAIN_GRACE": 1.5,
        "DISTCRAWL_HEARTBEAT_INTERVAL": 0.5,
        # the daemons' environment is clean: the jobs write the layout the test reads
        "DISTCRAWL_SHARDS": KEYS.shards,
        **extra,
    }


def wait_finished(daemon: Scrapyd, job: str, timeout: float = JOB_TIMEOUT) -> None:
    if not wait_for(lambda: daemon.state(job) == "finished", timeout, 0.5):
        raise AssertionError(
            f"job {job} not finished after {timeout}s:\n{daemon.job_log(job)[-3000:]}"
        )


def test_deploy_to_two_scrapyd_nodes_schedule_catalog_on_both_and_store_every_product_once(
    daemons, deployed, redis_url, mongo_uri, shop_factory
) -> None:
    shop = shop_factory(products=120)
    jobs = [
        daemon.schedule(node_settings(redis_url, mongo_uri, f"scrapyd-{i}"))
        for i, daemon in enumerate(daemons, 1)
    ]
    redis.Redis.from_url(redis_url).lpush("catalog:start_urls", shop.url)
    for daemon, job in zip(daemons, jobs, strict=True):
        wait_finished(daemon, job)
    urls = stored_urls(mongo_uri)
    assert_each_product_once(mongo_uri, shop)  # by SKU: _id (the URL) cannot show it
    assert set(urls) == shop.expected_product_urls()
    for daemon, job in zip(daemons, jobs, strict=True):
        log = daemon.job_log(job)
        assert "Spider closed (finished)" in log, log[-3000:]
        assert "Traceback" not in log, log[log.index("Traceback") :][:3000]


def test_cancel_json_returns_the_leases_of_the_cancelled_job_at_once(
    daemons, deployed, redis_url, mongo_uri, shop_factory
) -> None:
    shop = shop_factory(products=120, latency_ms=100)
    # recovery by heartbeat timeout would take minutes: only a clean stop can explain a fast return
    slow = {"CONCURRENT_REQUESTS": 2, "DISTCRAWL_HEARTBEAT_TIMEOUT": 300}
    (keep, keep_job), (cancel, cancel_job) = [
        (daemon, daemon.schedule(node_settings(redis_url, mongo_uri, f"job-{i}", **slow)))
        for i, daemon in enumerate(daemons, 1)
    ]
    r = redis.Redis.from_url(redis_url)
    r.lpush("catalog:start_urls", shop.url)
    assert wait_for(lambda: leased(r, "job-2") > 0 and len(stored_urls(mongo_uri)) >= 5, 60, 0.1)
    t0 = time.monotonic()
    assert cancel.post("cancel.json", [("project", PROJECT), ("job", cancel_job)])["prevstate"] == (
        "running"
    )
    assert wait_for(lambda: leased(r, "job-2") == 0, 15, 0.1)
    returned_in = time.monotonic() - t0
    wait_finished(cancel, cancel_job, 60)
    wait_finished(keep, keep_job)
    assert time.monotonic() - t0 < 150, "the crawl waited for the heartbeat timeout"
    assert returned_in < 15
    urls = stored_urls(mongo_uri)
    assert_each_product_once(mongo_uri, shop)  # by SKU: _id (the URL) cannot show it
    assert set(urls) == shop.expected_product_urls()
    log = cancel.job_log(cancel_job)
    assert "returned" in log and "requests to the frontier" in log, log[-3000:]
    assert "Spider closed (finished)" in keep.job_log(keep_job)
