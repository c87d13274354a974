"""Keeping a catalog fresh in MongoDB (real SecantusDB): history only on change, the
``changes`` collection written once per change (retries, replays, a node dying between the
two writes), 304 revisits that move ``last_seen`` only, and ``gone_at``.

The end-to-end test crawls the changing demo shop (a real HTTP server driven by a test clock)
in a subprocess, as ``scrapy crawl`` does, through :class:`FreshnessMiddleware` and the
MongoDB pipeline.
"""

from __future__ import annotations

import datetime as dt
import http.client
import json
import os
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
from pymongo.write_concern import WriteConcern
from scrapy import signals

from distcrawl.demo.change_checks import check_changes
from distcrawl.demo.config import ShopConfig
from distcrawl.demo.shop import DemoShop
from distcrawl.storage.documents import (
    InvalidItem,
    Record,
    make_record,
    record_from_json,
    record_to_json,
    revisit_record,
)
from distcrawl.storage.journal import Journal
from distcrawl.storage.replay import replay_journal
from distcrawl.storage.writer import MongoWriter

REPO = Path(__file__).resolve().parents[2]
T0 = dt.datetime(2026, 3, 1, tzinfo=dt.UTC)
URL = "https://shop.test/p/1"


def at(minutes: float) -> dt.datetime:
    return T0 + dt.timedelta(minutes=minutes)


def naive(moment: dt.datetime) -> dt.datetime:
    return moment.replace(tzinfo=None)  # what pymongo reads back


def product(i: int = 1, price: str = "10.00", **extra: Any) -> dict[str, Any]:
    return {
        "url": f"https://shop.test/p/{i}",
        "name": f"Product {i}",
        "price": Decimal(price),
        "currency": "EUR",
        "availability": "InStock",
        "site": "shop.test",
        "sku": f"SKU-{i}",
        **extra,
    }


def observed(minutes: float, key: tuple[str, ...] = ("url",), **fields: Any) -> Record:
    return make_record(product(**fields), key, history=20, now=at(minutes))


@pytest.fixture
def writer(mongo_uri: str) -> Any:
    w = mongo_writer(mongo_uri)
    yield w
    w.close()


def write(writer: MongoWriter, *records: Record) -> Any:
    outcome = writer.write(list(records))
    assert not outcome.rejected and not outcome.retry
    return outcome


def stored(writer: MongoWriter, url: str = URL) -> dict[str, Any]:
    doc = writer.collection.find_one({"url": url})
    assert doc is not None
    return doc


def changes(writer: MongoWriter) -> list[tuple[str, Any, Any, dt.datetime]]:
    assert writer.changes is not None
    return [
        (c["field"], _plain(c["old"]), _plain(c["new"]), c["seen_at"])
        for c in writer.changes.find().sort("seen_at", 1)
    ]


def _plain(value: Any) -> Any:
    return str(value.to_decimal()) if isinstance(value, Decimal128) else value


# -- history and the change log ---------------------------------------------------------


def test_history_and_changes_only_when_price_currency_or_availability_change(
    writer: MongoWriter,
) -> None:
    write(writer, observed(0))
    assert stored(writer)["changed_at"] == stored(writer)["first_seen"] == naive(at(0))
    assert write(writer, observed(1, price="10.0")).changes == 0  # the same price
    assert write(writer, observed(2, name="Renamed")).changes == 0  # not a history field
    assert stored(writer)["name"] == "Renamed"
    assert write(writer, observed(3, price="12.50")).changes == 1
    assert write(writer, observed(4, price="12.50", availability="OutOfStock")).changes == 1
    sold_out = {"availability": "OutOfStock"}
    assert write(writer, observed(5, price="11", currency="USD", **sold_out)).changes == 2
    write(writer, observed(6, price="11.00", currency="USD", **sold_out))

    doc = stored(writer)
    assert [
        (_plain(h["price"]), h["currency"], h["availability"]) for h in doc["price_history"]
    ] == [
        ("10.00", "EUR", "InStock"),
        ("12.50", "EUR", "InStock"),
        ("12.50", "EUR", "OutOfStock"),
        ("11", "USD", "OutOfStock"),
    ]
    assert (doc["first_seen"], doc["changed_at"], doc["last_seen"]) == (
        naive(at(0)),
        naive(at(5)),
        naive(at(6)),
    )
    assert changes(writer) == [
        ("price", "10.00", "12.50", naive(at(3))),
        ("availability", "InStock", "OutOfStock", naive(at(4))),
        ("price", "12.50", "11", naive(at(5))),
        ("currency", "EUR", "USD", naive(at(5))),
    ]
    assert writer.changes is not None
    assert {c["url"] for c in writer.changes.find()} == {URL}
    assert "seen_at" in writer.changes.index_information()  # readers follow it in time order


