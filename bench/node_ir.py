"""Instructions per page of one crawl node, counted by callgrind, against plain Scrapy on the same
pages: a figure the machine's load does not move.

Each variant crawls the demo shop (a process of its own, not counted) with one ``scrapy crawl``
process run under valgrind's callgrind, its instrumentation off until the shop has served
``--warmup`` pages and off again once it has served ``--pages`` more; the instructions the
process executed in between, over the pages the shop served in between, are the figure.

- plain: the catalog spider on Scrapy's own scheduler and dupefilter (``bench_plain``).
- node: the catalog spider on the frontier, one node, a fresh valkey-server (not counted), the
  seed pushed before the node starts.

Both run the settings of ``bench/throughput.py`` (``COMMON_SETTINGS``: concurrency 16,
``CONCURRENT_ITEMS`` 16, robots.txt obeyed, item pipeline off, the generator-return check
off) and crawl the same shop (``--products``, the same seed), so the window holds the same
kinds of pages. What is counted is everything the node's process executes in the window:
Scrapy's engine and downloader, parsing and the spider's extraction, the scheduler and, for
the node, the frontier client (payloads encoded and decoded, redis-py, the I/O loop, the write
buffers, heartbeats). Under callgrind a page takes some hundred times as long as at full
speed, so work done per second rather than per page (heartbeats, the I/O loop's flush delay,
Scrapy's log and memory checks) would weigh a hundred times as much per page: both variants run
with those periods stretched by ``--dilation`` (100), so that a node flushes, heart-beats and
logs per page about as often as at full speed. ``--seconds-probe`` runs each variant a second
time with the shop answering ``--probe-latency`` ms later and solves for instructions per page
and per second (what the stretched periods leave).

    .venv/bin/python bench/node_ir.py --json
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import redis

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _processes import Node, Services, ShopProcess, page_fetches
from _results import print_report
from _settings import COMMON_SETTINGS, START_URLS_KEY, plain_settings, spider_modules_setting
from frontier_ir import Counter

HEADLINE = ("node_instructions_per_page", "plain_instructions_per_page", "ratio_vs_plain")
#: seconds a node under valgrind may take to open its spider (imports run ~10x slower)
START_TIMEOUT = 300.0
#: seconds between two looks at the shop's request log
POLL = 0.2


def callgrind(out: Path) -> list[str]:
    return ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}"]


def dilated(factor: float) -> dict[str, str]:
    """The periods of what a node and Scrapy do per second, ``factor`` times longer: under
    callgrind time runs that much faster per instruction (see above)."""
    return {
        # the node's: how long it keeps its writes, how often it heart-beats and looks for
        # dead nodes (a fraction of the heartbeat timeout)
        "DISTCRAWL_FLUSH_DELAY": str(0.2 * factor),
        "DISTCRAWL_HEARTBEAT_INTERVAL": str(2.0 * factor),
        "DISTCRAWL_HEARTBEAT_TIMEOUT": str(30.0 * factor),
        # Scrapy's: its periodic log line and memory check
        "LOGSTATS_INTERVAL": str(60.0 * factor),
        "MEMUSAGE_CHECK_INTERVAL_SECONDS": str(60.0 * factor),
    }


def served(shop: ShopProcess, since: float) -> list[dict[str, Any]]:
    return page_fetches(shop.log(since=since))


def run_variant(
    kind: str, args: argparse.Namespace, work: Path, latency_ms: float
) -> dict[str, Any]:
    """One crawl under callgrind; the instructions and pages of its window."""
    log_dir = work / f"{kind}-{int(latency_ms)}"
    log_dir.mkdir(parents=True)
    out = log_dir / "callgrind.out"
    settings = {**COMMON_SETTINGS, **spider_modules_setting(), **dilated(args.dilation)}
    env: dict[str, str] = {}
    spider_args: dict[str, str] | None = None
    services: Services | None = None
    with ShopProcess(products=args.products, latency_ms=latency_ms) as shop:
        if kind == "plain":
            spider = "bench_plain"
            settings.update(plain_settings())
            spider_args = {"seed": shop.url}
        else:
            spider = "catalog"
            services = Services()
            env["REDIS_URL"] = services.redis_url
            settings.update(DISTCRAWL_CLOSE_WHEN_DRAINED="1")
            redis.Redis.from_url(services.redis_url).lpush(START_URLS_KEY, shop.url)
        t_start = time.time()
        node = Node(
            spider,
            node_id=f"ir-{kind}",
            log_dir=log_dir,
            settings=settings,
            env=env,
            spider_args=spider_args,
            wrapper=callgrind(out),
        )
        try:
            counter = Counter(node.pid, out)
            deadline = time.monotonic() + START_TIMEOUT
            while len(served(shop, t_start)) < args.warmup:
                if not node.alive or time.monotonic() > deadline:
                    raise RuntimeError(f"{kind}: the node did not reach the window\n{node.log()}")
                time.sleep(POLL)
            counter.start_counting()
            t_on = time.time()
            while len(served(shop, t_on)) < args.pages:
                if not node.alive:
                    raise RuntimeError(f"{kind}: the node ended in the window\n{node.log()}")
                time.sleep(POLL)
            totals = counter.stop_counting()
            t_off = time.time()
        finally:
            node.stop(timeout=60)
            if services is not None:
                services.stop()
        pages = [e for e in served(shop, t_on) if float(e["t"]) <= t_off]
    n = max(1, len(pages))
    return {
        "instructions": totals[0],
        "pages": n,
        "seconds": round(t_off - t_on, 2),
        "instructions_per_page": round(totals[0] / n),
    }


def per_page_and_second(fast: dict[str, Any], slow: dict[str, Any]) -> tuple[float, float]:
    """Instructions per page and per second from two windows of different pace (I = a * pages
    + b * seconds)."""
    det = fast["pages"] * slow["seconds"] - slow["pages"] * fast["seconds"]
    if det == 0:
        return fast["instructions_per_page"], 0.0
    a = (fast["instructions"] * slow["seconds"] - slow["instructions"] * fast["seconds"]) / det
    b = (fast["pages"] * slow["instructions"] - slow["pages"] * fast["instructions"]) / det
    return a, b


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--products", type=int, default=400, help="products of the demo shop")
    parser.add_argument("--warmup", type=int, default=40, help="pages before the window")
    parser.add_argument("--pages", type=int, default=200, help="pages in the window")
    parser.add_argument(
        "--seconds-probe",
        action="store_true",
        help="run each variant again with a slower shop and report instructions per second",
    )
    parser.add_argument("--probe-latency", type=float, default=2000.0)
    parser.add_argument(
        "--dilation", type=float, default=100.0, help="how much longer per-second periods run"
    )
    parser.add_argument("--keep", action="store_true", help="keep the work folder")
    args = parser.parse_args(argv)
    for tool in ("valgrind", "callgrind_control"):
        if shutil.which(tool) is None:
            parser.error(f"{tool} is not installed (Debian: apt-get install valgrind)")
    work = Path(tempfile.mkdtemp(prefix="distcrawl-bench-node-ir-"))
    report: dict[str, Any] = {
        "dilation": args.dilation,
        "products": args.products,
        "warmup_pages": args.warmup,
        "window_pages": args.pages,
    }
    try:
        for kind in ("plain", "node"):
            run = run_variant(kind, args, work, 0.0)
            report[f"{kind}_instructions_per_page"] = run["instructions_per_page"]
            report[f"{kind}_window"] = run
            if args.seconds_probe:
                slow = run_variant(kind, args, work, args.probe_latency)
                a, b = per_page_and_second(run, slow)
                report[f"{kind}_slow_window"] = slow
                report[f"{kind}_instructions_per_page_alone"] = round(a)
                report[f"{kind}_instructions_per_second"] = round(b)
        report["ratio_vs_plain"] = round(
            report["node_instructions_per_page"] / report["plain_instructions_per_page"], 3
        )
        if args.seconds_probe:
            report["ratio_vs_plain_per_page_alone"] = round(
                report["node_instructions_per_page_alone"]
                / report["plain_instructions_per_page_alone"],
                3,
            )
    finally:
        if args.keep:
            print(f"work folder: {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)
    print_report(report, HEADLINE, as_json=args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
