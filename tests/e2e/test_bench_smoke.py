"""Smoke runs of the benchmark tools with tiny sizes: they start, crawl and report.

No timing assertions: CI machines are too noisy for them. The figures belong in the result
files a real run writes (bench/results/, shown by the docs' benchmarks page); these runs write
theirs into a temporary folder.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.fixture(autouse=True)
def results_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Where a smoke run writes its result file: never bench/results/."""
    folder = tmp_path / "bench-results"
    monkeypatch.setenv("DISTCRAWL_BENCH_RESULTS", str(folder))
    return folder


def run_tool(*args: str, timeout: float = 300) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, *args, "--json"],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert proc.stdout.strip(), proc.stderr[-3000:]
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def test_throughput_runs_every_variant_through_the_delaying_proxy() -> None:
    out = run_tool(
        str(BENCH / "throughput.py"),
        "--products", "80", "--rounds", "1", "--nodes", "1,2", "--redis-rtt", "0.5",
    )  # fmt: skip
    for key in ("plain_pps", "scrapy_redis_pps", "distcrawl_pps", "distcrawl_2nodes_pps"):
        assert out[key] > 0, key
    for key in ("ratio_vs_plain", "ratio_vs_scrapy_redis", "redis_roundtrips_per_page"):
        assert out[key] is not None, key
    assert set(out["cpu_s_per_1000_pages"]) == {
        "plain",
        "scrapy_redis",
        "distcrawl",
        "distcrawl_2nodes",
    }
    assert out["scaling"]["ratio_2_vs_1"] is not None
    round_one = out["rounds"][0]
    for name in ("plain", "scrapy_redis", "distcrawl", "distcrawl_2nodes"):
        assert round_one[name]["complete"], round_one[name]
        assert round_one[name]["exit_codes"] == [0] * round_one[name]["nodes"]
        # every product scraped once, whatever the number of nodes
        assert round_one[name]["items_scraped"] == 80, round_one[name]
    # the proxy counted the same round trips as the server (give or take connection set-up)
    proxied = round_one["scrapy_redis"]["proxy_roundtrips_per_page"]
    assert proxied == pytest.approx(round_one["scrapy_redis"]["redis_roundtrips_per_page"], rel=0.1)
    assert out["redis_ping_ms"]["proxied_ms"] > out["redis_ping_ms"]["direct_ms"]


def test_chaos_kills_a_node_and_loses_nothing() -> None:
    out = run_tool(
        str(BENCH / "chaos.py"),
        "--products", "100", "--nodes", "2", "--kills", "1", "--seed", "7",
        "--latency", "250", "--concurrency", "4", "--quiet",
    )  # fmt: skip
    assert out["design"] == "distcrawl"
    assert out["expected"] == 100
    assert (out["lost"], out["duplicates"]) == (0, 0), out
    assert (out["inflight_left"], out["queued_left"]) == (0, 0), out
    # the run exists to kill a node mid-crawl: it must have, and a replacement took over
    assert out["kills"] == 1, out
    assert out["nodes_started"] == 3, out
    assert out["stored"] == out["fetched_products"] == 100, out
    assert out["recovered_live_nodes"] == 0, out
    assert out["site_active_left"] == 0, out
    assert out["ok"], out


def test_chaos_baseline_scrapy_redis_reports_its_losses() -> None:
    out = run_tool(
        str(BENCH / "chaos.py"),
        "--products", "100", "--nodes", "2", "--kills", "1", "--seed", "7",
        "--latency", "100", "--concurrency", "4", "--quiet", "--baseline", "scrapy-redis",
    )  # fmt: skip
    assert out["design"] == "scrapy-redis"
    assert out["kills"] == 1, out
    assert out["inflight_left"] is None
    assert out["queued_left"] == 0
    assert out["expected"] == 100
    # MongoDB against the shop's own request log: nothing is stored that was never served,
    # and whatever was never served is counted lost
    assert out["stored"] <= out["fetched_products"], out
    assert out["lost"] >= out["expected"] - out["fetched_products"], out
    assert out["duplicates"] == 0


