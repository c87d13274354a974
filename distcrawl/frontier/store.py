"""The frontier's Redis protocol from Python: key names and calls into ``frontier.lua``.

Works with a synchronous redis-py client (commands, tools) and with ``redis.asyncio``
(the node's scheduler): each method returns what the client returns, a value or an awaitable.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from typing import Any

__all__ = [
    "Child",
    "DeadLetter",
    "Feedback",
    "FrontierKeys",
    "FrontierStore",
    "SiteBudget",
    "effective_factor",
]

_LUA = resources.files("distcrawl.frontier").joinpath("frontier.lua").read_text("utf-8")


@dataclass(frozen=True)
class FrontierKeys:
    """Every key of one crawl. All but ``start_urls`` share the hash tag ``{spider}``."""

    spider: str
    start_urls: str

    @classmethod
    def for_spider(cls, spider: str, settings: Any) -> FrontierKeys:
        """The keys of ``spider``'s crawl; the seed list is ``DISTCRAWL_START_URLS_KEY`` or
        scrapy-redis' ``REDIS_START_URLS_KEY`` (``%(name)s`` is the spider's name), by default
        ``<spider>:start_urls``."""
        start = settings.get("DISTCRAWL_START_URLS_KEY") or settings.get("REDIS_START_URLS_KEY")
        start = start.replace("%(name)s", spider) if start else f"{spider}:start_urls"
        return cls(spider=spider, start_urls=start)

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

    @property
    def idle(self) -> str:
        return self._key("idle")

    @property
    def wake(self) -> str:
        """The pub/sub channel on which idle nodes hear that work arrived."""
        return self._key("wake")

    def leases(self, node: str) -> str:
        return f"{self.prefix}:leases:{node}"

    def seeding(self, node: str) -> str:
        return f"{self.prefix}:seeding:{node}"

    def site(self, site: str) -> str:
        return f"{self.prefix}:site:{site}"

    def wait(self, site: str) -> str:
        return f"{self.prefix}:wait:{site}"

    @property
    def waiting(self) -> str:
        return self._key("waiting")

    def node(self, node: str) -> str:
        return f"{self.prefix}:node:{node}"

    def all_keys_pattern(self) -> str:
        return f"{self.prefix}:*"


#: one child request for ``sync``: fingerprint ("" = unfiltered), priority, dont_filter,
#: delay in ms (0 = queue now, > 0 = park as a delayed retry), site ("" = none), JSON payload
Child = tuple[str, int, bool, int, str, str]


#: seconds a cut of a site's rate takes to wear off completely (``DISTCRAWL_SITE_RECOVERY``)
DEFAULT_SITE_RECOVERY = 120.0


@dataclass(frozen=True)
class SiteBudget:
    """The cluster-wide per-site budget defaults (0 = no limit); see ``admit`` in the script."""

    rate: float = 0.0
    concurrency: int = 0
    burst: float = 1.0
    adaptive_rate: float = 8.0
    #: seconds an adaptive cut takes to wear off from factor 0 to 1 (linearly, idle or not)
    recovery: float = DEFAULT_SITE_RECOVERY

    @classmethod
    def from_settings(cls, settings: Any) -> SiteBudget:
        """``DISTCRAWL_SITE_RATE``, ``DISTCRAWL_SITE_CONCURRENCY``, ``DISTCRAWL_SITE_BURST``,
        ``DISTCRAWL_ADAPTIVE_RATE``, ``DISTCRAWL_SITE_RECOVERY``."""
        return cls(
            rate=settings.getfloat("DISTCRAWL_SITE_RATE", 0.0),
            concurrency=settings.getint("DISTCRAWL_SITE_CONCURRENCY", 0),
            burst=max(1.0, settings.getfloat("DISTCRAWL_SITE_BURST", 1.0)),
            adaptive_rate=settings.getfloat("DISTCRAWL_ADAPTIVE_RATE", 8.0),
            recovery=max(
                0.001, settings.getfloat("DISTCRAWL_SITE_RECOVERY", DEFAULT_SITE_RECOVERY)
            ),
        )


def effective_factor(fields: dict[str, Any], now_ms: float) -> float:
    """A site's adaptive factor at server time *now_ms*, from its ``{S}:site:<site>`` hash
    (decoded): the stored cut, worn off linearly since it was set (``site_factor`` in the
    script)."""
    if not fields.get("factor"):
        return 1.0
    factor = float(fields["factor"])
    recover_ms = float(fields.get("recover_ms") or DEFAULT_SITE_RECOVERY * 1000)
    since = float(fields.get("fts") or fields.get("cut_at") or now_ms)
    if recover_ms > 0:
        factor += (now_ms - since) / recover_ms
    return min(1.0, factor)


_NO_BUDGET = SiteBudget()

#: a dead letter for ``sync``: id, JSON record, and the rid of the lease it ends ("" or left
#: out = unknown); with a rid it is written only while the node still holds that lease
DeadLetter = tuple[str, str] | tuple[str, str, str]

#: per-site feedback from one node since its last flush: site, ok, throttled, slow answers
Feedback = tuple[str, int, int, int]


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
        dead: list[DeadLetter] = (),  # type: ignore[assignment]
        rejected: list[str] = (),  # type: ignore[assignment]
        seeds_done: bool = False,
        lease: int = 0,
        budget: SiteBudget = _NO_BUDGET,
        feedback: list[Feedback] = (),  # type: ignore[assignment]
    ) -> Any:
        args: list[Any] = ["sync", node, len(children)]
        for fp, prio, dont_filter, delay_ms, site, payload in children:
            args += [fp, prio, "1" if dont_filter else "0", delay_ms, site, payload]
        args.append(len(acks))
        args += acks
        args.append(len(dead))
        for dead_id, record, *rid in dead:
            args += [dead_id, record, rid[0] if rid else ""]
        args.append(len(rejected))
        args += rejected
        args += ["1" if seeds_done else "0", lease]
        args += [budget.rate, budget.concurrency, budget.burst, budget.adaptive_rate]
        args.append(int(budget.recovery * 1000))
        args.append(len(feedback))
        for site, ok, throttled, slow in feedback:
            args += [site, ok, throttled, slow]
        return self._call(*args)

    def set_site_limits(self, site: str, *, rate: float | None, concurrency: int | None) -> Any:
        """Per-site limits that override the defaults for every node (None = remove)."""
        key = self.keys.site(site)
        pipe = self.client.pipeline(transaction=True)
        for field, value in (("limit_rate", rate), ("limit_conc", concurrency)):
            if value is None:
                pipe.hdel(key, field)
            else:
                pipe.hset(key, field, value)
        return pipe.execute()

    def take_token(self, site: str, budget: SiteBudget) -> Any:
        return self._call("take_token", site, budget.rate, budget.burst, budget.adaptive_rate)

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
