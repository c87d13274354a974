"""What sites ask, measured with real nodes against real local sites (``bench/politeness.py``):
a robots.txt Crawl-delay, a server shared by several sites, a robots.txt that answers 5xx, and
a site whose pages never answer beside an ordinary shop."""

from __future__ import annotations

import bisect
import itertools
import json
import statistics
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import redis
from _processes import Node, Services, wait_all
from _settings import START_URLS_KEY

from distcrawl.demo.config import ShopConfig
from distcrawl.demo.shop import DemoShop
from distcrawl.frontier.store import FrontierKeys

__all__ = ["crawl_delay", "hanging_site", "robots_5xx", "server_budget"]

SPIDER = "catalog"
KEYS = FrontierKeys(spider=SPIDER, start_urls=START_URLS_KEY)
#: the resolver that answers every name under .localhost with 127.0.0.1 (many sites, one server)
LOCALHOST_RESOLVER = "distcrawl.demo.hosts.LocalhostResolver"
#: the loopback addresses the scenarios' sites bind (distinct addresses: distinct servers)
LOOPBACK_SITES = "127.0.0.1,127.0.0.2,127.0.0.3,localhost"
#: seconds a scenario may take before its nodes are stopped
TIMEOUT = 240.0


def max_in_window(times: Iterable[float], window: float) -> int:
    """Most arrivals in any half-open window ``[t, t + window)``."""
    ts = sorted(times)
    return max((bisect.bisect_left(ts, t + window, lo=i) - i for i, t in enumerate(ts)), default=0)


