"""The end of a crawl, told once: the last node of a drained crawl to close writes the crawl
report (to MongoDB, and to ``DISTCRAWL_REPORT_FILE`` if set), keeps each site's field shares
for the next crawl's findings, and sends the ``crawl_finished`` notice with the report's
summary. Every node that closes on a finished crawl with findings says so in its exit status
(:data:`distcrawl.base.names.exits.FINDINGS`).

"Last" is told by the crawl's keys: no other node heart-beats any more, and the run's
``finished`` mark, set once, names the one that writes (two nodes closing at the same moment
write one report).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from scrapy import signals

from distcrawl.base.config import SETTINGS
from distcrawl.base.names import exits
from distcrawl.base.names import observe as words
from distcrawl.base.names.commands import CRAWL_REPORT
from distcrawl.frontier import connection
from distcrawl.frontier.protocol.observe import SEND
from distcrawl.frontier.store import FrontierKeys, FrontierStore
from distcrawl.node.observe.alerts import notice_payload
from distcrawl.node.observe.buffer import Event, Observations
from distcrawl.node.observe.watch import AlertSettings
from distcrawl.node.scheduler.identity import default_node_id
from distcrawl.ops.report import (
    ReportSettings,
    build_report,
    keep_baselines,
    observe_store,
    write_report_file,
)

if TYPE_CHECKING:
    from typing import Self

    from scrapy import Spider
    from scrapy.crawler import Crawler

__all__ = ["CrawlEnd", "findings_at_close"]

logger = logging.getLogger(__name__)

#: node id -> findings its crawl held when the node closed on a finished crawl
_FINDINGS: dict[str, int] = {}


def findings_at_close() -> dict[str, int]:
    """Nodes of this process that closed on a finished crawl holding findings, and how many
    (``scrapy crawl`` exits with :data:`~distcrawl.base.names.exits.FINDINGS`)."""
    return {node: n for node, n in _FINDINGS.items() if n}


class CrawlEnd:
    """An extension of every node (see the module).

    Settings: ``DISTCRAWL_REPORT_FILE``, ``DISTCRAWL_ALERT_*``, ``DISTCRAWL_QUALITY_*``,
    ``DISTCRAWL_HEARTBEAT_TIMEOUT``, ``DISTCRAWL_NODE_ID``, ``REDIS_URL``, ``MONGO_*``.
    """

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        settings = crawler.settings
        self.report_file: str = SETTINGS.value(settings, "DISTCRAWL_REPORT_FILE")
        self.alerts = AlertSettings.from_settings(settings)
        self.report_settings = ReportSettings.from_settings(settings)
        self.node_id = SETTINGS.value(settings, "DISTCRAWL_NODE_ID") or default_node_id()

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        ext = cls(crawler)
        crawler.signals.connect(ext.spider_closed, signal=signals.spider_closed)
        return ext

    async def spider_closed(self, spider: Spider, reason: str) -> None:
        observations = Observations.of(self.crawler)
        if reason != "finished" or not observations.drained:
            return
        try:
            await asyncio.to_thread(self._finish, spider.name, observations)
        except Exception as exc:  # the crawl is done: a report is never worth a failed node
            logger.warning("Crawl report not written: %s", exc)

    def _finish(self, spider: str, observations: Observations) -> None:
        settings = self.crawler.settings
        keys = FrontierKeys.for_spider(spider, settings)
        client = connection.client(connection.settings_url(settings), socket_timeout=30)
        try:
            store = FrontierStore(client, keys)
            timeout_ms = int(self.report_settings.heartbeat_timeout * 1000)
            last = store.heart_beating(timeout_ms) == 0
            if last and store.finish_run():
                self._report(client, keys, store, observations)
            findings = int(client.zcard(keys.findings_at))
        finally:
            client.close()
        _FINDINGS[observations.node or self.node_id] = findings
        if findings:
            logger.warning(
                "Crawl %s finished with %d findings (`%s` lists them): exit status %d",
                spider,
                findings,
                CRAWL_REPORT.line(spider=spider),
                exits.FINDINGS,
            )

    def _report(
        self, client: Any, keys: FrontierKeys, store: FrontierStore, observations: Observations
    ) -> None:
        mongo = observe_store(self.crawler.settings)
        try:
            report = build_report(
                client, keys, self.report_settings, mongo=mongo, record_findings=self.node_id
            )
            if mongo is not None and report["run"]:
                mongo.save_report(report)
                keep_baselines(mongo, report)
                earlier = mongo.last_report(keys.spider, before=report["run"])
                keep = [report["run"], *([earlier["run"]] if earlier else [])]
                mongo.prune_snapshots(keys.spider, keep)
        finally:
            if mongo is not None:
                mongo.close()
        logger.info("Crawl report: %s", report["summary"])
        if self.report_file:
            path = write_report_file(report, self.report_file)
            logger.info("Crawl report written to %s", path)
        self._notify(store, report, observations)

    def _notify(
        self, store: FrontierStore, report: dict[str, Any], observations: Observations
    ) -> None:
        sender = self.alerts.sender()
        if sender is None:
            return
        events = [
            Event(words.FINDING, f"{words.FINDING}:{f['site']}:{f['field']}", f["message"], f)
            for f in report["new_findings"]
        ]
        summary = {k: report[k] for k in ("crawl", "run", "duration_s", "pages", "products")}
        summary.update(
            errors=report["errors"]["groups"],
            failures=report["errors"]["failures"],
            dead_letters=report["dead_letters"]["total"],
            findings=[f["message"] for f in report["findings"]],
        )
        events.append(
            Event(
                words.CRAWL_FINISHED,
                f"{words.CRAWL_FINISHED}:{report['run']}",
                report["summary"],
                summary,
            )
        )
        for event in events:
            got = store.claim_notice(event.id, f'{{"kind": "{event.kind}"}}', self.alerts.rate)
            if got == SEND:
                run, crawl = str(report["run"] or ""), report["crawl"]
                sender.send(notice_payload(event, crawl=crawl, run=run, node=self.node_id))
        sender.close(3 * self.alerts.timeout)
