"""The processes of a bench: the demo shop, crawl nodes and fresh servers (Redis, SecantusDB),
each in a process of its own, stopped by PID; and what a complete crawl of the shop fetches."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from _settings import ALLOW_PRIVATE, BENCH_DIR


def _unwind(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)


def unwind_on_sigterm() -> None:
    """Make SIGTERM (a ``timeout`` running out, a cancelled job) unwind the bench as Ctrl-C
    does: its ``finally`` blocks stop the shop, servers and nodes it started, which Python's
    default SIGTERM would leave running. Only in the main thread, and only where nothing else
    handles SIGTERM yet."""
    main_thread = threading.current_thread() is threading.main_thread()
    if main_thread and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _unwind)


# every bench that starts processes imports this module; a test process that imports it keeps
# its own SIGTERM
if Path(getattr(sys.modules["__main__"], "__file__", None) or "/").resolve().parent == BENCH_DIR:
    unwind_on_sigterm()


def stop_process(proc: subprocess.Popen[Any], timeout: float = 20.0) -> None:
    """SIGTERM *proc* (only this PID), wait, then SIGKILL it; a no-op if it has exited."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class ShopProcess:
    """The demo shop (``python -m distcrawl.demo.server``) in a process of its own, so it never
    shares a GIL with the benchmark driver; checked over its ``/_shop/`` HTTP API."""

    def __init__(
        self,
        *,
        products: int,
        latency_ms: float = 0.0,
        jitter_ms: float = 0.0,
        seed: int = 0,
        hostile: bool = False,
    ) -> None:
        self.products = products
        self.latency_ms = latency_ms
        cmd = [sys.executable, "-m", "distcrawl.demo.server", "--products", str(products)]
        cmd += ["--seed", str(seed), "--latency", str(latency_ms)]
        cmd += ["--latency-jitter", str(jitter_ms)]
        if hostile:
            cmd.append("--hostile")  # the trap and garbage pages too
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            self.proc.wait()
            raise RuntimeError(f"the demo shop did not start (exit {self.proc.returncode})")
        self.url: str = json.loads(line)["url"]
        self.port = int(self.url.rstrip("/").rsplit(":", 1)[1])
        self.pid = self.proc.pid

    def _get(self, path: str) -> Any:
        with urllib.request.urlopen(self.url.rstrip("/") + path, timeout=60) as answer:
            return json.loads(answer.read())

    def log(self, since: float | None = None) -> list[dict[str, Any]]:
        """The shop's request log (``/_shop/*`` excluded), entries after *since*."""
        return self._get("/_shop/log" + (f"?since={since!r}" if since is not None else ""))

    def truth(self) -> dict[str, Any]:
        return self._get("/_shop/truth")

    def stop(self) -> None:
        stop_process(self.proc)
        if self.proc.stdout is not None:
            self.proc.stdout.close()

    def __enter__(self) -> ShopProcess:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def expected_pages(products: int, seed: int = 0) -> int:
    """Pages a complete crawl fetches: home, category pages, listing pages, product pages."""
    from distcrawl.demo.catalog import Catalog

    catalog = Catalog(products, seed=seed)
    listings = sum(catalog.page_count(leaf) for leaf in catalog.leaves())
    return 1 + len(catalog.tops) + listings + products


