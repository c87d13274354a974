"""The frontier's Redis protocol from Python: key names and calls into ``frontier.lua``.

Works with a synchronous redis-py client (commands, tools) and with ``redis.asyncio``
(the node's scheduler): each method returns what the client returns, a value or an awaitable.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from typing import Any

__all__ = ["Child", "FrontierKeys", "FrontierStore"]

_LUA = resources.files("distcrawl.frontier").joinpath("frontier.lua").read_text("utf-8")


@dataclass(frozen=True)
class FrontierKeys:
    """Every key of one crawl. All but ``start_urls`` share the hash tag ``{spider}``."""

    spider: str
    start_urls: str

    @property
    def prefix(self) -> str:
        return "{" + self.spider + "}"

    def _key(self, name: str) -> str:
        return f"{self.prefix}:{name}"

    @property
    def queue(self) -> str:
        return self._key("queue")

    @property
    def requests(self) -> str:
        return self._key("req")

    @property
    def dupefilter(self) -> str:
        return self._key("dupefilter")

    @property
    def nodes(self) -> str:
        return self._key("nodes")

    @property
    def delayed(self) -> str:
        return self._key("delayed")

    @property
    def dead(self) -> str:
        return self._key("dead")

    @property
    def rejected(self) -> str:
        return self._key("rejected")

    @property
    def paused(self) -> str:
        return self._key("paused")

    def leases(self, node: str) -> str:
        return f"{self.prefix}:leases:{node}"

    def seeding(self, node: str) -> str:
        return f"{self.prefix}:seeding:{node}"

    def node(self, node: str) -> str:
        return f"{self.prefix}:node:{node}"

    def all_keys_pattern(self) -> str:
        return f"{self.prefix}:*"


#: one child request for ``sync``: fingerprint ("" = unfiltered), priority, dont_filter,
#: delay in ms (0 = queue now, > 0 = park as a delayed retry), JSON payload
Child = tuple[str, int, bool, int, str]


class FrontierStore:
    """Thin wrapper over the frontier script; see the header of ``frontier.lua``."""

    def __init__(self, client: Any, keys: FrontierKeys) -> None:
        self.client = client
        self.keys = keys
        self._script = client.register_script(_LUA)

    def _call(self, *args: Any) -> Any:
        return self._script(keys=[self.keys.prefix], args=list(args))

    def sync(
        self,
        node: str,
        *,
        children: list[Child] = (),  # type: ignore[assignment]
        acks: list[str] = (),  # type: ignore[assignment]
        dead: list[tuple[str, str]] = (),  # type: ignore[assignment]
        rejected: list[str] = (),  # type: ignore[assignment]
        seeds_done: bool = False,
        lease: int = 0,
    ) -> Any:
        args: list[Any] = ["sync", node, len(children)]
        for fp, prio, dont_filter, delay_ms, payload in children:
            args += [fp, prio, "1" if dont_filter else "0", delay_ms, payload]
        args.append(len(acks))
        args += acks
        args.append(len(dead))
        for dead_id, record in dead:
            args += [dead_id, record]
        args.append(len(rejected))
        args += rejected
        args += ["1" if seeds_done else "0", lease]
        return self._call(*args)

    def take_seeds(self, node: str, n: int) -> Any:
        return self._call("take_seeds", node, n, self.keys.start_urls)

    def release(self, node: str, rids: list[str] = ()) -> Any:  # type: ignore[assignment]
        return self._call("release", node, self.keys.start_urls, *rids)

    def recover(self, node: str, timeout_ms: int) -> Any:
        return self._call("recover", node, timeout_ms, self.keys.start_urls)

    def heartbeat(self, node: str, info_json: str) -> Any:
        return self._call("heartbeat", node, info_json)

    def drained(self) -> Any:
        return self._call("drained", self.keys.start_urls)

    def requeue_dead(self, ids: list[str] = (), max_count: int = 1_000_000) -> Any:  # type: ignore[assignment]
        return self._call("requeue_dead", max_count, *ids)
