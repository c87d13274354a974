"""The MongoDB item pipeline: products upserted in bulk on a unique key, and durable before
``process_item`` returns, in MongoDB or, while MongoDB is unreachable, in a local journal.

The frontier acknowledges a request once Scrapy has finished with its response, and Scrapy
awaits every item's ``process_item``; so an item's coroutine completes only when the item is
stored, journaled (fsync'd), or dropped with ``DropItem`` and a counted reason. A transient
database fault never raises: the item waits, which slows the crawl down (backpressure).

This module is the Scrapy side (settings, validation, drops); :mod:`distcrawl.storage` does
the storing: the document shape (``documents``), the bulk writes (``writer``), the waiting,
retries and outages (``store``) and the journal (``journal``).
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self
from urllib.parse import unquote, urlsplit

from pymongo.write_concern import WriteConcern
from scrapy.exceptions import DropItem

from distcrawl.base.config import SETTINGS
from distcrawl.base.names import stats as stat_keys
from distcrawl.node.items import Revisit
from distcrawl.node.observe.buffer import Observations
from distcrawl.servers.embedded import DEFAULT_MONGO_DATABASE, resolve_home
from distcrawl.storage.documents import PRODUCT, InvalidItem, make_record, revisit_record
from distcrawl.storage.journal import Journal
from distcrawl.storage.store import ProductStore, Rejected
from distcrawl.storage.writer import MongoWriter

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from scrapy.crawler import Crawler
    from scrapy.statscollectors import StatsCollector

__all__ = ["MongoPipeline"]


class MongoPipeline:
    """Stores products in MongoDB with bulk upserts; survives MongoDB outages without losing
    or duplicating a product.

    Settings (read once, in ``from_crawler``):

    - ``MONGO_URI``: the server (required; :class:`distcrawl.node.embedded.EmbeddedServices` fills
      it with the embedded SecantusDB when empty).
    - ``MONGO_DATABASE``: database (unset: the URI's, else ``catalog``).
    - ``MONGO_COLLECTION``: collection.
    - ``MONGO_UNIQUE_KEY``: item fields forming the unique key, stored as the document
      ``_id`` (whose index is unique in every collection; created with the collection at
      open): ``["url"]`` (the canonical URL) or e.g. ``["site", "sku"]``. An item
      missing a key field is dropped (``missing_<field>``).
    - ``MONGO_BATCH_SIZE``: most products per bulk write.
    - ``MONGO_FLUSH_INTERVAL``: seconds an idle writer lets a partial batch gather (0: group
      commit, batches grow with the load. Each item's request stays leased until the item
      is durable and a node leases no more than its free slots, so any wait here caps a node
      at ``CONCURRENT_REQUESTS / interval`` products per second).
    - ``MONGO_WRITE_CONCERN``: a dict (or JSON object) of ``WriteConcern`` arguments, or just
      the ``w`` value. ``w=0`` is refused.
    - ``MONGO_PRICE_HISTORY``: price-history entries kept per product.
    - ``MONGO_CHANGES_COLLECTION``: the change log, one document per price, currency or
      availability change (empty: none).
    - ``MONGO_TIMEOUT``: driver timeouts in seconds.
    - ``MONGO_BUFFER_MAX_ITEMS``: products held in memory during an outage before they spill
      to the journal.
    - ``MONGO_JOURNAL_AFTER``: seconds of outage after which products go to the journal.
    - ``MONGO_JOURNAL_PATH``: journal directory (unset:
      ``<DISTCRAWL_HOME>/journal/<database>.<collection>``); nodes on one machine may share
      it, and each replays what stopped nodes left there.
    - ``MONGO_CLOSE_TIMEOUT``: seconds a closing node waits for MongoDB to write what waits
      in memory before journaling it.
    - ``MONGO_JOURNAL_CLOSE_TIMEOUT``: seconds a closing node whose journal holds products
      waits for MongoDB and replays them (a log line every 5 s). If MongoDB
      does not take them in time the node logs the journal's directory and product count,
      publishes the count (``pipeline/journal_held``) and ``scrapy crawl`` exits with
      :data:`distcrawl.base.names.exits.JOURNAL_HELD`.
    - ``MONGO_RETRY_BACKOFF`` / ``MONGO_RETRY_BACKOFF_MAX``: pause between retries, doubling
      from the first to the second.
    - ``DISTCRAWL_HOME``: see :mod:`distcrawl.servers.embedded` (for the default journal path).

    Stats: ``pipeline/written``, ``pipeline/inserted``, ``pipeline/updated``,
    ``pipeline/batches``, ``pipeline/retries``, ``pipeline/journaled``, ``pipeline/replayed``,
    ``pipeline/journal_damaged``, ``pipeline/journal_held`` (a gauge: products in the journal
    that no live node holds), ``pipeline/dropped/<reason>`` (``missing_url``,
    ``missing_name``, ``unencodable``, ``too_large``, ``rejected``, ``revisit_status``);
    ``pipeline/changes`` (new documents in the change log), ``pipeline/not_modified`` and
    ``pipeline/gone`` (revisits applied to a stored product) and ``pipeline/revisit_unknown``
    (revisits of a page whose product is not stored).

    A :class:`~distcrawl.node.items.Revisit` item (a 304, 404 or 410 answer of a product page,
    from :class:`~distcrawl.node.revisit.freshness.FreshnessMiddleware`) takes the same way as a
    product:
    durable (written or journaled) before ``process_item`` returns.
    """

    def __init__(
        self,
        *,
        stats: StatsCollector,
        uri: str,
        database: str,
        collection: str,
        unique_key: Sequence[str],
        batch_size: int,
        flush_interval: float,
        write_concern: WriteConcern,
        price_history: int,
        changes_collection: str,
        timeout: float,
        buffer_max_items: int,
        journal_after: float,
        journal_path: Path,
        close_timeout: float,
        journal_close_timeout: float,
        retry_backoff: float,
        retry_backoff_max: float,
        observations: Observations | None = None,
        stopped: Callable[[], bool] | None = None,
    ) -> None:
        if not uri:
            raise ValueError(
                "MONGO_URI is empty: set it, or enable the add-on "
                "distcrawl.node.embedded.EmbeddedServices to use the embedded MongoDB"
            )
        if not unique_key:
            raise ValueError("MONGO_UNIQUE_KEY names no field")
        self.stats = stats
        self.uri = uri
        self.database = database
        self.collection = collection
        self.unique_key = tuple(unique_key)
        # the store's tuning, passed on as given: ProductStore bounds each value
        self.batch_size = batch_size
        self.flush_interval = flush_interval
        self.write_concern = write_concern
        if not self.write_concern.acknowledged:
            raise ValueError("MONGO_WRITE_CONCERN w=0 cannot tell when a product is durable")
        self.price_history = max(0, price_history)
        self.changes_collection = changes_collection
        self.timeout = timeout
        self.buffer_max_items = buffer_max_items
        self.journal_after = journal_after
        self.journal_path = journal_path
        self.close_timeout = close_timeout
        self.journal_close_timeout = journal_close_timeout
        self.retry_backoff = retry_backoff
        self.retry_backoff_max = retry_backoff_max
        #: counts each stored product's fields by site (the crawl's field coverage)
        self.observations = observations
        #: the node was asked to stop (a closing node waiting for MongoDB then stops waiting)
        self.stopped = stopped or (lambda: False)

        self._store: ProductStore | None = None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        settings = crawler.settings

        def get(name: str) -> Any:
            return SETTINGS.value(settings, name)

        uri = get("MONGO_URI")
        database = get("MONGO_DATABASE") or _uri_database(uri) or DEFAULT_MONGO_DATABASE
        collection = get("MONGO_COLLECTION")
        journal_path = get("MONGO_JOURNAL_PATH") or (
            resolve_home(get("DISTCRAWL_HOME") or None) / "journal" / f"{database}.{collection}"
        )
        assert crawler.stats is not None
        return cls(
            stats=crawler.stats,
            uri=uri,
            database=database,
            collection=collection,
            unique_key=get("MONGO_UNIQUE_KEY"),
            batch_size=get("MONGO_BATCH_SIZE"),
            flush_interval=get("MONGO_FLUSH_INTERVAL"),
            write_concern=WriteConcern(**get("MONGO_WRITE_CONCERN")),
            price_history=get("MONGO_PRICE_HISTORY"),
            changes_collection=get("MONGO_CHANGES_COLLECTION"),
            timeout=get("MONGO_TIMEOUT"),
            buffer_max_items=get("MONGO_BUFFER_MAX_ITEMS"),
            journal_after=get("MONGO_JOURNAL_AFTER"),
            journal_path=Path(journal_path),
            close_timeout=get("MONGO_CLOSE_TIMEOUT"),
            journal_close_timeout=get("MONGO_JOURNAL_CLOSE_TIMEOUT"),
            retry_backoff=get("MONGO_RETRY_BACKOFF"),
            retry_backoff_max=get("MONGO_RETRY_BACKOFF_MAX"),
            observations=Observations.of(crawler),
            # Scrapy's graceful stop (SIGTERM, Ctrl-C) says so here first
            stopped=lambda: not crawler.crawling,
        )

    # ------------------------------------------------------------------ Scrapy's interface

    async def open_spider(self) -> None:
        writer = MongoWriter(
            uri=self.uri,
            database=self.database,
            collection=self.collection,
            history=self.price_history,
            write_concern=self.write_concern,
            timeout=self.timeout,
            changes=self.changes_collection or None,
        )
        journal = Journal(self.journal_path, database=self.database, collection=self.collection)
        # where this node's journal is: `journal replay` of that folder tells the crawl
        self.stats.set_value(stat_keys.JOURNAL_PATH, str(Path(self.journal_path).resolve()))
        self._store = ProductStore(
            writer=writer,
            journal=journal,
            count=self._count,
            gauge=self._gauge,
            batch_size=self.batch_size,
            flush_interval=self.flush_interval,
            buffer_max_items=self.buffer_max_items,
            journal_after=self.journal_after,
            close_timeout=self.close_timeout,
            journal_close_timeout=self.journal_close_timeout,
            retry_backoff=self.retry_backoff,
            retry_backoff_max=self.retry_backoff_max,
            stopped=self.stopped,
        )
        await self._store.open()

    async def process_item(self, item: Any) -> Any:
        now = dt.datetime.now(dt.UTC)
        try:
            if isinstance(item, Revisit):
                record = revisit_record(
                    str(item.get("url") or ""),
                    int(item.get("status") or 0),
                    self.unique_key,
                    seen_at=item.get("seen_at") or now,
                    unlisted=bool(item.get("unlisted")),
                )
            else:
                record = make_record(item, self.unique_key, history=self.price_history, now=now)
        except InvalidItem as exc:
            self._count(f"dropped/{exc.reason}", 1)
            raise DropItem(str(exc)) from exc
        assert self._store is not None, "open_spider() was not called"
        try:
            await self._store.put(record)
        except Rejected as exc:  # counted by the store
            raise DropItem(str(exc)) from exc
        if self.observations is not None and record.kind == PRODUCT:
            fields = record.fields
            site = fields.get("site") or urlsplit(str(fields.get("url") or "")).hostname or ""
            self.observations.stored(str(site), fields)
        return item

    async def close_spider(self) -> None:
        if self._store is not None:
            await self._store.close()

    def _count(self, name: str, value: int) -> None:
        if value:
            self.stats.inc_value(f"pipeline/{name}", value)

    def _gauge(self, name: str, value: int) -> None:
        self.stats.set_value(f"pipeline/{name}", value)


def _uri_database(uri: str) -> str:
    try:
        return unquote(urlsplit(uri).path.lstrip("/"))
    except ValueError:
        return ""
