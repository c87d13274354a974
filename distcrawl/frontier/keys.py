"""The frontier's key names: one control slot and N shards (layout: header of ``frontier.lua``)."""

from __future__ import annotations

import binascii
import os
import zlib
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from distcrawl.base.config import SETTINGS
from distcrawl.base.config.entries import MAX_SHARDS

__all__ = [
    "CLUSTER_SLOTS",
    "DEFAULT_SHARDS",
    "MAX_SHARDS",
    "FrontierKeys",
    "ShardKeys",
    "default_shards",
    "shard_tags",
]

#: shards of a crawl: enough to spread over a Redis Cluster's masters (whole slots move when it
#: rebalances), few enough that a single Redis needs no tuning and an idle node's refresh of
#: every shard stays cheap (the setting ``DISTCRAWL_SHARDS``)
DEFAULT_SHARDS: int = SETTINGS.default("DISTCRAWL_SHARDS")
#: hash slots of a Redis Cluster (a key's slot: CRC16 of its hash tag, modulo this)
CLUSTER_SLOTS = 16384


def default_shards() -> int:
    """The project's ``DISTCRAWL_SHARDS``: its environment variable, else its default."""
    shards: int = SETTINGS.from_environment(os.environ, "DISTCRAWL_SHARDS")
    return shards


#: digits of the suffix that places a shard's hash tag on its slot
_SUFFIX_DIGITS = 5


@lru_cache(maxsize=64)
def shard_tags(spider: str, shards: int) -> tuple[str, ...]:
    """The hash tags of the ``shards`` shards of ``spider``'s crawl, spread evenly over the
    hash slots: shard k's tag is ``spider:k.ddddd``, the five digits chosen so that its slot
    (CRC16 % 16384, as Redis Cluster computes it) is the middle of the k-th of ``shards``
    equal slot ranges (or the slot nearest it that a suffix reaches).

    A cluster whose M masters hold equal slot ranges (as ``redis-cli --cluster create`` and
    :class:`~distcrawl.servers.cluster.LocalRedisCluster` assign them) so holds S // M or
    S // M + 1 shards on every master (plain ``spider:k`` tags put 8 of 16 shards on one of
    3 masters). Every node and tool computes the same tags; a one-shard crawl has the control
    slot's tag, ``spider``."""
    if shards == 1:
        return (spider,)
    table = _suffix_table()
    zeros = bytes(_SUFFIX_DIGITS)
    tags = []
    for k in range(shards):
        base = f"{spider}:{k}."
        # CRC16 is linear: crc(base + x) = crc(x) ^ crc(zeros, from the register after base)
        shift = binascii.crc_hqx(
            zeros, binascii.crc_hqx(base.encode("utf-8", "surrogateescape"), 0)
        )
        middle = (2 * k + 1) * CLUSTER_SLOTS // (2 * shards)
        tags.append(base + _nearest(table, middle, shift))
    return tuple(tags)


def _nearest(table: dict[int, str], slot: int, shift: int) -> str:
    """The suffix whose tag's slot is ``slot``, else the nearest one reached."""
    for d in range(CLUSTER_SLOTS):
        for target in (slot + d, slot - d):
            suffix = table.get((target % CLUSTER_SLOTS) ^ (shift % CLUSTER_SLOTS))
            if suffix is not None:
                return suffix
    raise AssertionError("the suffix table reaches no slot")  # pragma: no cover


@lru_cache(maxsize=1)
def _suffix_table() -> dict[int, str]:
    """The low 14 bits of the CRC16 of each five-digit suffix -> the least such suffix (covers
    98 % of the 16,384 values)."""
    # CRC16 from register 0 is linear in the message: a suffix's CRC is the XOR of what each
    # of its digits gives at its position with zero bytes elsewhere (100,000 XORs, not CRCs)
    crcs = [0]
    for position in range(_SUFFIX_DIGITS):
        digits = [
            binascii.crc_hqx(bytes(position) + d + bytes(_SUFFIX_DIGITS - position - 1), 0)
            for d in (str(i).encode() for i in range(10))
        ]
        crcs = [c ^ d for c in crcs for d in digits]
    table: dict[int, str] = {}
    for n, crc in enumerate(crcs):
        table.setdefault(crc % CLUSTER_SLOTS, f"{n:0{_SUFFIX_DIGITS}d}")
    return table


