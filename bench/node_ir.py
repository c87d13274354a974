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
off) and crawl the same shop (``--products``, the same seed). The default window is nearly the
whole crawl (pages 10-410 of the 428 a 400-product shop has): every kind of page in the
crawl's own mix, so that neither design's work is left outside it (plain Scrapy parses and
queues a product's request on the listing that links it; the node decodes it when it leases
it). What is counted is everything the process executes in the window: Scrapy's engine and
downloader, parsing and the spider's extraction, the scheduler and, for the node, the frontier
client (payloads encoded and decoded, redis-py, the I/O loop, the write buffers, heartbeats).

Under callgrind a page takes some forty times as long as at full speed (about 55 ms against
1.4 ms on this machine), so work done per second rather than per page (timers, polls,
heartbeats, flush delays, Scrapy's log and memory checks) would weigh forty times as much per
page. Both variants run with their clock ``--dilation`` (40) times slower (``_slow_clock.py``:
``time.monotonic`` and the event loop's waits), so that every period, named or not, passes
per page about as often as at full speed. The two variants alternate for ``--runs`` (3) runs; the
figures are the medians, and ``ratio_by_run`` shows each pair. ``--seconds-probe`` runs each
variant once more with the shop answering ``--probe-latency`` ms later and solves for
instructions per page and per second.

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
from _slow_clock import FACTOR_VARIABLE
from frontier_ir import Counter

HEADLINE = ("node_instructions_per_page", "plain_instructions_per_page", "ratio_vs_plain")
#: seconds a node under valgrind may take to open its spider (imports run ~10x slower)
START_TIMEOUT = 300.0
#: seconds between two looks at the shop's request log
POLL = 0.2


def callgrind(out: Path) -> list[str]:
    return ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}"]


def served(shop: ShopProcess, since: float) -> list[dict[str, Any]]:
    return page_fetches(shop.log(since=since))


def run_variant(
    kind: str, args: argparse.Namespace, work: Path, latency_ms: float, run: int = 0
) -> dict[str, Any]:
    """One crawl under callgrind; the instructions and pages of its window."""
    log_dir = work / f"{kind}-{int(latency_ms)}-{run}"
    log_dir.mkdir(parents=True)
    out = log_dir / "callgrind.out"
    settings = {**COMMON_SETTINGS, **spider_modules_setting()}
    env: dict[str, str] = {FACTOR_VARIABLE: str(args.dilation)}
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
            module="_slow_clock",
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


def median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The run whose instructions per page are the median (the lower middle of an even
    count)."""
    ordered = sorted(runs, key=lambda r: r["instructions_per_page"])
    return ordered[(len(ordered) - 1) // 2]


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
    parser.add_argument("--warmup", type=int, default=10, help="pages before the window")
    parser.add_argument("--pages", type=int, default=400, help="pages in the window")
    parser.add_argument(
        "--runs",
        type=int,
        default=3,
        help="alternating runs of each variant; the figures are their medians",
    )
    parser.add_argument(
        "--seconds-probe",
        action="store_true",
        help="run each variant again with a slower shop and report instructions per second",
    )
    parser.add_argument("--probe-latency", type=float, default=2000.0)
    parser.add_argument(
        "--dilation",
        type=float,
        default=40.0,
        help="how much slower the clock runs (how much longer per-second periods run)",
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
        runs: dict[str, list[dict[str, Any]]] = {"plain": [], "node": []}
        for i in range(max(1, args.runs)):
            for kind in ("plain", "node"):
                runs[kind].append(run_variant(kind, args, work, 0.0, i))
                print(
                    f"run {i + 1}/{args.runs} {kind}: "
                    f"{runs[kind][-1]['instructions_per_page']:,} instructions per page",
                    file=sys.stderr,
                )
        for kind in ("plain", "node"):
            run = median_run(runs[kind])
            report[f"{kind}_instructions_per_page"] = run["instructions_per_page"]
            report[f"{kind}_window"] = run
            report[f"{kind}_runs"] = [r["instructions_per_page"] for r in runs[kind]]
            if args.seconds_probe:
                slow = run_variant(kind, args, work, args.probe_latency)
                a, b = per_page_and_second(run, slow)
                report[f"{kind}_slow_window"] = slow
                report[f"{kind}_instructions_per_page_alone"] = round(a)
                report[f"{kind}_instructions_per_second"] = round(b)
        report["ratio_vs_plain"] = round(
            report["node_instructions_per_page"] / report["plain_instructions_per_page"], 3
        )
        pairs = [
            n["instructions_per_page"] / p["instructions_per_page"]
            for p, n in zip(runs["plain"], runs["node"], strict=True)
        ]
        report["ratio_by_run"] = [round(r, 3) for r in pairs]
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
