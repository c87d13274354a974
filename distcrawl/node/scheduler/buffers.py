"""What waits for a node's next round trip: children, acks, dead letters, refused entries,
revisits, the seeds' removal and each site's answers, and how they go out in order. A link is
probed first (checked against the shared dupefilter with a plain read) and pushed with the
next round trip only if the dupefilter does not hold it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from distcrawl.node.scheduler.tracking import SiteFeedback

if TYPE_CHECKING:
    from distcrawl.frontier.batch import Child, DeadLetter, Feedback, Lease, Revisit
    from distcrawl.frontier.store import SyncResult

__all__ = ["Outgoing", "WriteBuffers", "hold_back"]

_A = TypeVar("_A")


def hold_back(
    acks: list[_A], kid_shards: set[int], shard: Callable[[_A], int]
) -> tuple[list[_A], list[_A]]:
    """``acks`` split into those that may go with a flush pushing children to ``kid_shards``
    (it pushes none, or only to their own shard: one script call with them) and those held
    back until Redis said it has those children."""
    if not kid_shards:
        return acks, []
    now = [a for a in acks if kid_shards == {shard(a)}]
    return now, [a for a in acks if kid_shards != {shard(a)}]


def probed_first(child: Child) -> bool:
    """Whether a link is probed before it is pushed: not the node's own (a lease at once), not
    dont_filter (never filtered), not parked (a retry), with a fingerprint."""
    return not (child.own or child.dont_filter or child.delay_ms or not child.fp)


@dataclass(slots=True)
class Outgoing:
    """The writes of one round trip, the links it probes, and the acks and revisits it holds
    back: until Redis has its children (``*_later``), or until the next round trip pushed the
    links it probes (``*_probed``)."""

    children: list[Child]
    probes: list[Child]
    acks: list[Lease]
    acks_later: list[Lease]
    acks_probed: list[Lease]
    revisits: list[Revisit]
    revisits_later: list[Revisit]
    revisits_probed: list[Revisit]
    dead: list[DeadLetter]
    rejected: list[str]
    seeds_done: bool
    feedback: list[Feedback]


class WriteBuffers:
    """The node's writes since its last round trip; each list is appended to by the scheduler
    and emptied only once Redis said it has what it held.

    An ack goes only with its page's children or after them: it is held back (``acks_after``)
    by a flush that pushes children to another shard than its own, since a node killed mid
    round trip (or a cluster's masters, each on its own) may run one shard's call without the
    other's. Revisits (acks that schedule the page again) are held back the same way.

    With ``probing`` (the exact dupefilter, not revisit mode) a link is probed first: the
    round trip that probes it holds back every ack buffered before it (``acks_probed``), and
    the next one pushes it (``confirmed``) where the dupefilter does not hold it; those acks
    then go as above, with that push or after it.
    """

    def __init__(self, *, latency_target: float, probing: bool = False) -> None:
        self.probing = probing
        self.children: list[Child] = []
        #: probed links the dupefilter did not hold: pushed with the next round trip
        self.confirmed: list[Child] = []
        self.acks: list[Lease] = []
        self.acks_after: list[Lease] = []
        #: acks that wait until the links probed before them are pushed
        self.acks_probed: list[Lease] = []
        self.revisits_probed: list[Revisit] = []
        self.dead: list[DeadLetter] = []
        self.rejected: list[str] = []  # rejection records of refused seeds and queue entries
        self.revisits: list[Revisit] = []
        self.revisits_after: list[Revisit] = []
        #: seeds were queued: they leave this node's taken list after the next flush
        self.seeds_pending = False
        self.feedback = SiteFeedback(latency_target)

    def pending(self) -> bool:
        """Whether anything waits to be written (site feedback aside: it rides along)."""
        return bool(
            self.children
            or self.confirmed
            or self.acks
            or self.acks_after
            or self.acks_probed
            or self.revisits_probed
            or self.dead
            or self.rejected
            or self.revisits
            or self.revisits_after
        )

    def urgent(self) -> bool:
        """A dead letter, a refused entry or taken seeds: they go at once, never held."""
        return bool(self.dead or self.rejected or self.seeds_pending)

    def held_leases(self) -> list[Lease]:
        """The leases of the acks and revisits waiting here: the node still knows them."""
        return [
            *self.acks,
            *self.acks_after,
            *self.acks_probed,
            *(rv.lease for rv in (*self.revisits, *self.revisits_after, *self.revisits_probed)),
        ]

    def links(self) -> list[Child]:
        """The links waiting here, probed or not."""
        return [*self.confirmed, *self.children]

    def take(self, shard_of: Callable[[str], int], *, lease: int) -> Outgoing | None:
        """Empty the buffers into one round trip's writes (None: nothing to send and no
        ``lease`` asked); ``shard_of`` maps a child's site to its shard."""
        probes: list[Child] = []
        children = self.children
        if self.probing:
            probes = [c for c in children if probed_first(c)]
            children = [c for c in children if not probed_first(c)]
        children = self.confirmed + children
        kid_shards = {shard_of(c.site) for c in children}
        # acks buffered before links this round trip only probes wait for the next one
        acks_ready, acks_probed = self.acks_probed, self.acks
        revisits_ready, revisits_probed = self.revisits_probed, self.revisits
        if not probes:
            acks_ready, acks_probed = acks_ready + acks_probed, []
            revisits_ready, revisits_probed = revisits_ready + revisits_probed, []
        acks_now, acks_later = hold_back(acks_ready, kid_shards, lambda a: a.shard)
        revisits_now, revisits_later = hold_back(
            revisits_ready, kid_shards, lambda r: r.lease.shard
        )
        acks = self.acks_after + acks_now
        revisits = self.revisits_after + revisits_now
        dead, rejected, seeds_done = self.dead, self.rejected, self.seeds_pending
        if not (children or probes or acks or dead or rejected or seeds_done or lease or revisits):
            return None  # (acks are held back only by a flush with children or probes)
        self.children, self.confirmed, self.acks, self.dead, self.rejected = [], [], [], [], []
        self.acks_after, self.revisits, self.revisits_after = [], [], []
        self.acks_probed, self.revisits_probed = [], []
        self.seeds_pending = False
        return Outgoing(
            children=children,
            probes=probes,
            acks=acks,
            acks_later=acks_later,
            acks_probed=acks_probed,
            revisits=revisits,
            revisits_later=revisits_later,
            revisits_probed=revisits_probed,
            dead=dead,
            rejected=rejected,
            seeds_done=seeds_done,
            feedback=self.feedback.take(),
        )

    def restore(self, out: Outgoing) -> None:
        """The round trip failed: nothing was written (a script is all or nothing) and what its
        probes found is unknown, so all of it goes again, ahead of what was buffered since (its
        links probed again)."""
        self.children[:0] = out.children + out.probes
        self.acks[:0] = out.acks + out.acks_later + out.acks_probed
        self.revisits[:0] = out.revisits + out.revisits_later + out.revisits_probed
        self.dead[:0] = out.dead
        self.rejected[:0] = out.rejected
        self.seeds_pending = self.seeds_pending or out.seeds_done
        self.feedback.restore(out.feedback)

    def sent(self, out: Outgoing, result: SyncResult) -> None:
        """Redis answered: hold back what waits for this round trip's children, keep the links
        its probes found new for the next one (and the acks that wait for them), and keep for
        the next one what rewound shards did not take."""
        self.confirmed = result.probed + self.confirmed
        self.acks_probed = out.acks_probed + self.acks_probed
        self.revisits_probed = out.revisits_probed + self.revisits_probed
        if result.rewound is not None:
            # the shards that lacked this node's last mark wrote nothing: their part goes again
            # with the next flush, after the node forgot what it pushed
            for batch in result.unsent:
                self.children[:0] = batch.children
                self.acks[:0] = batch.acks
                self.revisits[:0] = batch.revisits
                self.dead[:0] = batch.dead
                self.feedback.restore(batch.feedback)
            # their children may be among what a rewound shard did not take
            self.acks[:0] = out.acks_later
            self.revisits[:0] = out.revisits_later
        else:
            self.acks_after, self.revisits_after = out.acks_later, out.revisits_later
        if result.seeds_pending:
            self.seeds_pending = True
