"""What a node saw since its last heartbeat: failures by error group (with the first occurrence
of a group it keeps, until the crawl says whether it stores it), the fields of its stored
products by site, and the events worth a notice. The heartbeat takes it all in one ``observe``
call (:meth:`Observations.take`); nothing here talks to Redis or MongoDB itself.
"""

from __future__ import annotations

import datetime as dt
import logging
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from distcrawl.base.config import SETTINGS
from distcrawl.base.coverage import present_fields, step_of
from distcrawl.base.grouping import OTHER_TEMPLATE, Failure, group_id
from distcrawl.base.names import stats as stat_keys
from distcrawl.base.recent import RecentKeys
from distcrawl.frontier.protocol.observe import GroupEntry, Limits, encode_delta
from distcrawl.storage.observe import snapshot_document

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.statscollectors import StatsCollector

    from distcrawl.frontier.protocol.observe import Observed
    from distcrawl.storage.observe import SnapshotWriter

__all__ = ["Event", "Observations", "Sample"]

logger = logging.getLogger(__name__)

#: sample URLs a node sends per group and heartbeat (the crawl keeps 3)
SAMPLES = 3
#: groups a node remembers having offered a snapshot of
KNOWN_GROUPS = 10_000
#: events waiting for the watch at most (the rest are dropped, counted in the log)
EVENTS_MAX = 1000


@dataclass
class Sample:
    """A first occurrence as the node saw it (made only when the node offers it)."""

    url: str
    status: int | None
    headers: list[tuple[str, str]]
    body: bytes
    body_bytes: int
    error: str
    at: dt.datetime = field(default_factory=lambda: dt.datetime.now(dt.UTC))


@dataclass
class Event:
    """Something a notice is sent for: its kind (a word of
    :data:`~distcrawl.base.names.observe.NOTICES`), an id the same on every node that sees it,
    a line of text and its data."""

    kind: str
    id: str
    text: str
    data: dict[str, Any] = field(default_factory=dict)


@dataclass
class _Group:
    failure: Failure
    count: int = 0
    samples: list[str] = field(default_factory=list)
    sample: Sample | None = None


@dataclass
class Taken:
    """What one heartbeat carries, kept until Redis answered (or given back on a failure)."""

    groups: dict[str, _Group]
    products: dict[str, list[list[Any]]]
    delta: str


_REGISTRY: weakref.WeakKeyDictionary[Any, Observations] = weakref.WeakKeyDictionary()