def test_a_change_is_logged_once_across_retries_replays_and_a_crash_between_writes(
    writer: MongoWriter, tmp_path: Path
) -> None:
    write(writer, observed(0))
    change = observed(1, price="20")
    assert write(writer, change).changes == 1
    assert write(writer, change).changes == 0  # a retried batch that had been applied

    # a node died after the change was logged but before the product was updated: the
    # retry, and even a re-crawl of the page (a later observation), log nothing new
    crashed = observed(2, price="30")
    writer._record_changes([crashed], [0], {crashed.token: stored(writer)}, _outcome())
    assert len(changes(writer)) == 2
    assert write(writer, observed(3, price="30")).changes == 0
    assert stored(writer)["price"] == Decimal128("30")
    assert [c[2] for c in changes(writer)] == ["20", "30"]

    # a journal replayed twice (its segment kept after a failed first replay)
    journal = Journal(tmp_path / "journal", database="db", collection="products")
    journal.append([observed(4, price="40"), observed(5, price="40")])
    journal.close()
    (segment,) = journal.segments()
    kept = segment.read_text()
    assert replay_journal(journal, writer, batch_size=10).replayed == 2
    segment.write_text(kept)
    assert replay_journal(journal, writer, batch_size=10).replayed == 2
    assert [c[2] for c in changes(writer)] == ["20", "30", "40"]
    assert len(stored(writer)["price_history"]) == 4

    # the same price again after a real change back: a new change, not a duplicate
    write(writer, observed(6, price="30"))
    write(writer, observed(7, price="40"))
    assert [c[2] for c in changes(writer)] == ["20", "30", "40", "30", "40"]


def test_changes_found_on_every_write_path_and_none_for_an_older_observation(
    writer: MongoWriter,
) -> None:
    write(writer, observed(0, i=1), observed(0, i=2))
    writer.new_share = 1.0  # a first crawl: insert first, stored products meet a duplicate _id
    assert write(writer, observed(1, i=1, price="11")).changes == 1
    writer.new_share = 0.0  # a re-crawl: the keys are looked up first
    assert write(writer, observed(1, i=2, price="12")).changes == 1
    # product 3 was stored by another node: this one has never written it
    writer.collection.insert_one(
        {
            **product(3),
            "_id": "https://shop.test/p/3",
            "price": Decimal128("10"),
            "last_seen": at(0),
        }
    )
    writer.new_share = 0.0
    assert write(writer, observed(2, i=3, price="13")).changes == 1
    # an observation older than the stored one (a journal replayed late) logs nothing
    assert write(writer, observed(0.5, i=1, price="99")).changes == 0
    assert stored(writer)["price"] == Decimal128("11")
    assert len(changes(writer)) == 3


def test_the_change_log_can_be_turned_off(mongo_uri: str) -> None:
    w = mongo_writer(mongo_uri, write_concern=WriteConcern(w=1), changes=None)
    try:
        w.write([observed(0)])
        assert w.write([observed(1, price="2")]).changes == 0
        assert w.collection.database.list_collection_names() == ["products"]
    finally:
        w.close()


# -- revisits: 304 and gone ---------------------------------------------------------------


def revisit(minutes: float, status: int, key: tuple[str, ...] = ("url",), url: str = URL) -> Record:
    return revisit_record(url, status, key, seen_at=at(minutes))


