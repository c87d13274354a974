"""A node's watch over what it observes: the crawl's run claimed at open, each site that came
back from a heartbeat judged (a finding is recorded once for the crawl, by the first node to
find it), and the notice of each event claimed for the cluster and sent.

It runs as a task on the node's event loop and talks to Redis through the scheduler's store;
MongoDB (the last crawl's figures, the snapshots) and the webhooks are reached from threads.

Settings: ``DISTCRAWL_QUALITY_FIELDS``, ``DISTCRAWL_QUALITY_WINDOW``, ``DISTCRAWL_QUALITY_DROP``,
``DISTCRAWL_ALERT_WEBHOOK``, ``DISTCRAWL_ALERT_RATE``, ``DISTCRAWL_ALERT_RETRIES``,
``DISTCRAWL_ALERT_TIMEOUT``, ``MONGO_URI``, ``MONGO_DATABASE``, ``MONGO_TIMEOUT``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import secrets
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlsplit

from distcrawl.base.config import SETTINGS
from distcrawl.base.coverage import Baseline, judge
from distcrawl.base.names import observe as words
from distcrawl.base.names import stats as stat_keys
from distcrawl.frontier.protocol.observe import DUPLICATE, RATE_LIMITED, SEND
from distcrawl.node.observe.alerts import WebhookSender, notice_payload
from distcrawl.node.observe.buffer import Event
from distcrawl.servers.embedded import DEFAULT_MONGO_DATABASE
from distcrawl.storage.observe import ObserveStore, SnapshotWriter

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings
    from scrapy.statscollectors import StatsCollector

    from distcrawl.base.coverage import SiteFigures
    from distcrawl.frontier.batch import SiteEvent
    from distcrawl.frontier.store import FrontierStore
    from distcrawl.node.observe.buffer import Observations

__all__ = ["AlertSettings", "Watch", "mongo_target", "outage_event", "site_cut_event"]

logger = logging.getLogger(__name__)

#: seconds an outage's notice waits before another is sent for the same crawl (no Redis to
#: claim it in: the nodes claim it in MongoDB)
OUTAGE_COOLDOWN = 600.0
#: a site's adaptive factor at or above this was at its full rate
FULL_RATE = 0.999


def mongo_target(settings: BaseSettings) -> tuple[str, str]:
    """``MONGO_URI`` and the database the pipeline writes to (``MONGO_DATABASE``, else the
    URI's, else the default)."""
    uri: str = SETTINGS.value(settings, "MONGO_URI")
    database = SETTINGS.value(settings, "MONGO_DATABASE")
    if not database and uri:
        with contextlib.suppress(ValueError):
            database = unquote(urlsplit(uri).path.lstrip("/"))
    return uri, database or DEFAULT_MONGO_DATABASE


@dataclass(frozen=True)
class AlertSettings:
    """Where notices go and how often (the settings of their names)."""

    urls: tuple[str, ...] = ()
    rate: int = 20
    tries: int = 5
    timeout: float = 10.0

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> AlertSettings:
        return cls(
            urls=tuple(SETTINGS.value(settings, "DISTCRAWL_ALERT_WEBHOOK")),
            rate=SETTINGS.value(settings, "DISTCRAWL_ALERT_RATE"),
            tries=SETTINGS.value(settings, "DISTCRAWL_ALERT_RETRIES"),
            timeout=SETTINGS.value(settings, "DISTCRAWL_ALERT_TIMEOUT"),
        )

    def sender(self) -> WebhookSender | None:
        if not self.urls:
            return None
        return WebhookSender(list(self.urls), tries=self.tries, timeout=self.timeout)


def site_cut_event(event: SiteEvent, recovery: float) -> Event | None:
    """The notice of a site's cut from its full rate (None for a deeper cut, or a recovery)."""
    site, kind, before, after, cause = event
    if kind != "cut" or before < FULL_RATE:
        return None
    text = (
        f"{site}: its shared rate is cut for every node ({cause}), factor {before:.2f} -> "
        f"{after:.2f}, wearing off within {(1 - after) * recovery:.0f}s"
    )
    data = {"site": site, "cause": cause, "factor": round(after, 3)}
    return Event(words.SITE_CUT, f"{words.SITE_CUT}:{site}:{cause}", text, data)


def outage_event(node: str, reason: str) -> Event:
    return Event(
        words.FRONTIER_OUTAGE,
        words.FRONTIER_OUTAGE,
        f"Redis is unavailable ({reason}), seen by node {node}: the nodes wait and keep their "
        "work in memory",
        {"reason": reason, "node": node},
    )


class Watch:
    """Judges sites, records findings and sends notices for a node (see the module)."""

    def __init__(
        self,
        *,
        store: FrontierStore,
        observations: Observations,
        stats: StatsCollector,
        spider: str,
        node_id: str,
        drop: float,
        alerts: AlertSettings,
        mongo: tuple[str, str],
        mongo_timeout: float = 5.0,
    ) -> None:
        self.store = store
        self.observations = observations
        self.stats = stats
        self.spider = spider
        self.node_id = node_id
        self.drop = drop
        self.alerts = alerts
        self.mongo = mongo
        self.mongo_timeout = mongo_timeout
        self.sender = alerts.sender()
        #: each site's field shares in its last completed crawl (loaded at open)
        self.last_crawl: dict[str, Baseline] = {}
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._closing = False
        self._failing = False

    @classmethod
    def from_settings(
        cls,
        settings: BaseSettings,
        *,
        store: FrontierStore,
        observations: Observations,
        stats: StatsCollector,
        spider: str,
        node_id: str,
    ) -> Watch:
        return cls(
            store=store,
            observations=observations,
            stats=stats,
            spider=spider,
            node_id=node_id,
            drop=SETTINGS.value(settings, "DISTCRAWL_QUALITY_DROP"),
            alerts=AlertSettings.from_settings(settings),
            mongo=mongo_target(settings),
            mongo_timeout=SETTINGS.value(settings, "MONGO_TIMEOUT"),
        )

    # -- open and close ---------------------------------------------------------------------

    async def open(self) -> None:
        """Claim the crawl's run (the first node makes it), and start watching."""
        run = await self.store.claim_run(secrets.token_hex(6), self.node_id)
        obs = self.observations
        obs.spider, obs.run, obs.node = self.spider, run.id, self.node_id
        uri, database = self.mongo
        if uri:
            obs.writer = SnapshotWriter(uri, database, timeout=self.mongo_timeout)
        obs.wake = self._wake.set
        self._task = asyncio.ensure_future(self._run())

    async def close(self, timeout: float = 10.0) -> None:
        """Judge and notify what waits (the last heartbeat's answer), then stop; snapshots and
        notices still on their way get up to their timeouts (threads)."""
        self._closing = True
        self._wake.set()
        if self._task is not None:
            await asyncio.wait([self._task], timeout=timeout)
        writer = self.observations.writer
        if writer is not None:
            await asyncio.to_thread(writer.close, timeout)
        if self.sender is not None:
            await asyncio.to_thread(self.sender.close, 3 * self.alerts.timeout)
        self._copy_counts()

    async def _run(self) -> None:
        await self._load_last_crawl()
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), 5.0)
            self._wake.clear()
            try:
                await self._work()
            except Exception as exc:  # Redis away, a damaged record: try again later
                if not self._failing:
                    logger.warning("Observations not handled (tried again later): %s", exc)
                self._failing = True
            else:
                self._failing = False
            self._copy_counts()
            if self._closing:
                return

    async def _load_last_crawl(self) -> None:
        uri, database = self.mongo
        if not uri:
            return

        def load() -> dict[str, Baseline]:
            store = ObserveStore(uri, database, timeout=self.mongo_timeout)
            try:
                found = store.baselines(self.spider, run=self.observations.run)
            finally:
                store.close()
            return {site: Baseline(n, shares) for site, (n, shares) in found.items()}

        try:
            self.last_crawl = await asyncio.to_thread(load)
        except Exception as exc:
            logger.warning("Last crawl's field coverage not read (%s): findings compare with "
                           "earlier products of this crawl", exc)  # fmt: skip

    async def _work(self) -> None:
        obs = self.observations
        while obs.to_judge:
            site, figures = obs.to_judge.popitem()
            await self.judge(site, figures)
        while obs.events:
            await self.notify(obs.events.pop(0))

    def _copy_counts(self) -> None:
        writer = self.observations.writer
        if writer is not None:
            self.stats.set_value(stat_keys.SNAPSHOTS_WRITTEN, writer.written)
            self.stats.set_value(stat_keys.SNAPSHOTS_DROPPED, writer.dropped)
        if self.sender is not None:
            self.stats.set_value(stat_keys.ALERTS_SENT, self.sender.sent)
            self.stats.set_value(stat_keys.ALERTS_FAILED, self.sender.failed)

    # -- findings and notices ---------------------------------------------------------------

    async def judge(self, site: str, figures: SiteFigures) -> None:
        obs = self.observations
        found = judge(
            site,
            figures,
            fields=obs.fields,
            window=obs.limits.window,
            drop=self.drop,
            last_crawl=self.last_crawl.get(site),
        )
        for finding in found:
            at = int(self.store.server_time() * 1000)
            record = {**finding.as_dict(), "at_ms": at, "node": self.node_id}
            if not await self.store.record_finding(finding.key, json.dumps(record), at):
                continue
            self.stats.inc_value(stat_keys.FINDINGS)
            logger.warning("Finding: %s", finding.message)
            event = f"{words.FINDING}:{finding.site}:{finding.field}"
            await self.notify(Event(words.FINDING, event, finding.message, finding.as_dict()))

    async def notify(self, event: Event) -> None:
        """Claim *event*'s notice for the cluster and send it if this node won it."""
        if self.sender is None:
            return
        record = json.dumps({"kind": event.kind, "node": self.node_id, "text": event.text})
        got = await self.store.claim_notice(event.id, record, self.alerts.rate)
        if got == SEND:
            self.send(event)
        elif got == DUPLICATE:
            self.stats.inc_value(stat_keys.ALERTS_DUPLICATE)
        elif got == RATE_LIMITED:
            self.stats.inc_value(stat_keys.ALERTS_RATE_LIMITED)
            logger.warning("Notice not sent (over DISTCRAWL_ALERT_RATE): %s", event.text)

    def send(self, event: Event) -> None:
        if self.sender is not None:
            obs = self.observations
            self.sender.send(notice_payload(event, crawl=self.spider, run=obs.run, node=obs.node))

    # -- events of the node -----------------------------------------------------------------

    def nodes_dead(self, names: list[str], requests: int) -> None:
        """This node recovered *names* (declared dead): one notice each."""
        for name in names:
            text = f"node {name} is dead (no heartbeat): its leases went back to the queue"
            data = {"node": name, "requests_returned": requests}
            # a node recovered twice (it came back, and died again) is two events
            event = f"{words.NODE_DEAD}:{name}:{int(self.store.server_time())}"
            self.observations.event(Event(words.NODE_DEAD, event, text, data))

    def site_events(self, events: list[SiteEvent], recovery: float) -> None:
        """A round trip's adaptive cuts: a site cut from its full rate is an event (cut by
        one node's round trip: its id is that moment)."""
        for site_event in events:
            made = site_cut_event(site_event, recovery)
            if made is not None:
                made.id += f":{int(self.store.server_time() * 1000)}"
                self.observations.event(made)

    def outage(self, reason: str) -> None:
        """Redis went away: the notice is claimed in MongoDB (there is no Redis to claim it
        in), from a thread; without MongoDB every node that sees the outage sends it."""
        if self.sender is None:
            return
        event = outage_event(self.node_id, reason)
        uri, database = self.mongo

        def claim_and_send() -> None:
            first = True
            if uri:
                store = ObserveStore(uri, database, timeout=self.mongo_timeout)
                try:
                    first = store.claim_once(f"{self.spider}:{event.id}", OUTAGE_COOLDOWN)
                except Exception as exc:
                    logger.warning("Outage notice not claimed in MongoDB (%s): sent anyway", exc)
                finally:
                    store.close()
            if first:
                self.send(event)

        loop = asyncio.get_event_loop()
        loop.run_in_executor(None, claim_and_send)