def test_frontier_bench_runs_single_cluster_and_baseline() -> None:
    out = run_tool(
        str(BENCH / "frontier.py"),
        "--seconds", "1.5", "--urls", "20000", "--sites", "50", "--cluster", "3",
    )  # fmt: skip
    for key in ("pages_per_second", "scrapy_redis_pages_per_second", "cluster_pages_per_second"):
        assert out[key] > 0, key
    for key in ("redis_cpu_us_per_page", "commands_per_page", "seen_bytes_per_url"):
        assert out[key] > 0 and out[f"scrapy_redis_{key}"] > 0, key
    assert 0 < out["roundtrips_per_page"] < 1 < out["scrapy_redis_roundtrips_per_page"]
    assert out["queued_bytes_per_url"] > 0 and out["urls"] == 20_000
    assert len(out["share_per_master"]) == 3
    assert sum(out["share_per_master"]) == pytest.approx(1, abs=0.01)
    assert out["balance_max_over_mean"] >= 1 and out["projected_speedup"] > 0
    # the single Redis again, its nodes held to one master's rate (a node leases `lease` at a
    # time)
    held = out["single_at_master_rate_pages_per_second"]
    assert 0 < held <= out["cluster_pages_per_second"] / 3 * 1.5 + 2 * out["lease"] / 0.5
    assert out["cluster_cpu_overhead_at_master_rate"] > 0


def test_extract_diff_reads_every_page_with_a_git_ref_and_the_working_tree(
    tmp_path: Path,
) -> None:
    out = run_tool(
        str(BENCH / "extract_diff.py"),
        "--ref",
        "HEAD",
        "--products",
        "12",
        "--variant",
        "crowded",
        "--variant",
        "text",
        "--dataset",
        str(tmp_path / "no-such-folder"),
    )
    assert out["ref"] == "HEAD"
    assert set(out["groups"]) == {"crowded", "text"}
    for group in out["groups"].values():
        assert group["pages"] > 12 and 0 <= group["changed"] <= group["pages"]
    assert out["changed"] == sum(g["changed"] for g in out["groups"].values())
    for page in out["changed_pages"]:
        assert all(len(values) == 2 for values in page["diff"].values())


def test_extract_bench_compares_a_git_ref_with_the_working_tree(results_folder: Path) -> None:
    out = run_tool(
        str(BENCH / "extract.py"),
        "--ref",
        "HEAD",
        "--products",
        "12",
        "--rounds",
        "1",
        "--variant",
        "plain",
        "--variant",
        "dlist",
    )
    assert out["ref"] == "HEAD"
    assert set(out["variants"]) == {"plain", "dlist"}
    for figures in out["variants"].values():
        assert figures["pages"] > 12
        assert figures["ref_us_per_page"] > 0 and figures["this_us_per_page"] > 0
    assert out["ratio"] > 0
    # the run's result file: the command, the machine and the report --json printed
    (written,) = results_folder.glob("extract--*.json")
    result = json.loads(written.read_text())
    assert result["tool"] == "extract" and result["report"] == out
    assert result["command"].startswith(".venv/bin/python bench/extract.py --ref HEAD")
    assert result["machine"]["cpus"] >= 1 and result["finished_at"] >= result["started_at"]


def _children(pid: int) -> set[int]:
    """The PIDs *pid* started that are still running (Linux: /proc/<pid>/task/*/children)."""
    found: set[int] = set()
    for task in Path(f"/proc/{pid}/task").glob("*"):
        with contextlib.suppress(OSError):
            found.update(int(p) for p in (task / "children").read_text().split())
    return found


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_a_bench_sent_sigterm_stops_the_processes_it_started() -> None:
    """A ``timeout`` that ends a bench must not leave its shop, Redis and nodes running."""
    bench = subprocess.Popen(
        [sys.executable, str(BENCH / "throughput.py"), "--products", "2000", "--rounds", "1",
         "--nodes", "1", "--variants", "distcrawl", "--latency", "200", "--json"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    started: set[int] = set()
    try:
        assert bench.stderr is not None
        # the shop and Redis are up once the bench names the shop; a node follows
        for line in bench.stderr:
            if line.startswith("shop http://"):
                break
        deadline = time.monotonic() + 120
        while len(started) < 3 and time.monotonic() < deadline and bench.poll() is None:
            started |= _children(bench.pid)
            time.sleep(0.1)
        assert len(started) >= 3, f"the bench started {sorted(started)}"
        bench.send_signal(signal.SIGTERM)
        assert bench.wait(timeout=120) == 128 + signal.SIGTERM
        deadline = time.monotonic() + 60
        while any(_running(p) for p in started) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not [p for p in started if _running(p)], "left running"
    finally:
        if bench.poll() is None:
            bench.kill()
            bench.wait()
        for pid in started:  # what a failed unwind left: processes this test made the bench start
            if _running(pid):
                os.kill(pid, signal.SIGKILL)
