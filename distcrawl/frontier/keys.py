"""The key schema: every key of a crawl, declared once with its type and meaning in the class of
its hash slot (one control slot and N shards). The Python key builders, the Lua library's key
names (:func:`lua_keys`) and the key layout document (:func:`layout`) all come from here."""

from __future__ import annotations

import os
import zlib
from dataclasses import dataclass, field
from typing import Any

from distcrawl.base.config import SETTINGS
from distcrawl.base.config.entries import MAX_SHARDS
from distcrawl.base.identifiers import check_crawl_name
from distcrawl.base.names.commands import PAUSE_CRAWL
from distcrawl.frontier.schema import (
    CONTROL,
    SHARD,
    Key,
    KeyOf,
    KeyRecord,
    KeySpec,
    declared,
    lua_key_builders,
)
from distcrawl.frontier.seed_keys import SeedKeys, seed_slot_prefix
from distcrawl.frontier.tags import shard_tags

__all__ = [
    "DEFAULT_SHARDS",
    "MAX_SHARDS",
    "SCHEMA",
    "SITE_CUT_CAUSE_FIELD",
    "SITE_DELAY_SOURCE_FIELD",
    "SITE_HOLD_CAUSE_FIELD",
    "STATUS_LEASES_FIELD",
    "STATUS_WAITING_FIELD",
    "ControlKeys",
    "FrontierKeys",
    "SeedKeys",
    "ShardKeys",
    "default_shards",
    "layout",
    "lua_keys",
    "seed_slot_prefix",
    "seen_counted",
]

#: shards of a crawl: enough to spread over a Redis Cluster's masters (whole slots move when it
#: rebalances), few enough that a single Redis needs no tuning and an idle node's refresh of
#: every shard stays cheap (the setting ``DISTCRAWL_SHARDS``)
DEFAULT_SHARDS: int = SETTINGS.default("DISTCRAWL_SHARDS")


def default_shards() -> int:
    """The project's ``DISTCRAWL_SHARDS``: its environment variable, else its default."""
    shards: int = SETTINGS.from_environment(os.environ, "DISTCRAWL_SHARDS")
    return shards


def _checked(n: int) -> int:
    if not 1 <= n <= MAX_SHARDS:
        raise ValueError(f"DISTCRAWL_SHARDS must be 1..{MAX_SHARDS}, not {n}")
    return n


#: the field of a shard's ``status`` hash that counts a node's leases there: this, then the node
STATUS_LEASES_FIELD = "leases:"
#: the field of a shard's ``status`` hash that counts the requests in its waiting rooms
STATUS_WAITING_FIELD = "waiting"
#: the field of a site's budget hash naming the cause of its latest cut (a cut cause word)
SITE_CUT_CAUSE_FIELD = "cut_why"
#: the field of a site's budget hash naming where its Crawl-delay came from (a delay source word)
SITE_DELAY_SOURCE_FIELD = "delay_src"
#: the field of a site's budget hash naming why it is held (a hold cause word)
SITE_HOLD_CAUSE_FIELD = "hold_why"


