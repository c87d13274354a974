"""What the tests that run a plain Scrapy spider on the frontier share: a small HTTP site that
counts its hits, and a crawl run in a subprocess as ``scrapy crawl`` runs it (the asyncio
reactor, the ``distcrawl.Frontier`` add-on, a real Redis).

A test module runs itself as the script: it calls :func:`run_script` with its own
``__file__`` and a spec, and its ``__main__`` reads the spec, crawls with
:func:`frontier_settings` and ends with :func:`write_report`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

__all__ = ["frontier_settings", "run_script", "serve_paths", "write_report"]


class _Handler(BaseHTTPRequestHandler):
    """Each path is a page naming itself; ``/to/X`` redirects to ``/X``."""

    hits: Counter[str]

    def do_GET(self) -> None:
        self.hits[self.path] += 1
        if self.path.startswith("/to/"):
            self.send_response(302)
            self.send_header("Location", "/" + self.path.removeprefix("/to/"))
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = f"<html><body>{self.path}</body></html>".encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@contextmanager
def serve_paths() -> Iterator[tuple[str, Counter[str]]]:
    """A site on 127.0.0.1: its base URL and the hits per path."""
    hits: Counter[str] = Counter()
    handler = type("Handler", (_Handler,), {"hits": hits})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", hits
    finally:
        server.shutdown()
        server.server_close()


def run_script(script: str, tmp_path: Path, redis_url: str, **spec: Any) -> dict[str, Any]:
    """Run ``script`` on a spec of ``spec``, the Redis URL and where to write; return its
    report, with the crawl's log under ``log``."""
    spec_file = tmp_path / "spec.json"
    out = tmp_path / "out.json"
    log = tmp_path / "crawl.log"
    spec_file.write_text(
        json.dumps({**spec, "out": str(out), "log": str(log), "redis_url": redis_url})
    )
    env = dict(os.environ)
    env.pop("SCRAPY_SETTINGS_MODULE", None)
    # the script imports the tests' helpers as its test module does
    tests = str(Path(__file__).resolve().parent)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [tests, env.get("PYTHONPATH")]))
    proc = subprocess.run(
        [sys.executable, script, str(spec_file)],
        env=env,
        cwd=tmp_path,  # no scrapy.cfg: a plain Scrapy project's spider, not distcrawl's settings
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result: dict[str, Any] = json.loads(out.read_text())
    result["log"] = log.read_text()
    return result


def frontier_settings(spec: dict[str, Any]) -> dict[str, Any]:
    """The settings of a crawl in the script: the add-on on the spec's Redis, logging to the
    spec's file, and the spec's upper-case keys as settings of their own."""
    from scrapy.utils.reactor import install_reactor

    install_reactor("twisted.internet.asyncioreactor.AsyncioSelectorReactor")
    return {
        "ADDONS": {"distcrawl.Frontier": 0},
        "REDIS_URL": spec["redis_url"],
        "DISTCRAWL_DRAIN_GRACE": 0.5,
        "LOG_FILE": spec["log"],
        "LOG_LEVEL": "INFO",
        "TELNETCONSOLE_ENABLED": False,
        "REMOTE_CONTROL_ENABLED": False,
        "ROBOTSTXT_OBEY": False,
        **{k: v for k, v in spec.items() if k.isupper()},
    }


def write_report(spec: dict[str, Any], seen: dict[str, Any], crawler: Any) -> None:
    """The script's report: what its spider saw, and the crawl's stats."""
    stats = crawler.stats.get_stats()
    seen["stats"] = {k: v for k, v in stats.items() if isinstance(v, (int, str))}
    Path(spec["out"]).write_text(json.dumps(seen))