def _checked(n: int) -> int:
    if not 1 <= n <= MAX_SHARDS:
        raise ValueError(f"DISTCRAWL_SHARDS must be 1..{MAX_SHARDS}, not {n}")
    return n


@dataclass(frozen=True)
class ShardKeys:
    """The keys of one shard; all share the hash tag ``prefix``."""

    index: int
    prefix: str

    def _key(self, name: str) -> str:
        return f"{self.prefix}:{name}"

    @property
    def queue(self) -> str:
        return self._key("queue")

    @property
    def requests(self) -> str:
        return self._key("req")

    @property
    def seq(self) -> str:
        return self._key("seq")

    @property
    def seen_info(self) -> str:
        """The exact dupefilter's state: L, split (linear hashing) and n (URLs seen)."""
        return self._key("seen:info")

    def seen_bucket(self, bucket: int) -> str:
        """One bucket of the exact dupefilter (a SET of 64-bit integer fingerprints)."""
        return f"{self.prefix}:seen:{bucket}"

    @property
    def dupefilter(self) -> str:
        """The first bucket of the exact dupefilter (all of it while it is small)."""
        return self.seen_bucket(0)

    @property
    def bloom(self) -> str:
        return self._key("bloom")

    @property
    def delayed(self) -> str:
        return self._key("delayed")

    @property
    def delayed_score(self) -> str:
        return self._key("delayed:score")

    @property
    def dead(self) -> str:
        return self._key("dead")

    @property
    def paused(self) -> str:
        return self._key("paused")

    @property
    def waiting(self) -> str:
        return self._key("waiting")

    def held(self, node: str) -> str:
        """The leases <node> holds in this shard: a HASH rid -> "<order score>\t<rid>\t<value>"."""
        return f"{self.prefix}:held:{node}"

    def leases(self, node: str) -> str:
        """Older versions' leases of <node> (a ZSET rid -> order score), read, never written."""
        return f"{self.prefix}:leases:{node}"

    def site(self, site: str) -> str:
        return f"{self.prefix}:site:{site}"

    @property
    def active(self) -> str:
        """Requests in flight per site, on all nodes: site -> n (no field: 0)."""
        return self._key("active")

    @property
    def limits(self) -> str:
        """The sites that have per-site limits (``limit_rate`` / ``limit_conc``) of their own."""
        return self._key("limits")

    # -- revisit mode (DISTCRAWL_REVISIT) ---------------------------------------------------

    @property
    def revisit(self) -> str:
        """Fetched pages due again: ``"<priority>:<rid>"`` -> due time (ms)."""
        return self._key("revisit")

    @property
    def revisit_late(self) -> str:
        """Revisits fallen due and queued, not leased yet: rid -> due time (ms)."""
        return self._key("revisit:late")

    @property
    def seen_generation(self) -> str:
        """The forgetting dupefilter's current generation."""
        return self._key("seen:gen")

    def seen_gen_info(self, gen: int) -> str:
        return f"{self.prefix}:seen:g{gen}:info"

    def seen_gen_bucket(self, gen: int, bucket: int) -> str:
        return f"{self.prefix}:seen:g{gen}:{bucket}"

    def bloom_gen(self, gen: int) -> str:
        return f"{self.prefix}:bloom:g{gen}"

    def wait(self, site: str) -> str:
        return f"{self.prefix}:wait:{site}"