@dataclass(frozen=True)
class ShardKeys:
    """The keys of one shard, all under the hash tag ``prefix``: a request belongs to the
    shard of its site, so everything about a site (its queue entries, seen URLs, leases,
    parked retries, dead letters and politeness budget) shares one slot."""

    SLOT = SHARD

    index: int
    prefix: str

    queue = KeyOf(
        "queue:<priority>",
        "LIST",
        """the requests of one priority waiting for a lease, first in first out (a lease
        returned to the queue goes back to the front); ``levels`` lists the priorities that
        have one. An entry is "<rid>\\t<value>" (the value inline: a pushed child, a returned
        lease, a re-queued dead letter) or a bare rid whose value is in requests (a parked
        retry or a revisit fallen due). A rid never holds a tab.""",
    )
    levels = Key(
        "levels",
        "ZSET",
        """priority -> -priority * SCORE_SPAN + n, for every priority whose queue holds n > 0
        requests (the best priority first; n = score + priority * SCORE_SPAN). A call reads
        the best LEVELS_READ of them and writes back those it changed, once""",
    )
    requests = Key(
        "req",
        "HASH",
        """rid -> value: the payload (compact request JSON, never pickle), or "<site>\\n<payload>"
        when the payload's URL does not name its site, of a request waiting, parked, revisited
        or queued as a bare rid. A rid is "<seq>.<tag>": seq from seq, tag chosen by the node
        that pushed it (new after every rewind it sees), so a rid stays unique when Redis comes
        back with older state and seq goes back.""",
    )
    marks = Key(
        "marks",
        "HASH",
        """node -> the mark its last sync of this shard wrote: a node that does not find its
        last mark knows Redis lost its writes (restarted from older data, a failover to a
        lagging replica, a reset). Cleared when the node's leases are all released by its own
        clean stop or open; a recovery writes a tombstone instead ("!<ms>.<id>", the same in
        every shard), so that a node presumed dead is told so by the first shard it calls.""",
    )
    seq = Key("seq", "STRING", "counter for rids and FIFO order (one INCRBY per batch)")
    seen_bucket = KeyOf(
        "seen:<bucket>",
        "SET",
        """the exact dupefilter (the default): 64-bit request fingerprints as integers
        (compact intsets), in buckets grown by linear hashing (see seen_info)""",
    )
    seen_info = Key(
        "seen:info",
        "HASH",
        "L, split (the buckets' linear-hashing state) and n (fingerprints seen, the Bloom "
        "filter's too)",
    )
    bloom = Key(
        "bloom",
        "STRING",
        """Bloom filter bits (DISTCRAWL_DUPEFILTER=bloom): k bits per URL at (h1 + j * h2) mod
        m, h1 and h2 the first 8 bytes of the fingerprint; created at its full size by its
        first write""",
    )
    held = KeyOf(
        "held:<node>",
        "HASH",
        """rid -> "<priority>\\t<rid>\\t<value>" (the line its lease reply carried): requests
        handed to the node and not acked yet, each with its value, so an ack is one HDEL. A
        request lives in exactly one of a queue / wait / delayed / revisit / a held hash.""",
    )
    delayed = Key("delayed", "ZSET", "rid -> due time (ms, server clock): parked retries")
    delayed_priority = Key(
        "delayed:priority", "HASH", "rid -> the priority of a parked retry (its queue when due)"
    )
    dead = Key(
        "dead",
        "HASH",
        "dead-letter id -> JSON record (request, reason, attempts, times, node, site)",
    )
    counters = Key(
        "counters",
        "HASH",
        "the shard's counters: stale_acks (acks and dead letters for leases the node did not hold)",
    )
    paused = Key(
        "paused",
        "STRING",
        f"a copy of the control slot's pause flag (`{PAUSE_CRAWL.line(spider='SPIDER')}`)",
    )
    site = KeyOf(
        "site:<site>",
        "HASH",
        """the site's shared budget: tokens, ts (last refill, ms), factor (adaptive slow-down,
        0-1], cut_at (ms of the last cut), limit_rate / limit_conc (per-site limits); while a
        cut lasts also fts (ms the factor was set), recover_ms (a cut wears off linearly, from
        0 to 1 in recover_ms), base_rate (the requests/s the factor applies to) and cut_why
        (SITE_CUT_CAUSE_FIELD: throttled or slow, the cause of the last cut); with a robots.txt
        Crawl-delay delay_ms, delay_src (SITE_DELAY_SOURCE_FIELD: robots_txt or capped) and
        next_ok (ms before which its next request does not start); while held hold_until (ms)
        and hold_why (SITE_HOLD_CAUSE_FIELD: robots_unavailable or retry_after)""",
    )
    active = Key(
        "active",
        "HASH",
        """site -> requests of the site in flight on all nodes (no field: 0). Counted once a
        limit applies in the shard (a rate or concurrency above 0, or a site's own limits) and
        from then on; a crawl without limits counts nothing""",
    )
    limits = Key(
        "limits",
        "SET",
        """sites with a limit_rate or limit_conc of their own: with no default rate, a lease
        reads the budget hash only of these and of the sites in cuts""",
    )
    wait = KeyOf(
        "wait:<site>",
        "ZSET",
        """rid -> order score: requests taken off the queue while their site was out of
        budget; they wait here, in priority order, without blocking other sites""",
    )
    waiting = Key("waiting", "ZSET", "site -> ms when the site may admit its next waiting request")
    delays = Key(
        "delays",
        "HASH",
        """site -> the Crawl-delay (ms) its robots.txt asks for, of the sites that ask for one:
        a finished request of such a site sets its next_ok""",
    )
    holds = Key(
        "holds",
        "ZSET",
        """[status registry] site -> ms its hold ends, while it is held (robots.txt unavailable,
        Retry-After)""",
    )
    cuts = Key(
        "cuts",
        "ZSET",
        """site -> ms of its last adaptive cut, while the cut lasts (the status reads the
        latest cuts without a SCAN)""",
    )
    revisit = Key(
        "revisit",
        "ZSET",
        """[revisit] "<priority>:<rid>" -> due time (ms): fetched pages that come back as
        queued work when due (DISTCRAWL_REVISIT); the value stays in requests under its rid,
        with the validators (ETag, Last-Modified), content hash and backoff of the last answer""",
    )
    revisit_late = Key(
        "revisit:late",
        "ZSET",
        """[revisit] rid -> due time: revisits promoted to the queue and not leased yet (how
        far behind schedule the crawl is)""",
    )
    seen_generation = Key(
        "seen:gen", "STRING", "[revisit] the dupefilter's current generation, floor(now / rv)"
    )
    seen_gen_bucket = KeyOf(
        "seen:g<gen>:<bucket>",
        "SET",
        """[revisit] the exact dupefilter of one generation. A URL is new when neither
        generation n nor n - 1 holds it: it is forgotten rv to 2 rv after it was last recorded;
        older generations are dropped""",
    )
    seen_gen_info = KeyOf("seen:g<gen>:info", "HASH", "[revisit] seen_info of one generation")
    bloom_gen = KeyOf("bloom:g<gen>", "STRING", "[revisit] the Bloom filter of one generation")
    status = Key(
        "status",
        "HASH",
        """[status registry] `waiting` (STATUS_WAITING_FIELD): requests in the shard's waiting
        rooms; `leases:<node>` (STATUS_LEASES_FIELD): requests the node holds in this shard.
        The status reads one hash per shard instead of a key per node or per site""",
    )

    @property
    def dupefilter(self) -> str:
        """The first bucket of the exact dupefilter (all of it while it is small)."""
        return self.seen_bucket(0)


