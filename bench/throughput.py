"""Throughput of a crawl node: plain Scrapy, vanilla scrapy-redis 0.9.1 and distcrawl.

One run measures, in turn and with the same spider logic and the same Scrapy settings (item
pipeline off, so the frontier is what is measured): plain Scrapy with its in-memory scheduler,
scrapy-redis on one node, distcrawl on one node, then distcrawl on more nodes (``--nodes``).
The demo shop runs in a process of its own; Redis is a fresh valkey-server with its
append-only file on. For each variant: pages/s (successful page fetches over the time from the
first to the last request the shop saw), CPU seconds of the node processes per 1,000 pages
(over the same window), Redis commands and round trips per page. Several rounds; medians;
ratios are computed within a round, then the median is taken. distcrawl nodes start with the
cluster paused and the seed queued, and it resumes once every node is up, so the window does
not include the other nodes' start-up (``steady_pps`` also leaves out the first and last 5 %
of fetches, where one seed's crawl is still widening or draining).

    .venv/bin/python bench/throughput.py --json
    .venv/bin/python bench/throughput.py --redis-rtt 1 --json
    .venv/bin/python bench/throughput.py --latency 100 --nodes 1,4 --json
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import redis

from distcrawl.frontier.store import FrontierKeys
from distcrawl.ops.control import pause, resume

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _accounting import CpuSampler, load_average, measure_rtt, median, redis_delta, redis_snapshot
from _processes import (
    Node,
    Services,
    ShopProcess,
    expected_pages,
    page_fetches,
    stats_of,
    wait_all,
)
from _proxy import Proxy
from _results import write_result
from _settings import (
    COMMON_SETTINGS,
    SCRAPY_REDIS_SETTINGS,
    START_URLS_KEY,
    plain_settings,
    spider_modules_setting,
)

#: products of the shop when the site answers at once: even distcrawl on 2 nodes with Redis
#: (~870 pages/s here) runs over 10 s
DEFAULT_PRODUCTS = 10000
#: seconds the fastest variant crawls on a slow site (``--latency``) when --products is not given
LATENCY_RUN_SECONDS = 20
#: a variant that crawls for less than this many seconds gets a warning in the output
MIN_SECONDS = 10.0
#: the keys of the catalog crawl (its pause flag: ``scrapy control catalog pause``)
KEYS = FrontierKeys("catalog", START_URLS_KEY)
#: seconds the nodes of one variant get to open their spiders before the crawl goes on
NODE_START_TIMEOUT = 60.0
#: seconds a scrapy-redis node waits idle before it closes (MAX_IDLE_TIME_BEFORE_CLOSE)
SCRAPY_REDIS_IDLE_CLOSE = 2


def _release_when_ready(admin: redis.Redis, nodes: list[Node]) -> None:
    """Resume the paused cluster once every node has opened its spider.

    Starting a Scrapy process costs about a second of CPU (imports, settings, spider loader).
    Started together on a 2-core machine, four nodes would spend the first seconds of the
    crawl importing while one of them crawls, a test-bed effect a cluster of long-running
    nodes on their own machines does not have. Every variant's window starts at the shop's
    first request; the paused frontier keeps that first request until all nodes are up.
    """
    deadline = time.monotonic() + NODE_START_TIMEOUT
    while time.monotonic() < deadline and not all(
        n.crawling_for() > 0 or not n.alive for n in nodes
    ):
        time.sleep(0.05)
    resume(admin, KEYS)  # what `scrapy control catalog resume` does


def per_second(pages: list[dict[str, Any]], t_first: float) -> list[int]:
    """Page fetches in each second of the crawl window (how it ramps up and drains)."""
    counts = Counter(int(float(e["t"]) - t_first) for e in pages)
    return [counts.get(i, 0) for i in range(max(counts, default=-1) + 1)]


def items_scraped(nodes: list[Node]) -> int | None:
    """Items the nodes' spiders yielded, summed over nodes (Scrapy's ``item_scraped_count`` at
    close): each product once, with the item pipeline off what a store would have received.
    None when a node logged no stats (it did not close cleanly)."""
    total = 0
    for node in nodes:
        stats = stats_of(node.log())
        if not stats:
            return None
        total += stats.get("item_scraped_count", 0)  # Scrapy leaves the count out at 0
    return total


def steady_rate(pages: list[dict[str, Any]]) -> float | None:
    """Pages/s between the 5th and the 95th percentile of fetch times: the rate once the
    frontier is wide enough for every slot (a crawl starts from one seed) and before the
    last pages drain. Reported next to ``pps``, which counts the whole crawl."""
    times = sorted(float(e["t"]) for e in pages)
    lo, hi = len(times) // 20, len(times) - 1 - len(times) // 20
    if hi - lo < 10 or times[hi] <= times[lo]:
        return None
    return round((hi - lo) / (times[hi] - times[lo]), 1)


def variant_name(kind: str, nodes: int) -> str:
    if kind != "distcrawl" or nodes == 1:
        return kind
    return f"distcrawl_{nodes}nodes"


def auto_products(latency_ms: float, max_nodes: int, concurrency: int) -> int:
    """Enough products for the fastest latency-bound variant to crawl ~20 s.

    A crawl from one seed needs a second or two to widen (its first pages are listings, the
    costliest to parse and push); in a shorter run that ramp would weigh on the fastest
    variant most and understate how the cluster scales."""
    if latency_ms <= 0:
        return DEFAULT_PRODUCTS
    ceiling = max_nodes * concurrency * 1000.0 / latency_ms  # pages/s if latency is the limit
    return max(DEFAULT_PRODUCTS, min(20000, math.ceil(ceiling * LATENCY_RUN_SECONDS / 100) * 100))


class Bench:
    def __init__(self, args: argparse.Namespace, work: Path) -> None:
        self.args = args
        self.work = work
        self.concurrency = str(args.concurrency)
        self.shop = ShopProcess(products=args.products, latency_ms=args.latency)
        self.expected_pages = expected_pages(args.products)
        try:
            self.services = Services(home=work / "services")
        except BaseException:
            self.shop.stop()
            raise
        self.admin = redis.Redis.from_url(self.services.redis_url)
        self.sampler = CpuSampler()
        self.sampler.watch(self.shop.pid)
        assert self.services.redis.pid is not None
        self.redis_pid = self.services.redis.pid
        self.sampler.watch(self.redis_pid)
        self.failed = False
        self.rtt = {"direct_ms": measure_rtt(self.services.redis_url)}
        if args.redis_rtt > 0:
            proxy = Proxy(self.services.redis_url, args.redis_rtt, work)
            try:
                self.rtt["proxied_ms"] = measure_rtt(proxy.url)
            finally:
                proxy.stop()

    def close(self) -> None:
        self.sampler.close()
        self.admin.close()
        self.services.stop()
        self.shop.stop()

    def settings(self) -> dict[str, str]:
        settings = {**COMMON_SETTINGS, **spider_modules_setting()}
        settings["CONCURRENT_REQUESTS"] = self.concurrency
        settings["CONCURRENT_REQUESTS_PER_DOMAIN"] = self.concurrency
        return settings

    def run_variant(self, kind: str, n_nodes: int, round_no: int) -> dict[str, Any]:
        """Crawl the whole shop once with one design; return its figures."""
        name = variant_name(kind, n_nodes)
        log_dir = self.work / f"round{round_no}-{name}"
        log_dir.mkdir(parents=True, exist_ok=True)
        self.admin.flushall()
        settings = self.settings()
        spider_args: dict[str, str] | None = None
        proxy: Proxy | None = None
        redis_url = self.services.redis_url
        env: dict[str, str] = {}
        if kind == "plain":
            spider = "bench_plain"
            settings.update(plain_settings())
            spider_args = {"seed": self.shop.url}
        else:
            if self.args.redis_rtt > 0:
                proxy = Proxy(redis_url, self.args.redis_rtt, log_dir)
                self.sampler.watch(proxy.pid)
                redis_url = proxy.url
            env["REDIS_URL"] = redis_url
            if kind == "scrapy_redis":
                spider = "bench_scrapy_redis"
                settings.update(SCRAPY_REDIS_SETTINGS)
                settings["MAX_IDLE_TIME_BEFORE_CLOSE"] = str(SCRAPY_REDIS_IDLE_CLOSE)
            else:
                spider = "catalog"
                settings.update(DISTCRAWL_CLOSE_WHEN_DRAINED="1", DISTCRAWL_DRAIN_GRACE="1")
                # the cluster stays paused until every node is up (see _release_when_ready)
                pause(self.admin, KEYS)
            self.admin.lpush(START_URLS_KEY, self.shop.url)
        t_start = time.time()
        before = redis_snapshot(self.admin)
        rusage_before = resource.getrusage(resource.RUSAGE_CHILDREN)
        nodes = [
            Node(
                spider,
                node_id=f"{name}-{i + 1}",
                log_dir=log_dir,
                settings=settings,
                env=env,
                spider_args=spider_args,
            )
            for i in range(n_nodes)
        ]
        for node in nodes:
            self.sampler.watch(node.pid)
        try:
            if kind == "distcrawl":
                _release_when_ready(self.admin, nodes)
            finished = wait_all(nodes, self.args.timeout)
        finally:
            for node in nodes:
                node.stop(timeout=10)
        rusage_after = resource.getrusage(resource.RUSAGE_CHILDREN)
        after = redis_snapshot(self.admin)
        proxy_stats = proxy.stop() if proxy is not None else {}
        entries = self.shop.log(since=t_start)
        pages = page_fetches(entries)
        result: dict[str, Any] = {
            "variant": name,
            "nodes": n_nodes,
            "finished": finished,
            "exit_codes": [node.proc.returncode for node in nodes],
            "pages": len(pages),
            "distinct_pages": len({e["path"] for e in pages}),
            "expected_pages": self.expected_pages,
            "items_scraped": items_scraped(nodes),
            "expected_items": self.args.products,
        }
        result["complete"] = result["distinct_pages"] >= self.expected_pages
        if not (finished and result["complete"]) or any(n.proc.returncode for n in nodes):
            self.failed = True  # the work folder (node logs) is kept
            result["log_dir"] = str(log_dir)
            result["log_tail"] = [line for n in nodes for line in n.log().splitlines()[-15:]]
        if len(entries) < 2 or not pages:
            result.update(pps=None, seconds=0.0)
            return result
        t_first, t_last = entries[0]["t"], entries[-1]["t"]
        window = max(1e-6, t_last - t_first)
        cpu = self.sampler.cpu_between([n.pid for n in nodes], t_first, t_last)
        cpu_total = (rusage_after.ru_utime + rusage_after.ru_stime) - (
            rusage_before.ru_utime + rusage_before.ru_stime
        )
        n_pages = len(pages)
        sampler = self.sampler
        shop_cpu = sampler.cpu_between([self.shop.pid], t_first, t_last)
        redis_cpu = sampler.cpu_between([self.redis_pid], t_first, t_last)
        proxy_cpu = sampler.cpu_between([proxy.pid], t_first, t_last) if proxy else 0.0
        busy = sampler.cpu_between([sampler.MACHINE], t_first, t_last)
        ours = cpu + shop_cpu + redis_cpu + proxy_cpu
        result["cpu_cores"] = {
            "nodes": round(cpu / window, 2),
            "shop": round(shop_cpu / window, 2),
            "redis": round(redis_cpu / window, 2),
            "proxy": round(proxy_cpu / window, 2),
            "machine_busy": round(busy / window, 2),
            "others": round(max(0.0, busy - ours) / window, 2),
        }
        result.update(
            seconds=round(window, 2),
            pps=round(n_pages / window, 1),
            steady_pps=steady_rate(pages),
            pages_per_second=per_second(pages, t_first),
            ramp_up_s=round(pages[max(0, len(pages) // 20 - 1)]["t"] - t_first, 2),
            cpu_s_per_1000_pages=round(cpu * 1000 / n_pages, 3),
            cpu_total_s_per_1000_pages=round(cpu_total * 1000 / n_pages, 3),
            cpu_s=round(cpu, 2),
            cpu_total_s=round(cpu_total, 2),
        )
        if kind != "plain":
            delta = redis_delta(before, after)
            result.update(
                redis_commands_per_page=round(delta["commands"] / n_pages, 3),
                redis_roundtrips_per_page=round(delta["roundtrips"] / n_pages, 3),
                redis_script_calls_per_page=round(delta["script_calls"] / n_pages, 3),
                redis_cpu_s_per_1000_pages=round(delta["cpu_s"] * 1000 / n_pages, 3),
                redis_by_command={k: round(v / n_pages, 3) for k, v in delta["by_command"].items()},
                # Redis' own timing of each command (INFO commandstats usec) per page: fcall
                # includes the script's commands, listed again by name; the rest of
                # redis_cpu_s_per_1000_pages is I/O, the event loop and the AOF
                redis_us_per_page_by_command={
                    k: round(v / n_pages, 2)
                    for k, v in sorted(delta["usec_by_command"].items(), key=lambda kv: -kv[1])
                    if v / n_pages >= 0.01
                },
            )
            if proxy_stats:
                result.update(
                    proxy_client_commands_per_page=round(proxy_stats["commands"] / n_pages, 3),
                    proxy_roundtrips_per_page=round(proxy_stats["roundtrips"] / n_pages, 3),
                )
        return result

    def run_round(self, round_no: int, plan: list[tuple[str, int]]) -> dict[str, Any]:
        # each round starts one variant later, so slow drifts of the machine's load do not
        # always favour the same variant
        offset = round_no % len(plan)
        order = plan[offset:] + plan[:offset]
        results: dict[str, Any] = {"load_before": load_average()}
        for kind, n in order:
            result = self.run_variant(kind, n, round_no)
            results[result["variant"]] = result
            self.say(
                f"round {round_no + 1}: {result['variant']:<18} "
                f"{_fmt(result.get('pps'))} pages/s  {result['pages']} pages in "
                f"{result.get('seconds', 0):.1f}s"
                f"  cpu/1000 {_fmt(result.get('cpu_s_per_1000_pages'))}"
                f"  rt/page {_fmt(result.get('redis_roundtrips_per_page'))}"
                f"  cmd/page {_fmt(result.get('redis_commands_per_page'))}"
                f"  cores {result.get('cpu_cores', {})}"
            )
        results["load_after"] = load_average()
        return results

    def say(self, text: str) -> None:
        print(text, file=sys.stderr if self.args.json else sys.stdout, flush=True)


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}" if value < 100 else f"{value:.0f}"


def _ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a and b else None


def summarize(
    rounds: list[dict[str, Any]], names: list[str], node_counts: list[int]
) -> dict[str, Any]:
    def med(variant: str, key: str) -> float | None:
        value = median(r.get(variant, {}).get(key) for r in rounds)
        return None if value is None else round(value, 3)

    def ratio(a: str, b: str) -> float | None:
        value = median(_ratio(r.get(a, {}).get("pps"), r.get(b, {}).get("pps")) for r in rounds)
        return None if value is None else round(value, 3)

    out: dict[str, Any] = {
        "plain_pps": med("plain", "pps"),
        "scrapy_redis_pps": med("scrapy_redis", "pps"),
        "distcrawl_pps": med("distcrawl", "pps"),
        "distcrawl_2nodes_pps": med("distcrawl_2nodes", "pps"),
        "ratio_vs_plain": ratio("distcrawl", "plain"),
        "ratio_vs_scrapy_redis": ratio("distcrawl", "scrapy_redis"),
        "redis_roundtrips_per_page": med("distcrawl", "redis_roundtrips_per_page"),
        "redis_commands_per_page": med("distcrawl", "redis_commands_per_page"),
        "scrapy_redis_roundtrips_per_page": med("scrapy_redis", "redis_roundtrips_per_page"),
        "scrapy_redis_commands_per_page": med("scrapy_redis", "redis_commands_per_page"),
        "cpu_s_per_1000_pages": {n: med(n, "cpu_s_per_1000_pages") for n in names},
        "cpu_total_s_per_1000_pages": {n: med(n, "cpu_total_s_per_1000_pages") for n in names},
        "redis_roundtrips_per_page_by_variant": {
            n: med(n, "redis_roundtrips_per_page") for n in names if n != "plain"
        },
        "redis_commands_per_page_by_variant": {
            n: med(n, "redis_commands_per_page") for n in names if n != "plain"
        },
        "redis_cpu_s_per_1000_pages": {
            n: med(n, "redis_cpu_s_per_1000_pages") for n in names if n != "plain"
        },
        "pps_by_variant": {n: med(n, "pps") for n in names},
        "steady_pps_by_variant": {n: med(n, "steady_pps") for n in names},
    }
    if any("proxy_roundtrips_per_page" in r.get(n, {}) for r in rounds for n in names):
        out["proxy_roundtrips_per_page_by_variant"] = {
            n: med(n, "proxy_roundtrips_per_page") for n in names if n != "plain"
        }
        out["proxy_client_commands_per_page_by_variant"] = {
            n: med(n, "proxy_client_commands_per_page") for n in names if n != "plain"
        }
    if len(node_counts) > 1:
        scaling: dict[str, Any] = {}
        for n in node_counts:
            scaling[str(n)] = med(variant_name("distcrawl", n), "pps")
        for n in node_counts:
            if n != 1:
                scaling[f"ratio_{n}_vs_1"] = ratio(variant_name("distcrawl", n), "distcrawl")
                scaling[f"steady_ratio_{n}_vs_1"] = median(
                    _ratio(
                        r.get(variant_name("distcrawl", n), {}).get("steady_pps"),
                        r.get("distcrawl", {}).get("steady_pps"),
                    )
                    for r in rounds
                )
        out["scaling"] = scaling
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--products", type=int, help="shop size (default: enough for >= 10 s)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--nodes", default="1,2", help="distcrawl node counts, e.g. 1,2,4,8")
    parser.add_argument("--latency", type=float, default=0.0, metavar="MS", help="shop latency")
    parser.add_argument(
        "--redis-rtt", type=float, default=0.0, metavar="MS",
        help="round-trip time a delaying proxy adds between the nodes and Redis",
    )  # fmt: skip
    parser.add_argument(
        "--variants", default="plain,scrapy_redis,distcrawl",
        help="which designs to run (distcrawl always runs with 1 node too)",
    )  # fmt: skip
    parser.add_argument("--concurrency", type=int, default=16, help="CONCURRENT_REQUESTS")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per variant")
    parser.add_argument("--keep", action="store_true", help="keep the work folder (node logs)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)

    node_counts = sorted({1, *(int(n) for n in args.nodes.split(",") if n.strip())})
    kinds = [k.strip() for k in args.variants.split(",") if k.strip()]
    unknown = set(kinds) - {"plain", "scrapy_redis", "distcrawl"}
    if unknown:
        parser.error(f"unknown variants: {', '.join(sorted(unknown))}")
    if args.products is None:
        args.products = auto_products(args.latency, max(node_counts), args.concurrency)
    plan = [(k, 1) for k in ("plain", "scrapy_redis") if k in kinds]
    plan += [("distcrawl", n) for n in node_counts]
    names = [variant_name(k, n) for k, n in plan]

    work = Path(tempfile.mkdtemp(prefix="distcrawl-throughput-"))
    started = time.time()
    load_before = load_average()
    bench = Bench(args, work)
    rounds: list[dict[str, Any]] = []
    try:
        bench.say(
            f"shop {bench.shop.url}: {args.products} products ({bench.expected_pages} pages), "
            f"latency {args.latency:g} ms, redis rtt {args.redis_rtt:g} ms; work {work}"
        )
        for round_no in range(args.rounds):
            rounds.append(bench.run_round(round_no, plan))
    finally:
        bench.close()
    summary = summarize(rounds, names, node_counts)
    warnings = []
    for r in rounds:
        for n in names:
            v = r.get(n, {})
            if not v.get("finished", True) or not v.get("complete", True):
                warnings.append(f"{n}: incomplete crawl ({v.get('distinct_pages')} pages)")
            elif v.get("items_scraped", args.products) != args.products:
                warnings.append(f"{n}: {v.get('items_scraped')} items of {args.products} products")
            elif v.get("seconds", 0) < MIN_SECONDS:
                warnings.append(f"{n}: ran {v.get('seconds')} s (< {MIN_SECONDS:g} s)")
    summary.update(
        products=args.products,
        pages=bench.expected_pages,
        latency_ms=args.latency,
        redis_rtt_ms=args.redis_rtt,
        redis_ping_ms=bench.rtt,
        rounds_run=args.rounds,
        settings={k: v for k, v in {**COMMON_SETTINGS, **bench.settings()}.items()},
        machine={
            "cpus": _cpus(),
            "load_before": load_before,
            "load_after": load_average(),
            "seconds": round(time.time() - started, 1),
        },
        warnings=sorted(set(warnings)),
        rounds=rounds,
    )
    if args.keep or bench.failed:
        summary["work"] = str(work)
    else:
        shutil.rmtree(work, ignore_errors=True)
    write_result(summary)
    if args.json:
        print(json.dumps(summary, sort_keys=False))
    else:
        print_table(summary, names)
    return 0


def _cpus() -> int:
    return len(os.sched_getaffinity(0))


def print_table(summary: dict[str, Any], names: list[str]) -> None:
    print()
    print(f"{'variant':<18} {'pages/s':>8} {'cpu s/1k pages':>15} {'rt/page':>8} {'cmd/page':>9}")
    for n in names:
        print(
            f"{n:<18} {_fmt(summary['pps_by_variant'].get(n)):>8} "
            f"{_fmt(summary['cpu_s_per_1000_pages'].get(n)):>15} "
            f"{_fmt(summary['redis_roundtrips_per_page_by_variant'].get(n)):>8} "
            f"{_fmt(summary['redis_commands_per_page_by_variant'].get(n)):>9}"
        )
    print(
        f"\nratio vs plain {summary['ratio_vs_plain']}  ratio vs scrapy-redis "
        f"{summary['ratio_vs_scrapy_redis']}  (medians of per-round ratios)"
    )
    if "scaling" in summary:
        print(f"scaling {json.dumps(summary['scaling'])}")
    for warning in summary["warnings"]:
        print(f"warning: {warning}")


if __name__ == "__main__":
    sys.exit(main())