def _wait_for(predicate: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


class _Cluster:
    """``nodes`` nodes on a fresh Redis (no MongoDB: the frontier is what is measured)."""

    def __init__(
        self, work: Path, nodes: int, settings: dict[str, str], env: dict[str, str] | None = None
    ) -> None:
        self.work = work
        work.mkdir(parents=True, exist_ok=True)
        self.services = Services(home=work / "services")
        base = {
            "CONCURRENT_REQUESTS": "16",
            "CONCURRENT_REQUESTS_PER_DOMAIN": "16",
            "CONCURRENT_ITEMS": "16",
            "LOG_LEVEL": "INFO",
            "DISTCRAWL_EMBEDDED": "False",
            "DISTCRAWL_CLOSE_WHEN_DRAINED": "1",
            "DISTCRAWL_DRAIN_GRACE": "1.5",
            "DISTCRAWL_HEARTBEAT_INTERVAL": "0.5",
            "ITEM_PIPELINES": "{}",
        }
        node_env = {
            "REDIS_URL": self.services.redis_url,
            "DISTCRAWL_ALLOW_PRIVATE": LOOPBACK_SITES,
            **(env or {}),
        }
        self.admin = redis.Redis.from_url(self.services.redis_url)
        self.nodes = [
            Node(
                SPIDER,
                node_id=f"polite-{i + 1}",
                log_dir=work,
                settings={**base, **settings},
                env=node_env,
            )
            for i in range(nodes)
        ]
        if not _wait_for(lambda: self.admin.zcard(KEYS.nodes) >= nodes, 60):
            self.close()
            raise RuntimeError("the nodes did not all start")

    def seed(self, *urls: str) -> float:
        t0 = time.time()
        self.admin.lpush(START_URLS_KEY, *urls)
        return t0

    def finish(self, timeout: float = TIMEOUT) -> bool:
        return wait_all(self.nodes, timeout)

    def close(self) -> list[int | None]:
        for node in self.nodes:
            node.stop(timeout=10)
        codes = [node.proc.returncode for node in self.nodes]
        self.admin.close()
        self.services.stop()
        return codes


def crawl_delay(work: Path, *, nodes: int, delay: float, revisit_for: float) -> dict[str, Any]:
    """A site whose robots.txt says ``Crawl-delay: delay``, crawled once and then in revisit
    mode: the most requests it saw in any window of ``delay`` seconds (robots.txt included)."""
    out: dict[str, Any] = {}
    for mode in ("once", "revisit"):
        shop = DemoShop(ShopConfig(products=4, page_size=4, crawl_delay=delay)).start()
        try:
            settings: dict[str, str] = {}
            if mode == "revisit":
                settings = {"DISTCRAWL_REVISIT": "*:1s", "DISTCRAWL_CLOSE_WHEN_DRAINED": "0"}
            cluster = _Cluster(work / f"delay-{mode}", nodes, settings)
            try:
                t0 = cluster.seed(shop.url)
                if mode == "revisit":
                    time.sleep(revisit_for)  # revisits fall due every second; the delay paces them
                    finished = True
                else:
                    finished = cluster.finish()
            finally:
                codes = cluster.close()
            log = shop.request_log()
        finally:
            shop.stop()
        times = [e["t"] for e in log]
        out[mode] = {
            "max_requests_per_window": max_in_window(times, delay),
            "requests": len(times),
            "robots_fetches": sum(1 for e in log if e["path"] == "/robots.txt"),
            "seconds": round(max(times, default=t0) - t0, 2),
            "min_gap_s": round(min((b - a for a, b in itertools.pairwise(times)), default=0), 3),
            "finished": finished,
            "exit_codes": codes,
        }
    return {
        "crawl_delay_s": delay,
        "crawl_delay_max_requests_per_window": max(
            out["once"]["max_requests_per_window"], out["revisit"]["max_requests_per_window"]
        ),
        "crawl_delay_runs": out,
    }


def server_budget(work: Path, *, nodes: int, sites: int, limit: int) -> dict[str, Any]:
    """``sites`` host names on one server (all resolve to 127.0.0.1) with a server limit of
    ``limit``: the most requests the server answered at once."""
    shop = DemoShop(ShopConfig(products=10, page_size=5, latency_ms=50)).start()
    names = [f"shop{i}.localhost" for i in range(sites)]
    settings = {
        "TWISTED_DNS_RESOLVER": LOCALHOST_RESOLVER,
        "DISTCRAWL_SERVER_LIMITS": json.dumps({"concurrency": limit}),
    }
    env = {"DISTCRAWL_ALLOW_PRIVATE": ",".join([LOOPBACK_SITES, *names])}
    try:
        cluster = _Cluster(work / "server", nodes, settings, env)
        try:
            t0 = cluster.seed(*(f"http://{name}:{shop.port}/" for name in names))
            finished = cluster.finish()
            sites_noted = cluster.admin.zscore(KEYS.servers, "127.0.0.1")
        finally:
            codes = cluster.close()
        log = shop.request_log()
        peak = shop.peak_in_flight()
    finally:
        shop.stop()
    return {
        "server_sites": sites,
        "server_limit": limit,
        "server_max_concurrency": peak,
        "server_requests": len(log),
        "server_seconds": round(max((e["t"] for e in log), default=t0) - t0, 2),
        "server_sites_noted": int(sites_noted or 0),
        "server_finished": finished,
        "server_exit_codes": codes,
    }


def robots_5xx(work: Path, *, nodes: int, tries: int) -> dict[str, Any]:
    """A site whose robots.txt answers 503 (``tries`` times) beside an ordinary one, then heals:
    the pages of the site fetched before its robots.txt was read (0: none)."""
    shop = DemoShop(ShopConfig(products=10, page_size=5, robots_fault="503")).start()
    other = DemoShop(ShopConfig(products=30, host="127.0.0.2")).start()
    settings = {"RETRY_BACKOFF_BASE": "0.5", "RETRY_BACKOFF_MAX": "2"}
    try:
        cluster = _Cluster(work / "robots", nodes, settings)
        try:
            cluster.seed(shop.url, other.url)
            robots_503 = lambda: sum(1 for e in shop.request_log() if e["status"] == 503)  # noqa: E731
            held = _wait_for(lambda: robots_503() >= tries, 120)
            shop.set_faults(robots_fault="")
            finished = cluster.finish()
        finally:
            codes = cluster.close()
        log = shop.request_log()
    finally:
        shop.stop()
        other.stop()
    first_read = next(
        (i for i, e in enumerate(log) if e["path"] == "/robots.txt" and e["status"] == 200),
        len(log),
    )
    before = [e for e in log[:first_read] if e["path"] != "/robots.txt"]
    pages = [e for e in log if e["path"] != "/robots.txt" and e["status"] == 200]
    return {
        "robots_5xx_pages_fetched_before_robots": len(before),
        "robots_5xx_answers": sum(1 for e in log if e["status"] == 503),
        "robots_5xx_held_until_tries": held,
        "robots_5xx_pages_after": len(pages),
        "robots_5xx_complete": {e["path"].split("?")[0] for e in pages}
        >= {p[len(shop.url) - 1 :] for p in shop.expected_product_urls()},
        "robots_5xx_finished": finished,
        "robots_5xx_exit_codes": codes,
    }


def _shop_time(work: Path, nodes: int, products: int, hanging: int) -> dict[str, Any]:
    """Seconds from the seeds to the shop's last product page, with ``hanging`` URLs of a site
    whose pages never answer seeded beside it (0: the shop alone)."""
    shop = DemoShop(ShopConfig(products=products)).start()
    stall = (
        DemoShop(ShopConfig(products=10, host="127.0.0.3", hang=True)).start() if hanging else None
    )
    want = {p[len(shop.url) - 1 :] for p in shop.expected_product_urls()}

    def done() -> bool:
        got = {e["path"].split("?")[0] for e in shop.request_log() if e["status"] == 200}
        return want <= got

    try:
        cluster = _Cluster(work, nodes, {})
        try:
            seeds = [shop.url]
            if stall is not None:
                seeds += [f"{stall.url}p/{i}.html" for i in range(hanging)]
            t0 = cluster.seed(*seeds)
            complete = _wait_for(done, TIMEOUT)
        finally:
            cluster.close()
        log = shop.request_log()
    finally:
        shop.stop()
        if stall is not None:
            stall.stop()
    last = max((e["t"] for e in log if e["status"] == 200), default=t0)
    return {"seconds": round(last - t0, 3), "complete": complete}


def hanging_site(
    work: Path, *, nodes: int, products: int, hanging: int, rounds: int
) -> dict[str, Any]:
    """The shop's crawl time beside a site whose pages never answer, against the shop alone:
    ``rounds`` of each, alternated; the slowdown is the ratio of their medians."""
    alone: list[float] = []
    beside: list[float] = []
    complete = True
    for n in range(rounds):
        for label, urls, into in (("alone", 0, alone), ("beside", hanging, beside)):
            run = _shop_time(work / f"hang-{label}-{n}", nodes, products, urls)
            into.append(run["seconds"])
            complete = complete and run["complete"]
    return {
        "hanging_site_slowdown": round(statistics.median(beside) / statistics.median(alone), 3),
        "hanging_site_urls": hanging,
        "hanging_shop_products": products,
        "hanging_shop_alone_s": alone,
        "hanging_shop_beside_s": beside,
        "hanging_complete": complete,
    }