@dataclass(frozen=True)
class ControlKeys:
    """The crawl-wide keys: one small slot, ``{spider}``
    (:class:`~distcrawl.base.identifiers.BadName` for a name no crawl may have)."""

    SLOT = CONTROL

    spider: str

    def __post_init__(self) -> None:
        check_crawl_name(self.spider)

    @property
    def prefix(self) -> str:
        """The control slot's hash tag."""
        return "{" + self.spider + "}"

    format = Key(
        "format",
        "STRING",
        """the frontier format the crawl's keys are written in, set by the first node; a node
        or operator command of another format refuses to open the crawl""",
    )
    origin = Key(
        "origin",
        "STRING",
        """"<ms> <node>": the crawl's start, set by its first node; one that finds it gone stops
        and writes "lost <ms> <node> <marker>", refused by nodes and commands until a reset""",
    )
    nodes = Key("nodes", "ZSET", "node -> last heartbeat (ms, Redis server clock)")
    dashboards = Key(
        "dashboards",
        "HASH",
        "host:port -> ms: where the crawl's dashboards listen (nodes never fetch them)",
    )
    node = KeyOf(
        "node:<node>",
        "HASH",
        """node info and its latest stats snapshot (JSON), written by heartbeats, and owner,
        the process that claimed the node id; dead_since once recovered, stopped_at after a
        clean stop (both then expire after a day)""",
    )
    recovering = Key(
        "recovering",
        "ZSET",
        """node -> ms: dead nodes claimed by a live node that is returning their leases shard
        by shard; claimed again by anyone after a timeout""",
    )
    rejected = Key(
        "rejected",
        "LIST",
        "refused seeds and queue entries, JSON {raw, reason, at, node}; bounded",
    )
    counters = Key(
        "counters",
        "HASH",
        "crawl-wide counters: requeued_dead_letters, recovered_nodes (nodes declared dead)",
    )
    gone = Key(
        "gone",
        "ZSET",
        """[status registry] node -> ms it stopped cleanly or was claimed as dead, kept a day:
        the status finds their last stats without SCAN""",
    )
    paused = Key(
        "paused",
        "STRING",
        "present while the cluster is paused (who paused it and when), copied into every shard",
    )
    idle = Key("idle", "SET", "nodes whose last lease request got nothing in any shard they read")
    heads = Key(
        "heads",
        "HASH",
        """shard -> what a node last saw of the shard's queue: "<ms> <queued> <priority> <n>
        ..." (the server's time, the queue's length, its best priorities and how many each
        holds). A node's leasing round trip writes what its calls saw and reads the rest: every
        node knows every shard's best priorities as one of them last saw them""",
    )
    wake = Key(
        "wake",
        "channel",
        """pub/sub: "<shard>" published when work arrives in a shard that was empty or while
        nodes are idle (links pushed, leases returned), "resumed" when the cluster resumes""",
    )
    pages = KeyOf("pages:<site>", "STRING", "pages the site has cost the cluster (page limits)")
    robots = KeyOf(
        "robots:<netloc>",
        "HASH",
        "robots.txt shared by the nodes: status and body, expiring (DISTCRAWL_ROBOTS_TTL)",
    )
    robots_lock = KeyOf(
        "robots:<netloc>:lock", "STRING", "held by the one node fetching the site's robots.txt"
    )
    site_servers = Key(
        "site_servers",
        "HASH",
        "site -> the server (IP address) it answers from, as the nodes resolved it",
    )
    servers = Key(
        "servers",
        "ZSET",
        """[status registry] server (IP address) -> how many sites answer from it (the status
        lists those with more than one)""",
    )
    server_sites = KeyOf("server:<server>:sites", "SET", "the sites that answer from a server")
    server = KeyOf(
        "server:<server>",
        "HASH",
        """a server's shared budget (DISTCRAWL_SERVER_*): inuse (grants held on all nodes),
        n:<node> (the grants each node holds), tokens and ts (its rate)""",
    )
    unlisted = Key(
        "unlisted",
        "HASH",
        "[revisit] products a listing dropped and none links since: canonical URL -> ms since",
    )
    config = Key(
        "config",
        "HASH",
        """the crawl-wide settings the first node recorded: setting -> value as text (`-`: not
        in effect; `_by`: that node); later nodes and operator commands compare theirs
        (frontier/crawlconf.py; written once, from Python)""",
    )
    solo = Key(
        "solo",
        "STRING",
        """who may hand what it finds to Scrapy from memory: absent (nobody yet), a node id (that
        node won it at its open, alone in a crawl that had never held a request: its new
        requests are its own leases, written by its next round trip) or "shared" (every node
        goes through the queue, for good). Any other node or tool makes it "shared" before its
        first push or lease (frontier/protocol/solo.py)""",
    )
    run = Key(
        "run",
        "HASH",
        """the crawl's run: id (random, made by its first node), started (ms, server clock),
        by (that node), finished (ms) once its last node closed with the crawl drained; the
        crawl report and the MongoDB records of this crawl name it""",
    )
    errors = Key(
        "errors",
        "HASH",
        """[observe] error group id -> JSON {site, kind, template, first, last (ms), samples
        (up to 3 URLs), snap (the node granted its first-occurrence snapshot)}: failures
        grouped by site, kind and message template (base/grouping.py), added by the nodes'
        observe calls""",
    )
    error_counts = Key(
        "errors:count",
        "ZSET",
        "[observe] error group id -> failures counted (the status reads the top groups)",
    )
    error_totals = Key(
        "errors:totals",
        "HASH",
        """[observe] groups, snapshots (granted), groups:<kind> and events:<kind> (failures of
        the kind): what /metrics shows without reading every group""",
    )
    quality = Key(
        "quality",
        "HASH",
        """[observe] site -> JSON {n: products stored, f: field -> products holding it, m: the
        marks [n, f] at every quarter of DISTCRAWL_QUALITY_WINDOW} (base/coverage.py)""",
    )
    findings = Key(
        "findings",
        "HASH",
        """[observe] "<site>\\t<field>" -> JSON finding (share, was, products, baseline,
        message, at, node): a field's share that fell on a site, once per crawl""",
    )
    findings_at = Key(
        "findings:at", "ZSET", "[observe] finding -> ms it was found (the latest are read first)"
    )
    notices = Key(
        "notices",
        "HASH",
        """[observe] event id -> JSON {kind, at, node, sent}: the notices claimed, one per event
        for the whole cluster (notice.lua); ~rate: "<minute>:<count>", the rate limit's
        counter""",
    )
    solo_end = Key(
        "solo:end",
        "STRING",
        """the node that asks the solo node to share the crawl: the solo node writes what it
        holds, sets solo to "shared" and deletes this""",
    )