class Observations:
    """One per crawler (:meth:`of`): every part of a node that sees a failure or stores a
    product tells it here.

    Settings: ``DISTCRAWL_ERROR_GROUPS_MAX``, ``DISTCRAWL_SNAPSHOTS_MAX``,
    ``DISTCRAWL_SNAPSHOT_BYTES``, ``DISTCRAWL_QUALITY_FIELDS``, ``DISTCRAWL_QUALITY_WINDOW``,
    ``DISTCRAWL_EXPECTED_FIELDS``.
    """

    def __init__(
        self,
        *,
        stats: Callable[[], StatsCollector],
        limits: Limits,
        snapshot_bytes: int,
        fields: list[str],
        expected: list[str],
    ) -> None:
        self._stats = stats
        self.limits = limits
        self.snapshot_bytes = max(0, snapshot_bytes)
        self.fields = list(fields)
        self.expected = list(expected)
        #: set at the scheduler's open: the crawl's spider name and run, and this node
        self.spider = ""
        self.run = ""
        self.node = ""
        #: where granted snapshots go (set by the watch; None: they are dropped)
        self.writer: SnapshotWriter | None = None
        #: called when a site is to be judged or an event waits (set by the watch)
        self.wake: Callable[[], None] = lambda: None
        #: the scheduler's close: whether the node saw the whole crawl drained
        self.drained = False
        self._groups: dict[str, _Group] = {}
        #: site -> its stored products in chunks of at most a quarter window, oldest first:
        #: [products, {field: products holding it}] (the crawl marks the window in between)
        self._products: dict[str, list[list[Any]]] = {}
        self._step = step_of(limits.window)
        self._offered = RecentKeys(KNOWN_GROUPS)
        #: a site's products filled a chunk since the last heartbeat took them: they go with
        #: the next round trip, not the next beat (:attr:`due`)
        self._due = False
        #: sites whose figures came back to be judged, and events to be sent
        self.to_judge: dict[str, Any] = {}
        self.events: list[Event] = []

    @property
    def stats(self) -> StatsCollector:
        return self._stats()

    @classmethod
    def of(cls, crawler: Crawler) -> Observations:
        """The observations of *crawler* (made on first use, from its settings)."""
        found = _REGISTRY.get(crawler)
        if found is None:
            s = crawler.settings

            def get(name: str) -> Any:
                return SETTINGS.value(s, name)

            ref = weakref.ref(crawler)

            def stats() -> StatsCollector:
                # the crawler's stats exist once its crawl starts (the spider is made before)
                crawler = ref()
                assert crawler is not None and crawler.stats is not None
                return crawler.stats

            found = cls(
                stats=stats,
                limits=Limits(
                    groups_max=get("DISTCRAWL_ERROR_GROUPS_MAX"),
                    snapshots_max=get("DISTCRAWL_SNAPSHOTS_MAX"),
                    window=get("DISTCRAWL_QUALITY_WINDOW"),
                ),
                snapshot_bytes=get("DISTCRAWL_SNAPSHOT_BYTES"),
                fields=get("DISTCRAWL_QUALITY_FIELDS"),
                expected=get("DISTCRAWL_EXPECTED_FIELDS"),
            )
            _REGISTRY[crawler] = found
        return found

    # -- what the node tells ---------------------------------------------------------------

    def failed(
        self, failure: Failure, url: str, sample: Callable[[], Sample] | None = None
    ) -> None:
        """A failure: counted in its group; *sample* makes its first occurrence, asked for
        only when this node has not offered one of the group yet."""
        self.stats.inc_value(stat_keys.OBSERVED_ERRORS)
        gid = failure.group
        group = self._groups.get(gid)
        if group is None:
            group = self._groups[gid] = _Group(failure)
        group.count += 1
        if url and len(group.samples) < SAMPLES and url not in group.samples:
            group.samples.append(url)
        wants = sample is not None and self.limits.snapshots_max > 0
        if wants and group.sample is None and gid not in self._offered:
            assert sample is not None
            self._offered.add(gid)
            try:
                group.sample = sample()
            except Exception:  # a snapshot is never worth a failure of its own
                logger.exception("Could not keep the first occurrence of %s", failure.template)

    def stored(self, site: str, item: Any) -> None:
        """A product was stored: its site's products and fields are counted."""
        chunks = self._products.get(site)
        if chunks is None:
            chunks = self._products[site] = [[0, {}]]
        entry = chunks[-1]
        if entry[0] >= self._step:
            entry = [0, {}]
            chunks.append(entry)
        entry[0] += 1
        if entry[0] >= self._step:
            self._due = True
        counts: dict[str, int] = entry[1]
        for name in present_fields(item, self.fields):
            counts[name] = counts.get(name, 0) + 1

    @property
    def due(self) -> bool:
        """Whether a site's products filled a chunk (a quarter window) since the last heartbeat
        took them. The crawl marks its figures between the deltas of all its nodes as they
        arrive: a node that held a crawl's worth of products until its next beat would put
        products stored minutes apart on the same side of a mark, and a fall could hide in
        the mix (a fast crawl judged nothing)."""
        return self._due

    def missing_fields(self, product: Any) -> list[str]:
        """The expected fields (``DISTCRAWL_EXPECTED_FIELDS``) a product lacks."""
        held = set(present_fields(product, self.expected))
        return [name for name in self.expected if name not in held]

    def event(self, event: Event) -> None:
        if len(self.events) >= EVENTS_MAX:
            logger.warning("Notice of %s not sent: too many events wait", event.id)
            return
        self.events.append(event)
        self.wake()

    # -- the heartbeat's part --------------------------------------------------------------

    def take(self) -> Taken | None:
        """What the next heartbeat carries (None: nothing), emptied here."""
        if not self._groups and not self._products:
            return None
        groups, self._groups = self._groups, {}
        products, self._products = self._products, {}
        self._due = False
        entries = [
            GroupEntry(
                gid,
                group_id("", g.failure.kind, OTHER_TEMPLATE),
                g.failure.site,
                g.failure.kind,
                g.failure.template,
                g.count,
                tuple(g.samples),
                g.sample is not None,
            )
            for gid, g in groups.items()
        ]
        return Taken(groups, products, encode_delta(entries, products))

    def restore(self, taken: Taken) -> None:
        """The heartbeat failed: what it carried goes with the next one."""
        for gid, group in taken.groups.items():
            now = self._groups.get(gid)
            if now is None:
                self._groups[gid] = group
                continue
            now.count += group.count
            now.samples = list(dict.fromkeys([*group.samples, *now.samples]))[:SAMPLES]
            now.sample = group.sample or now.sample
        for site, chunks in taken.products.items():
            self._products[site] = [*chunks, *self._products.get(site, [])]

    def answered(self, taken: Taken, observed: Observed) -> None:
        """Redis took the delta: the granted first occurrences go to MongoDB, the sites that
        passed a mark are judged."""
        for gid in observed.granted:
            group = taken.groups.get(gid)
            if group is None or group.sample is None:
                continue
            self._write(gid, group)
        if observed.sites:
            self.to_judge.update(observed.sites)
            self.wake()

    def _write(self, gid: str, group: _Group) -> None:
        sample = group.sample
        assert sample is not None
        writer = self.writer
        if writer is None:
            self.stats.inc_value(stat_keys.SNAPSHOTS_DROPPED)
            return
        failure = group.failure
        document = snapshot_document(
            spider=self.spider,
            run=self.run,
            group=gid,
            site=failure.site,
            kind=failure.kind,
            template=failure.template,
            url=sample.url,
            status=sample.status,
            headers=sample.headers,
            body=sample.body,
            body_bytes=sample.body_bytes,
            error=sample.error,
            node=self.node,
            at=sample.at,
        )
        if not writer.put(document):
            logger.warning("First occurrence of %s not stored: too many wait", failure.template)
