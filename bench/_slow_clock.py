"""``python -m _slow_clock crawl SPIDER ...``: Scrapy's command line with the process's
clock running ``DISTCRAWL_BENCH_CLOCK_FACTOR`` times slower (bench/node_ir.py).

Under callgrind a page takes some forty times as long as at full speed, so what a process does
per second of its clock (timers, polls, heartbeats, flush delays, Scrapy's own periodic work)
would weigh forty times as much per page as it does at full speed. Here ``time.monotonic``, which
asyncio's loop, Twisted's asyncio reactor and distcrawl's timers all read, advances that many
times slower, and the selector waits that many times longer for a timeout of the loop: every
period of the process is stretched alike, named or not. ``time.time`` (wall-clock stamps,
which Redis compares with its own clock) is left as it is.
"""

from __future__ import annotations

import os
import selectors
import sys
import time
from typing import Any

FACTOR_VARIABLE = "DISTCRAWL_BENCH_CLOCK_FACTOR"


def install(factor: float) -> None:
    """Slow ``time.monotonic`` and the selectors' timeouts down by ``factor``."""
    real = time.monotonic
    start = real()

    def monotonic() -> float:
        return start + (real() - start) / factor

    time.monotonic = monotonic  # type: ignore[assignment]
    for name in ("EpollSelector", "PollSelector", "SelectSelector", "DevpollSelector"):
        cls = getattr(selectors, name, None)
        if cls is None:
            continue
        original = cls.select

        def select(self: Any, timeout: float | None = None, _original: Any = original) -> Any:
            return _original(self, None if timeout is None else timeout * factor)

        cls.select = select  # type: ignore[method-assign]


def main() -> None:
    install(float(os.environ[FACTOR_VARIABLE]))
    from scrapy.cmdline import execute

    execute(["scrapy", *sys.argv[1:]])


if __name__ == "__main__":
    main()