@dataclass(frozen=True)
class FrontierKeys:
    """Every key of one crawl: the control slot ``{spider}`` and ``shards`` shard slots
    ``{spider:k.ddddd}`` (see :func:`shard_tags`; with one shard, the shard is the control
    slot itself)."""

    spider: str
    start_urls: str
    shards: int = field(default_factory=default_shards)

    def __post_init__(self) -> None:
        _checked(self.shards)

    @classmethod
    def for_spider(cls, spider: str, settings: Any) -> FrontierKeys:
        """The keys of ``spider``'s crawl; the seed list is ``DISTCRAWL_START_URLS_KEY`` or
        scrapy-redis' ``REDIS_START_URLS_KEY`` (``%(name)s`` is the spider's name), by default
        ``<spider>:start_urls``; the number of shards is ``DISTCRAWL_SHARDS`` (where
        *settings* lacks it, as a project's own settings do: the project value)."""
        start = settings.get("DISTCRAWL_START_URLS_KEY") or settings.get("REDIS_START_URLS_KEY")
        start = start.replace("%(name)s", spider) if start else f"{spider}:start_urls"
        shards: int = (
            SETTINGS.value(settings, "DISTCRAWL_SHARDS")
            if settings.get("DISTCRAWL_SHARDS") is not None
            else default_shards()
        )
        return cls(spider=spider, start_urls=start, shards=_checked(shards))

    # -- sharding ---------------------------------------------------------------------------

    def shard_of(self, site: str) -> int:
        """The shard of a site (host): a hash every node and tool computes alike."""
        if self.shards == 1 or not site:
            return 0
        return zlib.crc32(site.encode("utf-8", "surrogateescape")) % self.shards

    def shard(self, index: int) -> ShardKeys:
        if self.shards == 1:
            return ShardKeys(0, self.prefix)
        return ShardKeys(index, "{" + shard_tags(self.spider, self.shards)[index] + "}")

    def all_shards(self) -> list[ShardKeys]:
        return [self.shard(i) for i in range(self.shards)]

    def site_keys(self, site: str) -> ShardKeys:
        return self.shard(self.shard_of(site))

    # -- the control slot ---------------------------------------------------------------------

    @property
    def prefix(self) -> str:
        """The control slot's hash tag."""
        return "{" + self.spider + "}"

    def _key(self, name: str) -> str:
        return f"{self.prefix}:{name}"

    @property
    def nodes(self) -> str:
        return self._key("nodes")

    @property
    def unlisted(self) -> str:
        """Products a listing dropped and none links since: canonical URL -> ms since."""
        return self._key("unlisted")

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
    def counters(self) -> str:
        return self._key("counters")

    @property
    def recovering(self) -> str:
        return self._key("recovering")

    @property
    def config(self) -> str:
        """The crawl-wide settings the first node recorded: setting name -> value as text."""
        return self._key("config")

    @property
    def wake(self) -> str:
        """The pub/sub channel on which idle nodes hear that work arrived (data: the shard)."""
        return self._key("wake")

    def seeding(self, node: str) -> str:
        return f"{self.prefix}:seeding:{node}"

    def node(self, node: str) -> str:
        return f"{self.prefix}:node:{node}"

    def patterns(self) -> list[str]:
        """SCAN patterns matching every key of the crawl (operator tools only: reset, demo)."""
        if self.shards == 1:
            return [f"{self.prefix}:*"]
        return [f"{self.prefix}:*", "{" + self.spider + ":[0-9]*}:*"]

    # -- the one-slot layout's names (one shard only: with several, name the shard) ----------

    def _only_shard(self, name: str) -> ShardKeys:
        if self.shards != 1:
            raise RuntimeError(
                f"FrontierKeys.{name} names the one-slot layout; with {self.shards} shards use "
                f"shard(k).{name} or all_shards()"
            )
        return self.shard(0)

    @property
    def queue(self) -> str:
        return self._only_shard("queue").queue

    @property
    def requests(self) -> str:
        return self._only_shard("requests").requests

    @property
    def dupefilter(self) -> str:
        return self._only_shard("dupefilter").dupefilter

    @property
    def delayed(self) -> str:
        return self._only_shard("delayed").delayed

    @property
    def dead(self) -> str:
        return self._only_shard("dead").dead

    @property
    def waiting(self) -> str:
        return self._only_shard("waiting").waiting

    def held(self, node: str) -> str:
        return self._only_shard("held").held(node)

    def leases(self, node: str) -> str:
        return self._only_shard("leases").leases(node)

    def site(self, site: str) -> str:
        """The budget of ``site``, in the site's own shard."""
        return self.site_keys(site).site(site)

    def wait(self, site: str) -> str:
        return self.site_keys(site).wait(site)

    def all_keys_pattern(self) -> str:
        """The control slot's keys (with one shard: every key of the crawl)."""
        return f"{self.prefix}:*"