def test_a_304_moves_last_seen_and_nothing_else(writer: MongoWriter) -> None:
    write(writer, observed(0))
    before = stored(writer)
    outcome = write(writer, revisit(5, 304))
    assert (outcome.not_modified, outcome.unknown, outcome.changes) == (1, 0, 0)
    after = stored(writer)
    assert after["last_seen"] == naive(at(5))
    assert {k: v for k, v in after.items() if k != "last_seen"} == {
        k: v for k, v in before.items() if k != "last_seen"
    }
    write(writer, revisit(3, 304))  # an older 304 (replayed late) never moves it back
    assert stored(writer)["last_seen"] == naive(at(5))

    unknown = write(writer, revisit(6, 304, url="https://shop.test/p/404"))
    assert (unknown.not_modified, unknown.unknown) == (0, 1)
    assert writer.collection.count_documents({}) == 1  # a revisit never inserts
    assert changes(writer) == []


def test_gone_at_is_set_once_and_cleared_when_the_product_comes_back(
    writer: MongoWriter,
) -> None:
    write(writer, observed(0))
    assert write(writer, revisit(2, 410)).gone == 1
    doc = stored(writer)
    assert doc["gone_at"] == naive(at(2))
    assert doc["last_seen"] == naive(at(0))  # gone is not seen
    assert doc["name"] == "Product 1"  # kept, not deleted
    write(writer, revisit(3, 404))
    assert stored(writer)["gone_at"] == naive(at(2))  # the first answer saying so
    write(writer, observed(1.5))  # an older sighting (replayed late) does not bring it back
    assert stored(writer)["gone_at"] == naive(at(2))

    write(writer, observed(4, price="9"))  # it came back
    assert "gone_at" not in stored(writer)
    write(writer, revisit(3.5, 410))  # a gone older than the last sighting changes nothing
    assert "gone_at" not in stored(writer)
    write(writer, revisit(5, 410), revisit(6, 304, url="https://shop.test/p/other"))
    write(writer, revisit(7, 304))  # a 304 is a sighting too
    assert "gone_at" not in stored(writer)
    assert stored(writer)["last_seen"] == naive(at(7))


def test_a_product_in_no_listing_is_gone_whatever_its_page_answered(writer: MongoWriter) -> None:
    write(writer, observed(0))
    unlisted = revisit_record(URL, 200, ("url",), seen_at=at(2), unlisted=True)
    assert write(writer, unlisted).gone == 1
    assert stored(writer)["gone_at"] == naive(at(2))
    assert stored(writer)["last_seen"] == naive(at(0))
    write(writer, observed(3))  # listed again: its next visit stores it as a product
    assert "gone_at" not in stored(writer)


def test_revisit_items_are_not_counted_as_products() -> None:
    from scrapy.utils.test import get_crawler

    from distcrawl.node.items import Product, Revisit
    from distcrawl.node.revisit.freshness import FreshnessMiddleware

    crawler = get_crawler()  # with Scrapy's CoreStats, which counts every item scraped
    assert crawler.stats is not None
    middleware = FreshnessMiddleware.from_crawler(crawler)  # (signals hold it weakly)
    stats = crawler.stats
    for item in (Product(url=URL), Revisit(url=URL, status=304), Revisit(url=URL, status=410)):
        crawler.signals.send_catch_log(signals.item_scraped, item=item, response=None, spider=None)
    assert stats.get_value("item_scraped_count") == 1
    assert stats.get_value("revisit_scraped_count") == 2
    del middleware


def test_revisits_find_the_product_by_url_under_another_unique_key(writer: MongoWriter) -> None:
    key = ("site", "sku")
    write(writer, observed(0, key=key))
    assert write(writer, revisit(1, 304, key=key)).not_modified == 1
    assert write(writer, revisit(2, 410, key=key)).gone == 1
    doc = stored(writer)
    assert doc["_id"] == {"site": "shop.test", "sku": "SKU-1"}
    assert (doc["last_seen"], doc["gone_at"]) == (naive(at(1)), naive(at(2)))
    assert "url" in writer.collection.index_information()