def page_fetches(entries: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The successful page fetches of a request log (robots.txt excluded)."""
    return [e for e in entries if e["status"] == 200 and e["path"] != "/robots.txt"]


class Node:
    """One ``scrapy crawl SPIDER`` process on the project settings, with its own log file."""

    def __init__(
        self,
        spider: str,
        *,
        node_id: str,
        log_dir: Path,
        settings: dict[str, str],
        env: dict[str, str] | None = None,
        spider_args: dict[str, str] | None = None,
        wrapper: list[str] | None = None,
        module: str = "scrapy",
    ) -> None:
        """``wrapper``: a command the process runs under (valgrind, for one); ``module``: the
        module run as Scrapy's command line (``_slow_clock``: with a slower clock)."""
        self.spider = spider
        self.node_id = node_id
        self.log_file = log_dir / f"{node_id}.log"
        self.out_file = log_dir / f"{node_id}.out"
        cmd = [*(wrapper or []), sys.executable, "-m", module, "crawl", spider]
        for key, value in {**settings, "LOG_FILE": str(self.log_file)}.items():
            cmd += ["-s", f"{key}={value}"]
        for key, value in (spider_args or {}).items():
            cmd += ["-a", f"{key}={value}"]
        full_env = dict(os.environ)
        python_path = [str(BENCH_DIR), *filter(None, [full_env.get("PYTHONPATH", "")])]
        full_env.update(
            {
                "SCRAPY_SETTINGS_MODULE": "distcrawl.settings",
                "PYTHONPATH": os.pathsep.join(python_path),
                "DISTCRAWL_NODE_ID": node_id,
                "DISTCRAWL_ALLOW_PRIVATE": ALLOW_PRIVATE,
                **(env or {}),  # a bench's own environment wins
            }
        )
        with open(self.out_file, "wb") as out:
            self.proc = subprocess.Popen(
                cmd,
                env=full_env,
                cwd=log_dir,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        self.pid = self.proc.pid
        self.started = time.monotonic()
        self._opened_at: float | None = None

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def crawling_for(self) -> float:
        """Seconds since the node logged "Spider opened" (0 before that)."""
        if self._opened_at is None:
            with contextlib.suppress(OSError):
                if "Spider opened" in self.log_file.read_text(errors="replace"):
                    self._opened_at = time.monotonic()
        return 0.0 if self._opened_at is None else time.monotonic() - self._opened_at

    def kill9(self) -> None:
        """``kill -9`` this node (its PID only), as a crash or power loss would."""
        if self.alive:
            os.kill(self.pid, signal.SIGKILL)
            self.proc.wait()

    def stop(self, timeout: float = 30.0) -> None:
        stop_process(self.proc, timeout)

    def wait(self, timeout: float) -> int | None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            return self.proc.wait(timeout=timeout)
        return None

    def log(self) -> str:
        files = (self.log_file, self.out_file)
        return "\n".join(p.read_text(errors="replace") for p in files if p.exists())


def stats_of(log: str) -> dict[str, int]:
    """The integer stats a node dumped when it closed ({} if it did not)."""
    if "Dumping Scrapy stats:" not in log:
        return {}
    dump = log[log.rindex("Dumping Scrapy stats:") :]
    return {k: int(v) for k, v in re.findall(r"'([^']+)': (\d+),?\n", dump[: dump.find("}\n")])}


def wait_all(nodes: Iterable[Node], timeout: float) -> bool:
    """Wait until every node exited; False (and nothing stopped) when *timeout* ran out."""
    deadline = time.monotonic() + timeout
    return all(node.wait(max(0.0, deadline - time.monotonic())) is not None for node in nodes)


class Services:
    """A fresh Redis-protocol server (and optionally SecantusDB) in a temporary folder.

    valkey-server with its append-only file (``appendfsync everysec``), as the embedded
    default runs; stopped by PID with :meth:`stop`.
    """

    def __init__(self, *, mongo: bool = False, home: Path | None = None) -> None:
        from distcrawl.servers.process import MongoServer, RedisServer

        #: a folder this object made is removed by :meth:`stop` (a bench's Redis data and
        #: append-only file: hundreds of MB after a memory run)
        self._made_home = home is None
        self.home = home or Path(tempfile.mkdtemp(prefix="distcrawl-bench-"))
        self.redis = RedisServer(data_dir=self.home / "redis", log_path=self.home / "redis.log")
        self.mongo = (
            MongoServer(data_dir=self.home / "mongo", log_path=self.home / "mongo.log")
            if mongo
            else None
        )
        try:
            self.redis.start()
            if self.mongo is not None:
                self.mongo.start()
        except BaseException:
            self.stop()
            raise

    @property
    def redis_url(self) -> str:
        return self.redis.url

    @property
    def mongo_uri(self) -> str:
        assert self.mongo is not None
        return self.mongo.uri_for("catalog")

    def stop(self) -> None:
        try:
            self.redis.stop()
            if self.mongo is not None:
                self.mongo.stop()
        finally:
            if self._made_home:
                shutil.rmtree(self.home, ignore_errors=True)

    def __enter__(self) -> Services:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
