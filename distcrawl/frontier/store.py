"""The frontier's API: :class:`FrontierStore`, what a node, the operator tools and the benches
call. Each method is one step of the protocol (:mod:`distcrawl.frontier.protocol`), one
pipelined round trip in most cases, run on a synchronous redis-py client (a value) or on
``redis.asyncio`` (an awaitable).

    store = FrontierStore(redis.Redis.from_url(url), FrontierKeys("catalog", "catalog:start_urls"))
    store.heartbeat(node, "{}")                        # join; learns live nodes, idle, pause
    reply = store.sync(node, children=[Child(fp, priority, False, 0, site, payload)], lease=32)
    # reply.leased: [Leased(lease, payload, priority, paced)]; ack them in a later sync:
    store.sync(node, acks=[leased.lease for leased in reply.leased], lease=32)
    store.release(node)                                # clean stop: leases and seeds go back

A child's fingerprint is a digest (16, 20 or 32 bytes, or its hex); anything else is hashed
first. Memory and counts without SCAN: ``seen()`` (URLs in the exact dupefilter, O(shards)),
``dupefilter_bytes()`` (MEMORY USAGE of every dupefilter bucket or Bloom filter), ``drained()``
(queued, delayed, leased, seeding, start). The keys: :mod:`distcrawl.frontier.keys`.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import Any

from distcrawl.frontier.batch import (
    DEFAULT_SITE_RECOVERY,
    Child,
    DeadLetter,
    Feedback,
    Lease,
    Leased,
    Revisit,
    SiteBudget,
    SiteEvent,
)
from distcrawl.frontier.keys import FrontierKeys, ShardKeys
from distcrawl.frontier.protocol import (
    admin,
    budgets,
    dead,
    dupefilter,
    membership,
    observe,
    revisit,
    servers,
    solo,
)
from distcrawl.frontier.protocol import sync as sync_protocol
from distcrawl.frontier.protocol.admin import LeasesKeptChanging
from distcrawl.frontier.protocol.budgets import effective_factor
from distcrawl.frontier.protocol.dupefilter import Dupefilter
from distcrawl.frontier.protocol.membership import Claim, CrawlFormatError, Origin, Seeds
from distcrawl.frontier.protocol.runner import Runner
from distcrawl.frontier.protocol.servers import Grant, ServerLimits
from distcrawl.frontier.protocol.solo import Share, SoloState
from distcrawl.frontier.protocol.spec import FORMAT
from distcrawl.frontier.protocol.sync import Fence, Flush, SyncResult, is_tombstone
from distcrawl.frontier.views import ShardViews

__all__ = [
    "DEFAULT_SITE_RECOVERY",
    "FORMAT",
    "Child",
    "Claim",
    "CrawlFormatError",
    "DeadLetter",
    "Dupefilter",
    "Feedback",
    "FrontierKeys",
    "FrontierStore",
    "Grant",
    "Lease",
    "Leased",
    "LeasesKeptChanging",
    "Origin",
    "Revisit",
    "Seeds",
    "ServerLimits",
    "ShardKeys",
    "Share",
    "SiteBudget",
    "SiteEvent",
    "SoloState",
    "SyncResult",
    "effective_factor",
    "is_tombstone",
]

#: seconds after which a node reads a shard it has no news of again (work arriving in an empty
#: shard is announced on the wake channel at once)
DEFAULT_REFRESH = 5.0


class FrontierStore:
    """The frontier of one crawl (its keys: :class:`FrontierKeys`)."""

    def __init__(
        self,
        client: Any,
        keys: FrontierKeys,
        *,
        dupefilter: Dupefilter | None = None,
        refresh: float = DEFAULT_REFRESH,
        forget_ms: int | None = None,
        functions: bool = True,
    ) -> None:
        """``functions=False``: run the library's scripts with EVALSHA even where Redis has
        FUNCTION."""
        self.client = client
        self.keys = keys
        #: [revisit] revisit mode: the forgetting dupefilter's generation length (ms); None =
        #: off, the one dupefilter of a crawl that visits each URL once
        self.forget_ms = max(1, int(forget_ms)) if forget_ms else None
        self.dupefilter = dupefilter or Dupefilter()
        #: [m, k] of each shard's Bloom filter, None with the exact dupefilter
        self.bloom_shape = self.dupefilter.bloom_shape(keys.shards)
        self.runner = Runner(client, functions=functions)
        #: what this process knows of each shard (queue length, best priority, when seen)
        self.views = ShardViews(keys.shards, refresh=refresh)
        self.live_nodes = 1
        self.idle_nodes = 0
        #: the control slot's pause flag as the last heartbeat saw it (each shard has its own
        #: copy, set by `control pause`; this covers a flag set by hand in the control slot)
        self.paused = False
        #: Redis' clock minus this host's (seconds), as the last heartbeat measured it
        self.clock_offset = 0.0
        #: the crawl's start marker as the last heartbeat (or read) found it
        self.origin = Origin("")
        self._idle: set[str] = set()
        self._fences: dict[str, Fence] = {}

    @property
    def probing(self) -> bool:
        """Whether ``sync`` takes links as probes (the exact dupefilter, not revisit mode)."""
        return self.bloom_shape is None and self.forget_ms is None

    def _drive(self, step: Any) -> Any:
        return self.runner.drive(step)

    # -- what the protocol's steps keep here -------------------------------------------------------

    def fence(self, node: str) -> Fence:
        """The marks of a fenced node (see ``sync``)."""
        return self._fences.setdefault(node, Fence())

    def forget_marks(self, node: str) -> None:
        """After a rewind: the node's next calls expect no mark (anything goes once)."""
        self._fences.pop(node, None)

    def is_idle(self, node: str) -> bool:
        """Whether ``node`` is in the idle set as far as this process told Redis."""
        return node in self._idle

    def set_idle(self, node: str, idle: bool) -> None:
        (self._idle.add if idle else self._idle.discard)(node)

    # -- the node's round trip -------------------------------------------------------------------

    def sync(
        self,
        node: str,
        *,
        children: Iterable[Child] = (),
        acks: Iterable[Lease] = (),
        dead: Iterable[DeadLetter] = (),
        rejected: Sequence[str] = (),
        seeds_done: bool = False,
        lease: int = 0,
        budget: SiteBudget | None = None,
        feedback: Iterable[Feedback] = (),
        tag: str | None = None,
        revisits: Iterable[Revisit] = (),
        probes: Iterable[Child] = (),
    ) -> Any:
        """Push ``children``, ack ``acks``, write ``dead`` letters and ``rejected`` entries, apply
        site ``feedback``, schedule ``revisits`` (acks whose pages come back when due; revisit mode
        only) and lease up to ``lease`` requests, in one round trip. With ``seeds_done`` the node's
        taken seeds are dropped once their requests are in the shards. Returns a
        :class:`SyncResult`; its ``priority_inversions`` counts leased requests of lower priority
        than the best one still queued in another shard read in the same round trip.

        With a ``tag`` the call is fenced: the rids of the children end in ``.<tag>``, and each
        shard called checks the mark this node wrote there last (see ``sync`` in the library);
        a shard that lacks it does nothing and ``rewound`` says so (``unsent``: its batch).

        ``probes`` are links checked against the dupefilter with plain reads, in the same round
        trip: ``probed`` lists those it does not hold, for the caller to push with its next
        flush (see :mod:`~distcrawl.frontier.protocol.probes`)."""
        flush = Flush.of(
            children=children,
            acks=acks,
            dead=dead,
            rejected=rejected,
            seeds_done=seeds_done,
            lease=lease,
            budget=budget,
            feedback=feedback,
            tag=tag,
            revisits=revisits,
            probes=probes,
        )
        return self._drive(sync_protocol.sync(self, node, flush))

    # -- membership (control slot) ---------------------------------------------------------------

    def heartbeat(self, node: str, info_json: str) -> Any:
        """Heart-beat with the node's info; learns the live and idle nodes and the pause.
        Returns the server's time (ms)."""
        return self._drive(membership.heartbeat(self, node, info_json))

    def heartbeat_observed(
        self, node: str, info_json: str, delta: str, limits: observe.Limits
    ) -> Any:
        """A heartbeat with, given a *delta* (:func:`~distcrawl.frontier.protocol.observe.
        encode_delta`), the node's failures and products added to the crawl's error groups
        and field coverage in the same round trip. Returns (server time in ms,
        :class:`~distcrawl.frontier.protocol.observe.Observed` or None)."""
        return self._drive(observe.heartbeat_observed(self, node, info_json, delta, limits))

    # -- what goes wrong (control slot; see protocol/observe.py) --------------------------------

    def claim_run(self, run_id: str, node: str) -> Any:
        """The crawl's :class:`~distcrawl.frontier.protocol.observe.Run`, made if it has none."""
        return self._drive(observe.claim_run(self.keys, run_id, node))

    def read_run(self) -> Any:
        """The crawl's run, or None before its first node opened it."""
        return self._drive(observe.read_run(self.keys))

    def finish_run(self) -> Any:
        """Mark the crawl's run finished now: the time (ms, server clock), or 0 when another
        node marked it first."""
        return self._drive(observe.finish_run(self.keys))

    def heart_beating(self, timeout_ms: int) -> Any:
        """Nodes whose last heartbeat is younger than *timeout_ms*."""
        return self._drive(observe.live_nodes(self.keys, timeout_ms))

    def top_groups(self, n: int) -> Any:
        """The *n* error groups with most failures, and the :class:`Totals` by kind."""
        return self._drive(observe.top_groups(self.keys, n))

    def error_groups(self) -> Any:
        """Every error group of the crawl, the most failures first."""
        return self._drive(observe.error_groups(self.keys))

    def read_quality(self, sites: list[str] | None = None) -> Any:
        """Field coverage figures by site (:class:`~distcrawl.base.coverage.SiteFigures`)."""
        return self._drive(observe.read_quality(self.keys, sites))

    def record_finding(self, key: str, record: str, at_ms: int) -> Any:
        """Keep a finding (once per crawl); True for the first to record it."""
        return self._drive(observe.record_finding(self.keys, key, record, at_ms))

    def read_findings(self, limit: int | None = None) -> Any:
        """The latest findings (JSON objects) and their total."""
        return self._drive(observe.read_findings(self.keys, limit))

    def claim_notice(self, event: str, record: str, rate: int) -> Any:
        """Claim the one notice of *event* for the cluster (1: send it, 0: claimed before,
        -1: over the rate)."""
        return self._drive(observe.claim_notice(self.keys, event, record, rate))

    def server_time(self) -> float:
        """Now on Redis' clock (unix seconds), from this host's clock and the offset the last
        heartbeat measured: times nodes store for one another agree however their clocks
        drift."""
        return time.time() + self.clock_offset

    # -- the crawl's start marker (control slot) --------------------------------------------------

    def start(self, node: str) -> Any:
        """The crawl's :class:`Origin`, its start marker written by ``node`` if it has none."""
        return self._drive(membership.start(self, node))

    def read_origin(self) -> Any:
        """The crawl's :class:`Origin` as Redis holds it (empty: none)."""
        return self._drive(membership.read_origin(self))

    def mark_lost(self, node: str, known: str) -> Any:
        """Write that the crawl's state is gone, where Redis holds no marker; the
        :class:`Origin` Redis holds after."""
        return self._drive(membership.mark_lost(self, node, known))

    def announce_dashboard(self, addresses: Sequence[str]) -> Any:
        """Record where a dashboard of the crawl listens (``host:port`` each): its nodes
        never fetch it."""
        return self._drive(membership.announce_dashboard(self.keys, list(addresses)))

    def dashboards(self) -> Any:
        """The ``host:port`` of the crawl's dashboards heard from within a minute."""
        return self._drive(membership.dashboards(self.keys))

    def ever_used(self) -> Any:
        """Whether the frontier ever held a request or refused a seed (a shard's rid counter,
        the rejected list): a crawl begun, as opposed to one waiting for its first seed."""
        return self._drive(membership.ever_used(self.keys))

    # -- solo mode (control slot; see protocol/solo.py) -----------------------------------------

    def claim_solo(self, node: str) -> Any:
        """Make ``node`` the solo node, if nobody claimed or shared the crawl yet (the caller
        checked that the crawl was never used). Returns whether it did."""
        return self._drive(solo.claim_solo(self.keys, node))

    def solo_state(self) -> Any:
        """Who is solo ("" = nobody), and whether another node asked it to share the crawl
        (a :class:`SoloState`)."""
        return self._drive(solo.solo_state(self.keys))

    def end_solo(self) -> Any:
        """The solo node wrote all it handed out from memory: the crawl is shared for good."""
        return self._drive(solo.end_solo(self.keys))

    def share(self, node: str) -> Any:
        """Make the crawl shared before ``node`` pushes or leases (a :class:`Share`: shared,
        or the solo node asked to end, which the caller waits for)."""
        return self._drive(solo.share(self.keys, node))

    def claim(self, node: str, owner: str, timeout_ms: int, *, force: bool = False) -> Any:
        """Make ``owner`` (JSON: host, pid, run) the process of ``node``; unless ``force``,
        only if no other owner heart-beat in the last ``timeout_ms``. Returns a :class:`Claim`
        (claimed, the owner found, ms since its heartbeat). The first claim of a crawl writes
        its format; raises :class:`CrawlFormatError` when the crawl is in another one."""
        return self._drive(membership.claim(self.keys, node, owner, timeout_ms, force))

    def take_seeds(self, node: str, n: int, *, resume: bool = False) -> Any:
        """Up to ``n`` raw seeds into ``node``'s taken list (a :class:`Seeds`: first those
        given back by nodes that stopped or died holding them, then from the seed list); they
        leave it with the flush whose ``seeds_done`` says their requests are in the shards.
        ``resume``: the node has no taken seed pending, so any its taken list holds were left
        by a take whose reply it never heard; they come first, among ``again``."""
        return self._drive(membership.take_seeds(self.keys, node, n, resume))

    def release(self, node: str, leases: Sequence[Lease] = ()) -> Any:
        """Return ``leases`` of ``node`` to the queue; with none named, all of them and its
        seeds, and the node leaves the cluster (a clean stop). Returns how many moved."""
        return self._drive(membership.release(self, node, list(leases)))

    def rejoin(self, node: str) -> Any:
        """At a node's open, after its claim: return every lease and seed an earlier run of
        ``node`` left, the node staying in the cluster (a member before its first lease, so
        that a death right after it is seen by recovery and by drain detection). Returns how
        many moved."""
        return self._drive(membership.return_all(self, node, "rejoin"))

    def recover(self, node: str, timeout_ms: int) -> Any:
        """Return the leases and seeds of every node whose heartbeat is older than
        ``timeout_ms``. Returns ``[nodes, requests]``."""
        return self._drive(membership.recover(self, node, timeout_ms))

    def held_leases(self, node: str) -> Any:
        """Every lease ``node`` holds in Redis, as rids per shard: ``{shard: [rid]}``."""
        return self._drive(membership.held_leases(self.keys, node))

    def held_values(self, node: str, leases: Sequence[Lease]) -> Any:
        """The lines ``node``'s lease hashes hold for ``leases`` ("<priority>\t<rid>\t
        <value>", as a lease reply carries them), by ``(shard, rid)``; one not held is left
        out."""
        return self._drive(membership.held_values(self.keys, node, list(leases)))

    def drained(self) -> Any:
        """``[queued (incl. waiting for their site), delayed, leased, seeding, start]`` over
        every shard: all zero means nothing is left."""
        return self._drive(membership.drained(self.keys))

    # -- the dupefilter --------------------------------------------------------------------------

    def mark_seen(self, fingerprints: Sequence[bytes | str]) -> Any:
        """Record fingerprints of no known site (a migrated dupefilter) in every shard, where
        each shard's dupefilter finds them. Returns how many were new (in the first shard)."""
        step = dupefilter.mark_seen(self.keys, fingerprints, self.bloom_shape, self.forget_ms)
        return self._drive(step)

    def seen(self) -> Any:
        """URLs the dupefilter holds, over every shard, exact or Bloom, in revisit mode too
        (O(shards) reads)."""
        return self._drive(dupefilter.seen(self.keys))

    def dupefilter_bytes(self) -> Any:
        """Bytes the dupefilter takes (MEMORY USAGE of every bucket, or of the Bloom filters)."""
        bloom = self.bloom_shape is not None
        return self._drive(dupefilter.dupefilter_bytes(self.keys, bloom, self.forget_ms))

    def revisit_status(self, grace_s: float = 0.0) -> Any:
        """[revisit] Over every shard: ``{"scheduled", "due_within_grace", "next_due_s"
        (None: none scheduled; < 0: overdue), "behind_s", "due_queued"}``."""
        return self._drive(revisit.revisit_status(self.keys, grace_s))

    # -- sites and dead letters -------------------------------------------------------------------

    def set_site_limits(self, site: str, *, rate: float | None, concurrency: int | None) -> Any:
        """Per-site limits that override the defaults for every node (None = remove)."""
        return self._drive(budgets.set_site_limits(self.keys, site, rate, concurrency))

    def take_token(self, site: str, budget: SiteBudget, *, debt: bool = True) -> Any:
        """One of ``site``'s rate tokens for a request that never was in the queue: 0 when it
        is spent (go now), else the ms to wait before asking again. A robots.txt fetch
        (``debt``) spends it at once, into debt if need be, and waits only for a Retry-After
        hold; any other request waits for a hold, the site's Crawl-delay and a token."""
        return self._drive(budgets.take_token(self.keys, site, budget, debt))

    def set_site_robots(
        self,
        site: str,
        *,
        delay_ms: int | None = None,
        source: str = "",
        hold_ms: int | None = None,
        why: str = "",
    ) -> Any:
        """What ``site``'s robots.txt asks of its budget for every node: its Crawl-delay in ms
        (0: none; None: unchanged) and its ``source``; a hold of ``hold_ms`` for ``why`` (0:
        end a hold of that cause; None: unchanged)."""
        step = budgets.set_site_robots(
            self.keys, site, delay_ms=delay_ms, source=source, hold_ms=hold_ms, why=why
        )
        return self._drive(step)

    # -- servers (control slot) ------------------------------------------------------------------

    def take_server(
        self,
        node: str,
        asks: Sequence[tuple[str, int, int]],
        *,
        limits: ServerLimits,
        timeout_ms: int,
    ) -> Any:
        """Grants of server budgets: per ``(server, wanted, given back)`` a :class:`Grant`.
        Grants of nodes stopped or silent for ``timeout_ms`` come back when a server is full."""
        step = servers.take_server(
            self.keys, node, timeout_ms=timeout_ms, limits=limits, asks=list(asks)
        )
        return self._drive(step)

    def note_servers(self, pairs: Iterable[tuple[str, str]]) -> Any:
        """Record which server (IP address) each ``(site, server)`` answers from."""
        return self._drive(servers.note_servers(self.keys, list(pairs)))

    def requeue_dead(self, ids: Sequence[str] = (), max_count: int = 1_000_000) -> Any:
        """Move dead letters (the named ones, or up to ``max_count`` per shard) back to the
        queue. Returns how many moved."""
        return self._drive(self._requeue_dead(list(ids), max_count))

    def _requeue_dead(self, ids: list[str], max_count: int) -> Any:
        counts = yield from dead.requeue_dead(self.keys, ids, max_count)
        for shard, n in enumerate(counts):
            if n:
                self.views.poke(shard)
        return sum(counts)

    def purge_dead(self, ids: Sequence[str], shard: int | None = None) -> Any:
        """Delete the dead letters ``ids`` (of ``shard`` only, when the caller knows it).
        Returns how many were deleted."""
        return self._drive(dead.purge_dead(self.keys, list(ids), shard))

    # -- operator writes ---------------------------------------------------------------------------

    def set_paused(self, paused: str | None) -> Any:
        """Pause (``paused`` says who and when) or resume every shard and the control slot."""
        return self._drive(admin.set_paused(self.keys, paused))

    def check_format(self) -> Any:
        """The crawl's format (None: not written yet); raises :class:`CrawlFormatError` when
        the crawl is in another format than this distcrawl's."""
        return self._drive(admin.check_format(self.keys))

    def reset(
        self, *, heartbeat_timeout: float, force: bool = False, keep_seeds: bool = False
    ) -> dict[str, Any]:
        """Delete the crawl's state, keeping what live nodes hold (a blocking client only)."""
        return admin.reset(
            self.client,
            self.keys,
            heartbeat_timeout=heartbeat_timeout,
            force=force,
            keep_seeds=keep_seeds,
        )

    def reset_plan(
        self, *, heartbeat_timeout: float, force: bool = False, keep_seeds: bool = False
    ) -> dict[str, Any]:
        """What :meth:`reset` would delete now, and whose leases it would keep."""
        return admin.reset_plan(
            self.client,
            self.keys,
            heartbeat_timeout=heartbeat_timeout,
            force=force,
            keep_seeds=keep_seeds,
        )
