"""The MongoDB pipeline against a real SecantusDB: one document per product, price history,
validation, outages (retry, journal, replay) and a node killed while MongoDB is down.

Crawls run in a subprocess (this file run as a script), as ``scrapy crawl`` does: the asyncio
Twisted reactor, the real Scrapy engine and scraper, ``data:`` requests whose callbacks yield
the products. The subprocess writes each acknowledged product (``item_scraped``: its
``process_item`` completed) to an fsync'd file, which is what the frontier's ack relies on.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import subprocess
import sys
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import pymongo
import pytest
from bson.decimal128 import Decimal128
from fixtures_services import mongo_writer
from scrapy.utils.test import get_crawler

from distcrawl.node.pipeline import MongoPipeline
from distcrawl.servers.process import MongoServer
from distcrawl.storage.documents import InvalidItem, make_record
from distcrawl.storage.journal import Journal
from distcrawl.storage.writer import MongoWriter

REPO = Path(__file__).resolve().parents[2]
NOW = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


# --------------------------------------------------------------------------- crawl helper


def product(i: int, price: str = "10.00", **extra: Any) -> dict[str, Any]:
    return {
        "url": f"https://shop.test/p/{i}",
        "name": f"Product {i}",
        "price": price,
        "currency": "EUR",
        "availability": "InStock",
        "site": "shop.test",
        "sku": f"SKU-{i}",
        **extra,
    }


class Crawl:
    """A crawl subprocess; ``result()`` waits for it and returns stats, log and acks."""

    def __init__(self, tmp_path: Path, name: str, spec: dict[str, Any]) -> None:
        self.dir = tmp_path / name
        self.dir.mkdir()
        spec = {**spec, "ack_path": str(self.dir / "acks"), "stats_path": str(self.dir / "stats")}
        spec_path = self.dir / "spec.json"
        spec_path.write_text(json.dumps(spec))
        self.log_path = self.dir / "log"
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(
                [str(REPO), str(REPO / "tests"), os.environ.get("PYTHONPATH", "")]
            ),
        }
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, __file__, str(spec_path)],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=self.dir,
            )

    def acks(self) -> list[str]:
        try:
            return (self.dir / "acks").read_text().splitlines()
        except FileNotFoundError:
            return []

    @property
    def log(self) -> str:
        return self.log_path.read_text()

    def result(self, timeout: float = 120, code: int = 0) -> dict[str, Any]:
        try:
            exit_code = self.proc.wait(timeout=timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
        assert exit_code == code, self.log[-4000:]
        stats: dict[str, Any] = json.loads((self.dir / "stats").read_text())
        return stats

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()


def crawl(tmp_path: Path, name: str, **spec: Any) -> tuple[dict[str, Any], str]:
    run = Crawl(tmp_path, name, spec)
    stats = run.result()
    return stats, run.log


def documents(mongo_uri: str, collection: str = "products") -> list[dict[str, Any]]:
    client: pymongo.MongoClient[dict[str, Any]] = pymongo.MongoClient(mongo_uri)
    try:
        return list(client.get_default_database()[collection].find())
    finally:
        client.close()


def settings(mongo_uri: str, tmp_path: Path, **extra: Any) -> dict[str, Any]:
    return {
        "MONGO_URI": mongo_uri,
        "MONGO_JOURNAL_PATH": str(tmp_path / "journal"),
        "MONGO_TIMEOUT": 1.0,
        "MONGO_RETRY_BACKOFF_MAX": 1.0,
        **extra,
    }


# --------------------------------------------------------------------------- the tests


def test_duplicates_and_recrawls_leave_one_document_with_history(
    mongo_uri: str, tmp_path: Path
) -> None:
    first = [product(i) for i in range(40)] + [product(i) for i in range(10)]  # 10 twice
    stats, log = crawl(tmp_path, "first", products=first, settings=settings(mongo_uri, tmp_path))
    assert stats["pipeline/written"] == 50
    assert stats["pipeline/inserted"] + stats["pipeline/updated"] == 50
    assert "Deprecat" not in log  # no deprecation warnings in a crawl's log
    again = [product(i, price="12.50") if i < 5 else product(i) for i in range(40)]
    again[7] = product(7, availability="OutOfStock")
    again[8] = product(8, price="10.0")  # the same price, written differently: no change
    stats, _ = crawl(tmp_path, "again", products=again, settings=settings(mongo_uri, tmp_path))
    assert stats["pipeline/written"] == 40

    docs = {doc["_id"]: doc for doc in documents(mongo_uri)}
    assert len(docs) == 40
    changed = docs["https://shop.test/p/0"]
    assert changed["price"] == Decimal128("12.50")
    assert [h["price"].to_decimal() for h in changed["price_history"]] == [
        Decimal("10.00"),
        Decimal("12.50"),
    ]
    assert changed["first_seen"] < changed["last_seen"]
    assert [h["availability"] for h in docs["https://shop.test/p/7"]["price_history"]] == [
        "InStock",
        "OutOfStock",
    ]
    assert len(docs["https://shop.test/p/8"]["price_history"]) == 1
    assert len(docs["https://shop.test/p/30"]["price_history"]) == 1
    assert docs["https://shop.test/p/30"]["name"] == "Product 30"


def test_site_and_sku_key(mongo_uri: str, tmp_path: Path) -> None:
    items = [product(1), product(2, sku="SKU-1"), product(3), product(4, sku="")]
    stats, _ = crawl(
        tmp_path,
        "sku",
        products=items,
        settings=settings(mongo_uri, tmp_path, MONGO_UNIQUE_KEY=["site", "sku"]),
    )
    assert stats["pipeline/dropped/missing_sku"] == 1
    keys = sorted(doc["_id"]["sku"] for doc in documents(mongo_uri))
    assert keys == ["SKU-1", "SKU-3"]


def test_invalid_items_are_dropped_with_a_counted_reason(mongo_uri: str, tmp_path: Path) -> None:
    items = [
        product(1),
        product(2, name=""),
        product(3, name=None),
        product(4, url=None, source_url="https://shop.test/raw/4"),
    ]
    stats, log = crawl(tmp_path, "invalid", products=items, settings=settings(mongo_uri, tmp_path))
    assert stats["pipeline/written"] == 1
    assert stats["pipeline/dropped/missing_name"] == 2
    assert stats["pipeline/dropped/missing_url"] == 1
    assert "product without name on https://shop.test/p/2" in log
    assert "product without url on https://shop.test/raw/4" in log
    assert [doc["_id"] for doc in documents(mongo_uri)] == ["https://shop.test/p/1"]


def _wait_for(condition: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


@pytest.mark.parametrize("journal_after", [60.0, 1.0], ids=["retry-only", "journal-and-replay"])
def test_mongodb_stopped_mid_crawl_every_product_stored_once(
    mongo_server: MongoServer, mongo_uri: str, tmp_path: Path, journal_after: float
) -> None:
    total = 240
    run = Crawl(
        tmp_path,
        "outage",
        {
            "products": [product(i) for i in range(total)],
            "delay": 0.1,  # a steady flow of products through the outage
            "hold_last_until": str(tmp_path / "mongo-is-back"),  # the crawl outlasts it
            "settings": settings(mongo_uri, tmp_path, MONGO_JOURNAL_AFTER=journal_after),
        },
    )
    _wait_for(lambda: len(run.acks()) >= 40, 60, "the first products")
    mongo_server.stop()
    stopped_at = len(run.acks())
    time.sleep(4)
    during = len(run.acks())
    mongo_server.start()
    (tmp_path / "mongo-is-back").touch()
    stats = run.result()

    docs = documents(mongo_uri)
    assert sorted(doc["_id"] for doc in docs) == sorted(
        p["url"] for p in map(product, range(total))
    )
    assert len(run.acks()) == total
    assert stats["pipeline/retries"] >= 1
    assert run.log.count("MongoDB write failed") == 1  # one line per outage...
    assert run.log.count("MongoDB writes succeed again") == 1  # ...and one when it is over
    if journal_after > 10:
        assert during - stopped_at < 20  # backpressure: the crawl waited for MongoDB
        assert "pipeline/journaled" not in stats
    else:
        assert stats["pipeline/journaled"] >= 1  # the crawl went on into the journal
        assert stats["pipeline/replayed"] == stats["pipeline/journaled"]
        assert stats["pipeline/written"] + stats["pipeline/journaled"] == total
        assert not list((tmp_path / "journal").glob("*.jsonl"))


def test_node_killed_during_outage_then_journal_replayed_by_a_fresh_node(
    mongo_server: MongoServer, mongo_uri: str, tmp_path: Path
) -> None:
    mongo_server.stop()
    node = Crawl(
        tmp_path,
        "doomed",
        {
            "products": [product(i) for i in range(200)],
            "delay": 0.02,
            "settings": settings(
                mongo_uri, tmp_path, MONGO_JOURNAL_AFTER=1.0, MONGO_BUFFER_MAX_ITEMS=20
            ),
        },
    )
    _wait_for(lambda: len(node.acks()) >= 60, 60, "journaled products")
    node.kill()  # kill -9 while MongoDB is down: only the journal knows these products
    acked = set(node.acks())
    assert list((tmp_path / "journal").glob("*.jsonl"))
    mongo_server.start()

    stats, log = crawl(tmp_path, "fresh", products=[], settings=settings(mongo_uri, tmp_path))
    stored = {doc["_id"] for doc in documents(mongo_uri)}
    assert acked <= stored
    assert stats["pipeline/replayed"] >= len(acked)
    assert "Replayed" in log
    assert not list((tmp_path / "journal").glob("*.jsonl"))


def test_a_node_closing_while_mongodb_is_down_waits_and_replays_its_journal(
    mongo_server: MongoServer, mongo_uri: str, tmp_path: Path
) -> None:
    mongo_server.stop()
    total = 60
    run = Crawl(
        tmp_path,
        "closing",
        {
            "products": [product(i) for i in range(total)],
            "settings": settings(
                mongo_uri, tmp_path, MONGO_JOURNAL_AFTER=0.5, MONGO_CLOSE_TIMEOUT=0.5
            ),
        },
    )
    # every product is journaled and the crawl is closing: it waits for MongoDB, saying so
    _wait_for(lambda: len(run.acks()) == total, 60, "the products journaled")
    _wait_for(lambda: "Waiting for MongoDB to replay" in run.log, 60, "the close to wait")
    assert run.proc.poll() is None
    mongo_server.start()
    stats = run.result()
    assert sorted(doc["_id"] for doc in documents(mongo_uri)) == sorted(
        p["url"] for p in map(product, range(total))
    )
    assert stats["pipeline/journaled"] == stats["pipeline/replayed"] == total
    assert stats["pipeline/journal_held"] == 0
    assert "before closing" in run.log
    assert not list((tmp_path / "journal").glob("*.jsonl"))


def test_a_node_that_cannot_replay_in_time_exits_non_zero_and_says_where_its_products_are(
    mongo_server: MongoServer, mongo_uri: str, tmp_path: Path
) -> None:
    mongo_server.stop()
    total = 30
    run = Crawl(
        tmp_path,
        "stranded",
        {
            "products": [product(i) for i in range(total)],
            "settings": settings(
                mongo_uri,
                tmp_path,
                MONGO_JOURNAL_AFTER=0.5,
                MONGO_CLOSE_TIMEOUT=0.5,
                MONGO_JOURNAL_CLOSE_TIMEOUT=1.0,
            ),
        },
    )
    stats = run.result(code=3)
    journal = tmp_path / "journal"
    assert stats["pipeline/journal_held"] == total
    assert f"{total} products are NOT in MongoDB: they wait in the journal {journal}" in run.log
    assert f"distcrawl journal replay {journal}" in run.log
    assert len(list(journal.glob("*.jsonl"))) == 1

    # an operator finishes the dead node's journal from another folder
    mongo_server.start()
    moved = tmp_path / "moved"
    journal.rename(moved)
    proc = subprocess.run(
        [sys.executable, "-m", "distcrawl.cli", "journal", "replay", str(moved),
         "--mongo-uri", mongo_uri],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert f"replayed {total} products" in proc.stdout
    assert len(documents(mongo_uri)) == total
    assert not list(moved.glob("*.jsonl"))


def test_a_process_stopped_while_it_waits_to_replay_its_journal_exits_3(
    mongo_server: MongoServer, mongo_uri: str, tmp_path: Path
) -> None:
    """SIGTERM while a closing crawl waits for MongoDB to replay its journal: the products it
    holds are known to the exit path (status 3), even though Scrapy stops the reactor under
    that wait (a node's own close is waited for: tests/e2e/test_faults.py)."""
    mongo_server.stop()
    total = 25
    run = Crawl(
        tmp_path,
        "stopped",
        {
            "products": [product(i) for i in range(total)],
            "settings": settings(
                mongo_uri, tmp_path, MONGO_JOURNAL_AFTER=0.5, MONGO_CLOSE_TIMEOUT=0.5
            ),
        },
    )
    try:
        _wait_for(lambda: "Waiting for MongoDB to replay" in run.log, 60, "the close to wait")
        run.proc.send_signal(signal.SIGTERM)
        run.proc.wait(timeout=120)
    finally:
        if run.proc.poll() is None:
            run.kill()
        mongo_server.start()
    assert run.proc.returncode == 3, run.log[-4000:]
    assert len(list((tmp_path / "journal").glob("*.jsonl"))) == 1


# --------------------------------------------------------------------------- the writer


@pytest.fixture
def writer(mongo_uri: str) -> Any:
    w = mongo_writer(mongo_uri, history=3, timeout=2.0)
    yield w
    w.close()


def test_history_is_bounded_and_values_stay_data(writer: MongoWriter) -> None:
    for n, price in enumerate(["1", "2", "2.00", "3", "4", "5"]):
        item = product(1, price=Decimal(price), name="$5 off {$gt: 1}")
        seen = NOW + dt.timedelta(days=n)
        outcome = writer.write([make_record(item, ("url",), history=3, now=seen)])
        assert not outcome.rejected and not outcome.retry
    doc = writer.collection.find_one({"_id": "https://shop.test/p/1"})
    assert doc is not None
    assert doc["name"] == "$5 off {$gt: 1}"
    assert [h["price"].to_decimal() for h in doc["price_history"]] == [3, 4, 5]
    assert doc["first_seen"] == NOW.replace(tzinfo=None)
    assert doc["last_seen"] == (NOW + dt.timedelta(days=5)).replace(tzinfo=None)


def test_an_older_observation_never_overwrites_a_newer_one(writer: MongoWriter) -> None:
    def write(day: int, price: str, **extra: Any) -> None:
        item = product(1, price=Decimal(price), **extra)
        seen = NOW + dt.timedelta(days=day)
        outcome = writer.write([make_record(item, ("url",), history=3, now=seen)])
        assert not outcome.rejected and not outcome.retry

    def stored() -> dict[str, Any]:
        doc = writer.collection.find_one({"_id": "https://shop.test/p/1"})
        assert doc is not None
        return doc

    def history() -> list[tuple[int, Decimal]]:
        return [
            ((h["seen_at"] - NOW.replace(tzinfo=None)).days, h["price"].to_decimal())
            for h in stored()["price_history"]
        ]

    write(0, "10")
    write(4, "12", name="New name")
    write(2, "11", name="Old name")  # a journal replayed late
    doc = stored()
    assert (doc["price"], doc["name"]) == (Decimal128("12"), "New name")
    assert doc["last_seen"] == (NOW + dt.timedelta(days=4)).replace(tzinfo=None)
    assert history() == [(0, 10), (2, 11), (4, 12)]
    write(2, "11", name="Old name")  # replayed twice: nothing changes
    assert history() == [(0, 10), (2, 11), (4, 12)]
    write(3, "11")  # the same state as the entry before it: no entry
    assert history() == [(0, 10), (2, 11), (4, 12)]
    write(-1, "10")  # the first state began earlier than thought
    assert history() == [(-1, 10), (2, 11), (4, 12)]
    assert stored()["first_seen"] == (NOW - dt.timedelta(days=1)).replace(tzinfo=None)
    write(1, "9")  # the oldest entries go first, newest kept
    assert history() == [(1, 9), (2, 11), (4, 12)]
    write(5, "13")
    assert history() == [(2, 11), (4, 12), (5, 13)]
    assert stored()["price"] == Decimal128("13")


def test_writer_keys_on_site_and_sku_and_survives_an_insert_race(writer: MongoWriter) -> None:
    records = [
        make_record(product(1), ("site", "sku"), history=3, now=NOW),
        make_record(product(2), ("site", "sku"), history=3, now=NOW),
    ]
    # Another node inserted product 1 a moment ago: our insert meets a duplicate _id.
    writer.collection.insert_one({"_id": {"site": "shop.test", "sku": "SKU-1"}, "name": "old"})
    outcome = writer.write(records)
    assert (outcome.inserted, outcome.updated, outcome.retry, outcome.rejected) == (1, 1, [], {})
    names = {doc["_id"]["sku"]: doc["name"] for doc in writer.collection.find()}
    assert names == {"SKU-1": "Product 1", "SKU-2": "Product 2"}
    writer.new_share = 0.0  # a re-crawl: keys are looked up first
    assert writer.write(records).updated == 2


def test_make_record_refuses_what_cannot_be_stored() -> None:
    with pytest.raises(InvalidItem) as caught:
        make_record(product(1, extra=object()), ("url",), history=3, now=NOW)
    assert caught.value.reason == "unencodable"
    with pytest.raises(InvalidItem) as caught:
        make_record(product(1, description="x" * (17 * 1024 * 1024)), ("url",), history=3, now=NOW)
    assert caught.value.reason == "too_large"
    record = make_record(
        product(1, price=Decimal("9.90"), category_path=("a", "b"), first_seen="forged"),
        ("url",),
        history=3,
        now=NOW,
    )
    assert record.fields["price"] == Decimal128("9.90")
    assert record.fields["category_path"] == ["a", "b"]
    assert "first_seen" not in record.fields  # the pipeline owns it
    assert record.seen_at == NOW


def test_journal_segments_are_replayed_only_when_no_live_node_holds_them(tmp_path: Path) -> None:
    records = [make_record(product(i), ("url",), history=3, now=NOW) for i in range(3)]
    writing = Journal(tmp_path, database="db", collection="products")
    other = Journal(tmp_path, database="db", collection="products")
    elsewhere = Journal(tmp_path, database="db", collection="other")
    assert writing.append(records) == 3
    assert other.claim() is None  # its writer is alive and holds it
    writing.rotate()
    assert elsewhere.claim() is None  # not its collection
    segment = other.claim()
    assert segment is not None
    assert [r.key for r in segment.read(10)] == [r.key for r in records]
    assert segment.read(10) == []
    segment.finish()
    assert writing.segments() == []


def test_journal_skips_a_line_cut_by_a_crash(tmp_path: Path) -> None:
    journal = Journal(tmp_path, database="db", collection="products")
    journal.append([make_record(product(1), ("url",), history=3, now=NOW)])
    journal.close()
    (path,) = journal.segments()
    with open(path, "a") as handle:
        handle.write('{"key": "https://shop.test/p/2", "fie')  # no newline: never acknowledged
    segment = journal.claim()
    assert segment is not None
    assert len(segment.read(10)) == 1
    assert segment.damaged == 1
    segment.release()


@pytest.mark.parametrize(
    ("value", "document"),
    [
        (None, {"w": "majority", "j": True}),
        ("majority", {"w": "majority", "j": True}),
        ("2", {"w": 2, "j": True}),
        ('{"w": 1}', {"w": 1}),
        ({"w": "majority", "wtimeout": 5000}, {"w": "majority", "wtimeout": 5000}),
    ],
)
def test_write_concern_setting(value: Any, document: dict[str, Any], tmp_path: Path) -> None:
    crawler = get_crawler(
        settings_dict={"MONGO_URI": "mongodb://127.0.0.1:1/x", "MONGO_WRITE_CONCERN": value}
    )
    pipeline = MongoPipeline.from_crawler(crawler)
    assert pipeline.write_concern.document == document
    assert pipeline.database == "x"


def test_settings_that_could_lose_products_are_refused() -> None:
    with pytest.raises(ValueError, match="MONGO_URI"):
        MongoPipeline.from_crawler(get_crawler(settings_dict={"MONGO_URI": ""}))
    with pytest.raises(ValueError, match="w=0"):
        MongoPipeline.from_crawler(
            get_crawler(settings_dict={"MONGO_URI": "mongodb://h/x", "MONGO_WRITE_CONCERN": 0})
        )


# --------------------------------------------------------------------------- the subprocess


def _crawl_main(spec_path: str) -> None:
    """Run one crawl as ``scrapy crawl`` would (asyncio reactor) and write its stats."""
    import asyncio

    from scrapy.utils.reactor import install_reactor

    install_reactor("twisted.internet.asyncioreactor.AsyncioSelectorReactor")
    from scrapy import Request, Spider, signals
    from scrapy.crawler import CrawlerProcess

    from distcrawl.node.items import Product

    spec = json.loads(Path(spec_path).read_text())
    ack_file = open(spec["ack_path"], "a")  # noqa: SIM115

    class ProductSpider(Spider):
        name = "products"

        async def start(self) -> Any:
            for index in range(len(spec["products"])):
                yield Request(f"data:,{index}", cb_kwargs={"index": index}, dont_filter=True)

        async def parse(self, response: Any, index: int) -> Any:
            if spec.get("delay"):
                await asyncio.sleep(spec["delay"])
            if spec.get("hold_last_until") and index == len(spec["products"]) - 1:
                while not Path(spec["hold_last_until"]).exists():
                    await asyncio.sleep(0.1)
            fields = dict(spec["products"][index])
            if fields.get("price") is not None:
                fields["price"] = Decimal(fields["price"])
            yield Product(crawled_at=dt.datetime.now(dt.UTC), **fields)

    def acknowledged(item: Any) -> None:
        ack_file.write(f"{item.get('url')}\n")
        ack_file.flush()
        os.fsync(ack_file.fileno())

    process = CrawlerProcess(
        {
            "ITEM_PIPELINES": {"distcrawl.node.pipeline.MongoPipeline": 300},
            "TELNETCONSOLE_ENABLED": False,
            "EXTENSIONS": {"scrapy.extensions.remote_control.RemoteControl": None},
            "ROBOTSTXT_OBEY": False,
            "CONCURRENT_REQUESTS": 2,
            "CONCURRENT_ITEMS": 16,
            # Responses whose items wait in the pipeline stay in the scraper; past this size
            # the engine stops downloading (plain Scrapy's backpressure; distcrawl's frontier
            # is stricter: a node leases no more requests than it has free slots).
            "SCRAPER_SLOT_MAX_ACTIVE_SIZE": 4096,
            "LOG_LEVEL": "INFO",
            **spec["settings"],
        },
    )
    crawler = process.create_crawler(ProductSpider)
    crawler.signals.connect(acknowledged, signal=signals.item_scraped)
    process.crawl(crawler)
    process.start()
    assert crawler.stats is not None
    stats = {k: v for k, v in crawler.stats.get_stats().items() if isinstance(v, (int, float, str))}
    Path(spec["stats_path"]).write_text(json.dumps(stats))
    from distcrawl.commands.crawl import EXIT_JOURNAL_HELD
    from distcrawl.storage.store import stranded_journals

    if stranded_journals():  # as `scrapy crawl` does
        sys.exit(EXIT_JOURNAL_HELD)


if __name__ == "__main__":
    _crawl_main(sys.argv[1])