def test_revisit_records_survive_the_journal_and_refuse_what_they_cannot_be() -> None:
    for status, kind in ((304, "not_modified"), (404, "gone"), (410, "gone")):
        record = revisit(1, status)
        again = record_from_json(record_to_json(record))
        assert (again.kind, again.key, again.fields, again.token) == (kind, URL, {"url": URL}, URL)
        assert again.seen_at == at(1)
    assert record_from_json(record_to_json(observed(0))).kind == "product"
    with pytest.raises(ValueError, match="journal record"):
        record_from_json('{"key": "u", "fields": {"url": "u"}, "seen_at": 1, "kind": "bogus"}')
    with pytest.raises(InvalidItem) as caught:
        revisit(1, 500)
    assert caught.value.reason == "revisit_status"


def _outcome() -> Any:
    from distcrawl.storage.writer import WriteOutcome

    return WriteOutcome()


# -- end to end: the changing shop, crawled again -------------------------------------------


class SkewedClock:
    """The shop's clock: real time plus a skew the test sets to jump to a change epoch (the
    crawl's timestamps stay real, so the check is told the skew)."""

    def __init__(self, skew: float) -> None:
        self.skew = skew

    def __call__(self) -> float:
        return time.time() + self.skew


def crawl(
    tmp_path: Path, name: str, requests: list[dict[str, Any]], mongo_uri: str
) -> dict[str, Any]:
    """One crawl of *requests* in a subprocess; returns its stats."""
    folder = tmp_path / name
    folder.mkdir()
    spec = {
        "requests": requests,
        "stats_path": str(folder / "stats.json"),
        "settings": {
            "MONGO_URI": mongo_uri,
            "MONGO_JOURNAL_PATH": str(tmp_path / "journal"),
            "MONGO_TIMEOUT": 5.0,
        },
    }
    (folder / "spec.json").write_text(json.dumps(spec))
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(
            [str(REPO), str(REPO / "tests"), os.environ.get("PYTHONPATH", "")]
        ),
    }
    proc = subprocess.run(
        [sys.executable, __file__, str(folder / "spec.json")],
        capture_output=True, text=True, timeout=300, env=env, cwd=folder, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-4000:]
    stats: dict[str, Any] = json.loads((folder / "stats.json").read_text())
    return stats


def etag_of(shop: DemoShop, path: str) -> str:
    conn = http.client.HTTPConnection("127.0.0.1", shop.port, timeout=10)
    try:
        conn.request("GET", path)
        answer = conn.getresponse()
        answer.read()
        return str(answer.headers["ETag"])
    finally:
        conn.close()


