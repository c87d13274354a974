"""The private Scrapy internals distcrawl relies on, checked when a node opens.

Without them a node would fail silently (acks stop, every lease returns at close: an endless
re-crawl), so a Scrapy upgrade that renames one stops the node at once with an error naming it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import scrapy
from scrapy.downloadermiddlewares.retry import RetryMiddleware
from scrapy.downloadermiddlewares.robotstxt import RobotsTxtMiddleware

__all__ = [
    "ScrapyInternalsMissing",
    "check_engine",
    "check_retry_middleware",
    "check_robots_middleware",
]

#: the Scrapy version these hooks were checked against
TESTED_WITH = "2.19"


class ScrapyInternalsMissing(RuntimeError):
    """A private Scrapy hook distcrawl needs is missing or behaves differently."""

    def __init__(self, hooks: list[str]) -> None:
        self.hooks = hooks
        super().__init__(
            f"distcrawl needs Scrapy internals this Scrapy {scrapy.__version__} does not have: "
            f"{'; '.join(hooks)}. The node stops here rather than fail silently (without "
            f"them acks stop and every lease is crawled again, or retries and robots.txt "
            f"break); install a Scrapy version distcrawl supports (tested with {TESTED_WITH}.x)"
        )


class _Probe:
    """Stands for a request in the probe of the engine slot's in-progress set."""


def check_engine(
    engine: Any, in_progress: Callable[[set[Any], Callable[[Any], None]], set[Any]]
) -> None:
    """The engine's private slot: ``engine._slot`` with ``inprogress`` (a set the slot removes
    finished requests from with ``.remove()``, which is where the frontier's acks come from),
    ``nextcall.schedule()`` (to wake the engine when leases arrive), the downloader's ``active``
    set (free download slots), and ``_start`` (whether the spider's ``start()`` may still yield
    requests: a crawl that ends when drained waits for it). ``in_progress(items, on_done)``:
    the set the scheduler puts in the slot's place, probed here as it will be used. Raises
    :class:`ScrapyInternalsMissing`."""
    missing: list[str] = []
    slot = getattr(engine, "_slot", None)
    if slot is None:
        raise ScrapyInternalsMissing(["ExecutionEngine._slot (None or missing at open)"])
    if not isinstance(getattr(slot, "inprogress", None), set):
        missing.append("ExecutionEngine._slot.inprogress (a set of requests in progress)")
    if not callable(getattr(getattr(slot, "nextcall", None), "schedule", None)):
        missing.append("ExecutionEngine._slot.nextcall.schedule()")
    for name in ("add_request", "remove_request"):
        if not callable(getattr(slot, name, None)):
            missing.append(f"ExecutionEngine._slot.{name}()")
    if not missing:
        # behaviour, not just names: a finished request must leave through .remove()
        done: list[Any] = []
        original = slot.inprogress
        slot.inprogress = in_progress(set(), done.append)
        probe = _Probe()
        try:
            slot.add_request(probe)
            slot.remove_request(probe)
        except Exception as exc:
            missing.append(f"ExecutionEngine._slot.remove_request() failed: {exc!r}")
        finally:
            slot.inprogress = original
        if done != [probe] and not any("remove_request" in m for m in missing):
            missing.append("ExecutionEngine._slot.remove_request() -> inprogress.remove()")
    downloader = getattr(engine, "downloader", None)
    if not hasattr(getattr(downloader, "active", None), "__len__"):
        missing.append("ExecutionEngine.downloader.active (the requests being downloaded)")
    if not hasattr(engine, "_start"):
        missing.append("ExecutionEngine._start (the spider's start(), None once exhausted)")
    if missing:
        raise ScrapyInternalsMissing(missing)


def check_retry_middleware(cls: type[Any] = RetryMiddleware) -> None:
    """``RetryMiddleware._retry(request, reason)``: the retry request, or None at the last try."""
    if not callable(getattr(cls, "_retry", None)):
        raise ScrapyInternalsMissing(["RetryMiddleware._retry(request, reason)"])


def check_robots_middleware(middleware: RobotsTxtMiddleware) -> None:
    """``RobotsTxtMiddleware._parsers``: netloc -> parser (or the Deferred of its fetch)."""
    if not isinstance(getattr(middleware, "_parsers", None), dict):
        raise ScrapyInternalsMissing(["RobotsTxtMiddleware._parsers (netloc -> robots parser)"])
