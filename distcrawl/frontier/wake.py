"""The wake channel: an idle node hears at once that work arrived in a shard (links pushed by
another node, leases returned, the cluster resumed), instead of at its next poll."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

from redis.exceptions import RedisError

__all__ = ["WakeListener"]

#: seconds before a lost subscription is tried again (doubling up to MAX_RETRY_DELAY)
RETRY_DELAY = 0.5
MAX_RETRY_DELAY = 5.0


class WakeListener:
    """Subscribes ``client`` (redis.asyncio, single or cluster) to ``channel`` and calls
    ``on_wake(shard)`` for each message (``shard`` None: anywhere, e.g. ``resumed``) until
    ``stopped()`` says so. Redis outages are the I/O loop's to report: this one only waits and
    subscribes again."""

    def __init__(
        self,
        client: Any,
        channel: str,
        *,
        on_wake: Callable[[int | None], None],
        stopped: Callable[[], bool],
    ) -> None:
        self.client = client
        self.channel = channel
        self.on_wake = on_wake
        self.stopped = stopped

    async def run(self) -> None:
        delay = RETRY_DELAY
        while not self.stopped():
            pubsub = self.client.pubsub(ignore_subscribe_messages=True)
            try:
                await pubsub.subscribe(self.channel)
                delay = RETRY_DELAY
                while not self.stopped():
                    message = await pubsub.get_message(timeout=1.0)
                    if message is None:
                        continue
                    data = message.get("data")
                    shard = data.decode() if isinstance(data, bytes) else str(data)
                    self.on_wake(int(shard) if shard.isdigit() else None)
            except (RedisError, OSError):
                await asyncio.sleep(delay)
                delay = min(delay * 2, MAX_RETRY_DELAY)
            finally:
                with contextlib.suppress(Exception):
                    await pubsub.aclose()