@pytest.mark.slow
def test_recrawl_of_a_changing_shop_stores_exactly_its_changes(
    mongo_uri: str, tmp_path: Path
) -> None:
    start = time.time()
    clock = SkewedClock(-100.0)  # before the first change epoch
    config = ShopConfig(
        products=40,
        change_interval=10.0,
        change_rate=0.25,
        change_remove=3,
        change_cycles=1,  # one epoch of changes, then the shop stays as it is
        change_start=start,
        tracking_params=False,
    )
    with DemoShop(config, clock=clock) as shop:
        base = shop.url.rstrip("/")
        paths = [p.path for p in shop.catalog.products()]
        etags = {path: etag_of(shop, path) for path in paths}
        plain = [{"url": base + path} for path in paths]
        first = crawl(tmp_path, "first", plain, mongo_uri)
        assert first["pipeline/written"] == 40
        client: pymongo.MongoClient[dict[str, Any]] = pymongo.MongoClient(mongo_uri)
        database = client.get_default_database()
        docs = {doc["_id"]: doc for doc in database.products.find()}
        assert all(len(doc["price_history"]) == 1 for doc in docs.values())
        assert database.changes.count_documents({}) == 0

        clock.skew = start + 10.5 - time.time()  # epoch 1: a quarter change, 3 are removed
        truth = shop.changes()
        changed = {base + c["path"] for c in truth["changes"]}
        removed = {r["url"] for r in truth["removed"]}
        assert (len(changed), len(removed)) == (10, 3)
        conditional = [
            {"url": base + path, "headers": {"If-None-Match": etags[path]}} for path in paths
        ]
        second = crawl(tmp_path, "second", conditional, mongo_uri)
        unchanged = 40 - len(changed) - len(removed)
        assert second["freshness/not_modified"] == second["pipeline/not_modified"] == unchanged
        assert second["freshness/gone"] == second["pipeline/gone"] == 3
        assert second["pipeline/changes"] == len(truth["changes"])
        assert "httperror/response_ignored_count" not in second  # 304 and 410 were handled

        now = {doc["_id"]: doc for doc in database.products.find()}
        for url, doc in now.items():
            old = docs[url]
            if url in changed:
                assert len(doc["price_history"]) == 2
                assert doc["changed_at"] == doc["last_seen"] > old["last_seen"]
                state = truth["products"][url.removeprefix(base)]["timeline"][-1]
                assert str(doc["price"].to_decimal()) == state["price"]
                assert doc["availability"] == state["availability"]
            elif url in removed:
                assert doc["gone_at"] > old["last_seen"]
                assert {k: v for k, v in doc.items() if k != "gone_at"} == old
            else:  # a 304: seen, nothing else
                assert doc["last_seen"] > old["last_seen"]
                assert {k: v for k, v in doc.items() if k != "last_seen"} == {
                    k: v for k, v in old.items() if k != "last_seen"
                }
        logged = {
            (c["url"], c["field"], _plain(c["old"]), _plain(c["new"]))
            for c in database.changes.find()
        }
        assert logged == {
            (base + c["path"], c["field"], c["old"], c["new"]) for c in truth["changes"]
        }
        checked = check_changes(
            truth, database.changes.find(), database.products.find(), clock_offset=clock.skew
        )
        assert checked["changes_made"] == checked["changes_detected"] == len(truth["changes"])
        assert (checked["changes_missed"], checked["false_changes"]) == (0, 0)
        assert (checked["history_false"], checked["gone_false"]) == (0, 0)
        assert checked["gone_made"] == checked["gone_detected"] == 3
        assert checked["freshness_lag_s"]["p50"] > 0

        # the same pages fetched in full again: nothing changed, so nothing is logged
        third = crawl(tmp_path, "third", plain, mongo_uri)
        assert "pipeline/changes" not in third
        assert third["freshness/gone"] == 3
        assert database.changes.count_documents({}) == len(truth["changes"])
        again = {doc["_id"]: doc for doc in database.products.find()}
        assert {u: len(d["price_history"]) for u, d in again.items()} == {
            u: len(d["price_history"]) for u, d in now.items()
        }
        assert all(again[u]["gone_at"] == now[u]["gone_at"] for u in removed)
        client.close()


# -- the subprocess -----------------------------------------------------------------------


def _crawl_main(spec_path: str) -> None:
    """Fetch the spec's requests with the catalog spider's parsing, as ``scrapy crawl``
    would (asyncio reactor), through FreshnessMiddleware and the MongoDB pipeline."""
    from scrapy.utils.reactor import install_reactor

    install_reactor("twisted.internet.asyncioreactor.AsyncioSelectorReactor")
    from scrapy import Item, Request
    from scrapy.crawler import CrawlerProcess

    from distcrawl.node.spiders.catalog import CatalogSpider

    spec = json.loads(Path(spec_path).read_text())

    class PagesSpider(CatalogSpider):
        name = "pages"

        async def start(self) -> Any:
            for entry in spec["requests"]:
                yield Request(
                    entry["url"],
                    headers=entry.get("headers") or {},
                    meta={"page_kind": "product", "site": "127.0.0.1"},
                    callback=self.parse,
                    dont_filter=True,
                )

        def parse(self, response: Any, **kwargs: Any) -> Any:
            # the products only: the links they show are not followed here
            for result in super().parse(response, **kwargs):
                if isinstance(result, Item):
                    yield result

    process = CrawlerProcess(
        {
            "ITEM_PIPELINES": {"distcrawl.node.pipeline.MongoPipeline": 300},
            "SPIDER_MIDDLEWARES": {"distcrawl.node.revisit.freshness.FreshnessMiddleware": 45},
            "TELNETCONSOLE_ENABLED": False,
            "EXTENSIONS": {"scrapy.extensions.remote_control.RemoteControl": None},
            "ROBOTSTXT_OBEY": False,
            "RETRY_ENABLED": False,
            "CONCURRENT_REQUESTS": 4,
            "LOG_LEVEL": "INFO",
            **spec["settings"],
        }
    )
    crawler = process.create_crawler(PagesSpider)
    process.crawl(crawler)
    process.start()
    assert crawler.stats is not None
    stats = {k: v for k, v in crawler.stats.get_stats().items() if isinstance(v, (int, float, str))}
    Path(spec["stats_path"]).write_text(json.dumps(stats))