def seen_counted(shard: ShardKeys, generation: int | str | bytes | None) -> list[str]:
    """The HASHes whose field ``n`` counts the URLs a shard's dupefilter holds, exact or Bloom,
    given the shard's ``seen:gen`` (None: no revisit mode): its one dupefilter's info and, in
    revisit mode, the current generation's and the previous one's (a URL is remembered while
    either holds it; one revisited since the last turn is in both: an upper bound)."""
    names = [shard.seen_info]
    if generation is not None:
        gen = int(generation)
        names += [shard.seen_gen_info(gen), shard.seen_gen_info(gen - 1)]
    return names


@dataclass(frozen=True)
class FrontierKeys(ControlKeys):
    """Every key of one crawl: the control slot ``{spider}`` and ``shards`` shard slots
    ``{spider:k.ddddd}`` (see :func:`shard_tags`; with one shard, the shard is the control
    slot itself), and the seed list ``start_urls``."""

    start_urls: str
    shards: int = field(default_factory=default_shards)

    def __post_init__(self) -> None:
        super().__post_init__()
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

    @property
    def seeds(self) -> SeedKeys:
        """The keys in the seed list's slot: what nodes took from it, and what they gave back."""
        return SeedKeys.of(self.start_urls)

    def patterns(self) -> list[str]:
        """SCAN patterns matching every key of the crawl (operator tools only: reset, demo),
        the seed list's neighbours included (not the seed list itself)."""
        out = [f"{self.prefix}:*"]
        if self.shards > 1:
            out.append("{" + self.spider + ":[0-9]*}:*")
        seeds = self.seeds
        if seeds.prefix != self.prefix:
            out += [f"{_glob_escaped(seeds.prefix)}:{name}*" for name in _SEED_KEY_NAMES]
        return out

    # -- the one-slot layout's names (one shard only: with several, name the shard) ----------

    def _only_shard(self, name: str) -> ShardKeys:
        if self.shards != 1:
            raise RuntimeError(
                f"FrontierKeys.{name} names the one-slot layout; with {self.shards} shards use "
                f"shard(k).{name} or all_shards()"
            )
        return self.shard(0)

    def queue(self, priority: int | str) -> str:
        return self._only_shard("queue").queue(priority)

    @property
    def levels(self) -> str:
        return self._only_shard("levels").levels

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

    def site(self, site: str) -> str:
        """The budget of ``site``, in the site's own shard."""
        return self.site_keys(site).site(site)

    def wait(self, site: str) -> str:
        return self.site_keys(site).wait(site)


def _glob_escaped(text: str) -> str:
    return "".join(f"\\{c}" if c in "*?[]\\" else c for c in text)


#: the names of the seed slot's keys, as SCAN patterns find them (a crawl's own only: the
#: seed list's slot may hold another crawl's keys)
_SEED_KEY_NAMES = ("taken:", "returned", "staged")


#: every key of the schema, control slot first
SCHEMA: list[KeySpec] = declared(ControlKeys, ShardKeys, SeedKeys)


def layout() -> list[KeyRecord]:
    """The key layout document's records (name pattern, type, slot, meaning), in schema
    order, the seed list last."""
    return [key.record() for key in SCHEMA] + [
        KeyRecord(
            "<start list>",
            "LIST",
            "user",
            """the seed list (DISTCRAWL_START_URLS_KEY, by default <spider>:start_urls; LPUSH
            to add, redis-cli -c on a Redis Cluster). It may hash anywhere: {L} is its slot
            (its own hash tag, else its whole name)""".replace("\n            ", " "),
        )
    ]


def lua_keys() -> str:
    """The Lua include of key-name functions (``K.queue(P)``, ``K.held(P, node)``, ...)."""
    return lua_key_builders(SCHEMA)
