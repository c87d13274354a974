"""Redis' memory as a node cares about it: the refusal to start where Redis may evict the
frontier, and a warning when Redis nears its ``maxmemory`` (at the limit it refuses writes and
every node waits, see :mod:`~distcrawl.node.scheduler.outage`)."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from redis.exceptions import ResponseError

from distcrawl.base.names import stats as stat_keys
from distcrawl.frontier.memory import DEFAULT_MEMORY_WARN, EVICTION_COST, read_memory_async
from distcrawl.frontier.outages import classify

if TYPE_CHECKING:
    from scrapy.statscollectors import StatsCollector

    from distcrawl.frontier.memory import RedisMemory

__all__ = ["MEMORY_CHECK_INTERVAL", "EvictingRedis", "MemoryWatch", "check_memory_at_open"]

logger = logging.getLogger(__name__)

#: seconds between two reads of Redis' memory by a running node
MEMORY_CHECK_INTERVAL = 60.0
#: a warning about memory is given again only once use fell below this share of the limit
_WARN_AGAIN_BELOW = 0.7


class EvictingRedis(RuntimeError):
    """Redis' ``maxmemory-policy`` may evict the frontier's keys and no setting accepts it."""


def _mb(n: int) -> str:
    return f"{n / 1024 / 1024:.0f} MB"


def _near_limit(memory: RedisMemory) -> str:
    share = memory.share or 0.0
    return (
        f"Redis uses {share:.0%} of its maxmemory ({_mb(memory.used)} of "
        f"{_mb(memory.maxmemory)}, policy {memory.policy}): at the limit it refuses writes and "
        "every node waits until memory is freed; raise maxmemory"
    )


async def _read(client: Any) -> RedisMemory | None:
    """Redis' memory; None where ``INFO`` is refused (an ACL): then nothing is checked."""
    try:
        return await read_memory_async(client)
    except ResponseError as exc:
        if classify(exc) is not None:
            raise
        logger.warning("Cannot read Redis' memory (INFO memory: %s); it is not checked", exc)
        return None


async def check_memory_at_open(
    client: Any, *, allow_eviction: bool, warn: float = DEFAULT_MEMORY_WARN
) -> None:
    """Raise :class:`EvictingRedis` where Redis may evict the frontier and
    ``DISTCRAWL_ALLOW_EVICTION`` does not accept it; warn near ``maxmemory``."""
    memory = await _read(client)
    if memory is None:
        return
    where = f" (server {memory.server})" if memory.server else ""
    if memory.evicting:
        text = (
            f"Redis' maxmemory-policy is {memory.policy}{where}: at its memory limit Redis "
            f"evicts any key, the crawl's too: {EVICTION_COST}. Set maxmemory-policy "
            "noeviction (or a volatile-* policy), or DISTCRAWL_ALLOW_EVICTION = True to accept it"
        )
        if not allow_eviction:
            error = EvictingRedis(text)
            logger.error("Node refuses to start: %s", error)
            raise error
        logger.warning("%s (accepted by DISTCRAWL_ALLOW_EVICTION)", text.split(". Set")[0])
    if memory.share is not None and memory.share >= warn:
        logger.warning("%s", _near_limit(memory))


class MemoryWatch:
    """Reads Redis' memory every ``interval`` seconds while the node runs: publishes it in
    the stats (``frontier/redis_memory_used``, ``frontier/redis_maxmemory``, so ``status``
    shows what nodes saw) and warns once when use crosses ``warn`` of ``maxmemory``."""

    def __init__(
        self,
        client: Any,
        stats: StatsCollector,
        *,
        warn: float = DEFAULT_MEMORY_WARN,
        interval: float = MEMORY_CHECK_INTERVAL,
    ) -> None:
        self.client = client
        self.stats = stats
        self.warn = warn
        self.interval = interval
        self._next = 0.0
        self._warned = False
        self._off = False

    async def tick(self) -> None:
        now = time.monotonic()
        if self._off or now < self._next:
            return
        self._next = now + self.interval
        memory = await _read(self.client)
        if memory is None:
            self._off = True
            return
        self.stats.set_value(stat_keys.REDIS_MEMORY_USED, memory.used)
        self.stats.set_value(stat_keys.REDIS_MAXMEMORY, memory.maxmemory)
        share = memory.share
        if share is None:
            return
        if share >= self.warn and not self._warned:
            self._warned = True
            logger.warning("%s", _near_limit(memory))
        elif share < _WARN_AGAIN_BELOW and self._warned:
            self._warned = False
            logger.info("Redis uses %.0f%% of its maxmemory again", share * 100)