if __name__ == "__main__":
    _crawl_main(sys.argv[1])


def test_check_changes_tells_detected_missed_false_and_gone_apart() -> None:
    def moment(seconds: float) -> dt.datetime:
        return dt.datetime.fromtimestamp(seconds, dt.UTC)

    def made(n: int, field: str, old: str, new: str, at: float) -> dict[str, Any]:
        return {"url": f"http://s/p/{n}", "path": f"/p/{n}", "field": field, "old": old,
                "new": new, "at": at}  # fmt: skip

    def state(at: float, price: str, availability: str = "InStock") -> dict[str, Any]:
        return {"at": at, "price": price, "currency": "EUR", "availability": availability}

    def logged(n: int, price: str, seen: float) -> dict[str, Any]:
        return {"url": f"http://other:1/p/{n}", "field": "price", "new": Decimal128(price),
                "seen_at": moment(seen)}  # fmt: skip

    def entry(price: str, seen: float) -> dict[str, Any]:
        return {**state(0, price), "price": Decimal128(price), "seen_at": moment(seen)}

    truth = {
        "changes": [
            made(1, "price", "1.00", "2.00", 100.0),
            made(1, "price", "2.00", "1.00", 200.0),
            made(2, "availability", "InStock", "OutOfStock", 100.0),
        ],
        "removed": [{"url": "http://s/p/3", "path": "/p/3", "at": 100.0}],
        "products": {
            "/p/1": {"timeline": [state(0, "1.00"), state(100, "2.00"), state(200, "1.00")]},
            "/p/2": {"timeline": [state(0, "5.00"), state(100, "5.00", "OutOfStock")]},
            "/p/3": {"timeline": [state(0, "7.00")]},
            "/p/4": {"timeline": [state(0, "8.00")]},
        },
    }
    changes = [logged(1, "2", 104), logged(1, "1.0", 210), logged(4, "9", 150)]
    products = [
        {"url": "http://other:1/p/1", "price_history": [entry("1.00", 50), entry("3.00", 150)]},
        {"url": "http://other:1/p/3", "gone_at": moment(130)},
        {"url": "http://other:1/p/4", "gone_at": moment(130)},
    ]
    checked = check_changes(truth, changes, products)
    assert checked["changes_made"] == 3
    assert checked["changes_detected"] == 2
    assert checked["changes_missed"] == 1  # p/2's availability was never recorded
    assert checked["missed_sample"][0]["url"] == "http://s/p/2"
    assert checked["false_changes"] == 1  # p/4's price never changed
    assert checked["history_false"] == 1  # p/1 never cost 3.00
    assert checked["freshness_lag_s"] == {"p50": 4.0, "p95": 10.0, "max": 10.0}
    assert (checked["gone_made"], checked["gone_detected"], checked["gone_false"]) == (1, 1, 1)
    # a store whose clock runs 100 s behind the shop's: told so, the same answer
    late = [{**c, "seen_at": moment(c["seen_at"].timestamp() - 100)} for c in changes]
    assert check_changes(truth, late, [], clock_offset=100)["changes_detected"] == 2
