"""Benchmark: the same M products written to MongoDB by a per-item pipeline (the Scrapy docs'
``insert_one`` pattern) and by distcrawl's bulk ``MongoPipeline``, in one run.

    .venv/bin/python bench/pipeline.py --items 5000 [--json]

Each variant runs a real Scrapy crawl (asyncio reactor, Scrapy's engine, scraper and item
pipeline manager) whose spider yields the M products from ``start()``, so the engine's own
overhead is the same for both and small. Each variant gets a fresh SecantusDB process with an
empty storage directory, since a long-running SecantusDB slows down as it serves writes. The
clock runs from ``spider_opened`` (the pipeline is open) to the last ``item_scraped`` (Scrapy
sends it when an item's ``process_item`` has completed, which for both pipelines means the
item is in MongoDB). The crawl's end is not the clock's: Scrapy notices that a spider whose
items came from ``start()`` is idle only at its next 5-second heartbeat. Both variants then
count the stored documents.

The baseline is honest: the docs' pipeline with one change, Decimal prices converted to
Decimal128 as distcrawl does (the docs' version cannot store a Decimal at all), so both store
the same documents. It does no upsert and keeps no unique key: re-crawls would duplicate.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import platform
import sys
import tempfile
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import pymongo
from _results import write_result
from itemadapter import ItemAdapter

from distcrawl.node.items import Product
from distcrawl.servers.process import MongoServer
from distcrawl.storage.documents import to_bson

#: Scrapy settings of both variants (nothing else differs but the pipeline)
COMMON_SETTINGS: dict[str, Any] = {
    "LOG_LEVEL": "WARNING",
    "TELNETCONSOLE_ENABLED": False,
    "EXTENSIONS": {"scrapy.extensions.remote_control.RemoteControl": None},
    "ROBOTSTXT_OBEY": False,
    "CONCURRENT_ITEMS": 16,
}
DATABASE = "bench"
COLLECTION = "products"


class PerItemMongoPipeline:
    """The Scrapy documentation's MongoDB pipeline: one ``insert_one`` per item, on the
    reactor thread (only the Decimal conversion added, and no ``spider`` argument, which
    Scrapy 2.19 deprecates)."""

    def __init__(self, mongo_uri: str, mongo_db: str) -> None:
        self.mongo_uri = mongo_uri
        self.mongo_db = mongo_db

    @classmethod
    def from_crawler(cls, crawler: Any) -> PerItemMongoPipeline:
        return cls(crawler.settings.get("MONGO_URI"), crawler.settings.get("MONGO_DATABASE"))

    def open_spider(self) -> None:
        self.client: pymongo.MongoClient[dict[str, Any]] = pymongo.MongoClient(self.mongo_uri)
        self.db = self.client[self.mongo_db]

    def close_spider(self) -> None:
        self.client.close()

    def process_item(self, item: Any) -> Any:
        self.db[COLLECTION].insert_one(to_bson(ItemAdapter(item).asdict()))
        return item


def make_products(count: int) -> list[Product]:
    """*count* distinct, realistic products (about 0.8 KB of BSON each)."""
    now = dt.datetime.now(dt.UTC)
    return [
        Product(
            url=f"https://shop.example/p/{i}",
            source_url=f"https://shop.example/p/{i}?ref=listing",
            name=f"Stainless steel kettle, model {i}",
            price=Decimal(f"{10 + i % 90}.{i % 100:02d}"),
            currency="EUR",
            sku=f"SKU-{i:07d}",
            brand="Acme",
            availability="InStock" if i % 7 else "OutOfStock",
            category_path=["Home", "Kitchen", f"Kettles {i % 10}"],
            description=("A kettle that boils water quickly and quietly. " * 8).strip(),
            image_urls=[f"https://shop.example/img/{i}-{n}.jpg" for n in range(3)],
            site="shop.example",
            crawled_at=now,
        )
        for i in range(count)
    ]


async def run_variant(
    pipeline: str, products: list[Product], workdir: Path, *, mode: str, concurrency: int
) -> dict[str, Any]:
    """Write *products* with *pipeline* to a fresh SecantusDB; seconds and documents stored."""
    server = MongoServer(data_dir=workdir / "data", log_path=workdir / "mongo.log").start()
    try:
        settings = {
            **COMMON_SETTINGS,
            "ITEM_PIPELINES": {pipeline: 300},
            "MONGO_URI": server.uri_for(DATABASE),
            "MONGO_DATABASE": DATABASE,
            "MONGO_JOURNAL_PATH": str(workdir / "journal"),
        }
        if mode == "crawl":
            seconds = await _through_a_crawl(settings, products)
        else:
            seconds = await _through_the_item_pipeline(settings, products, concurrency)
        client = server.client()
        try:
            stored = client[DATABASE][COLLECTION].count_documents({})
        finally:
            client.close()
        per_s = round(len(products) / seconds, 1)
        return {"seconds": round(seconds, 3), "per_s": per_s, "stored": stored}
    finally:
        server.stop()


async def _through_the_item_pipeline(
    settings: dict[str, Any], products: list[Product], concurrency: int
) -> float:
    """Scrapy's item pipeline manager, built from a real crawler, given the products with at
    most *concurrency* of them in process at once (as the scraper does for many responses).
    The clock covers the pipeline's open, every item, and its close."""
    from scrapy import Spider
    from scrapy.pipelines import ItemPipelineManager
    from scrapy.utils.test import get_crawler

    crawler = get_crawler(Spider, settings)
    manager = ItemPipelineManager.from_crawler(crawler)
    slots = asyncio.Semaphore(concurrency)

    async def one(product: Product) -> None:
        async with slots:
            await manager.process_item_async(product)

    start = time.perf_counter()
    await manager.open_spider_async()
    await asyncio.gather(*(one(product) for product in products))
    await manager.close_spider_async()
    return time.perf_counter() - start


async def _through_a_crawl(settings: dict[str, Any], products: list[Product]) -> float:
    """A whole crawl whose spider yields the products from ``start()``; the clock runs from
    ``spider_opened`` to the last ``item_scraped`` (Scrapy sends it once an item's
    ``process_item`` has completed). Not to the crawl's end: Scrapy notices that a spider
    whose items came from ``start()`` is idle only at its next 5-second heartbeat."""
    from scrapy import Spider, signals
    from scrapy.crawler import AsyncCrawlerRunner, Crawler

    class BenchSpider(Spider):
        name = "bench"

        async def start(self) -> Any:
            for product in products:
                yield product

    clock: dict[str, float] = {}

    # Named functions, held by this frame: signal receivers are weak references.
    def opened() -> None:
        clock["start"] = time.perf_counter()

    def scraped() -> None:
        clock["end"] = time.perf_counter()

    crawler = Crawler(BenchSpider, settings)
    crawler.signals.connect(opened, signal=signals.spider_opened)
    crawler.signals.connect(scraped, signal=signals.item_scraped)
    await AsyncCrawlerRunner(settings).crawl(crawler)
    return clock["end"] - clock["start"]


async def bench(items: int, *, mode: str, concurrency: int) -> dict[str, Any]:
    products = make_products(items)
    variants = {"per_item": f"{__name__}.PerItemMongoPipeline",
                "bulk": "distcrawl.node.pipeline.MongoPipeline"}  # fmt: skip
    results = {}
    with tempfile.TemporaryDirectory(prefix="distcrawl-bench-") as tmp:
        for name, pipeline in variants.items():
            results[name] = await run_variant(
                pipeline, products, Path(tmp) / name, mode=mode, concurrency=concurrency
            )
    per_item, bulk = results["per_item"], results["bulk"]
    return {
        "items": items,
        "per_item_per_s": per_item["per_s"],
        "bulk_per_s": bulk["per_s"],
        "ratio": round(bulk["per_s"] / per_item["per_s"], 2),
        "per_item_seconds": per_item["seconds"],
        "bulk_seconds": bulk["seconds"],
        "per_item_stored": per_item["stored"],
        "bulk_stored": bulk["stored"],
        "mode": mode,
        "concurrency": concurrency if mode == "pipeline" else None,
        "server": "SecantusDB, a fresh process and storage directory per variant",
        "python": platform.python_version(),
        "pymongo": pymongo.version,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=5000, help="products to write (M)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument(
        "--mode",
        choices=("pipeline", "crawl"),
        default="pipeline",
        help="drive Scrapy's item pipeline manager directly (default), or run a whole crawl "
        "whose spider yields the products (adds the engine's per-item cost to both)",
    )
    parser.add_argument(
        "--concurrency",
        type=int,
        default=1000,
        help="pipeline mode: products in process at once (default 1000)",
    )
    args = parser.parse_args(argv)

    from scrapy.utils.defer import deferred_from_coro
    from scrapy.utils.reactor import install_reactor

    install_reactor("twisted.internet.asyncioreactor.AsyncioSelectorReactor")
    from twisted.internet import reactor

    outcome: dict[str, Any] = {}

    def finish(result: Any) -> None:
        outcome["result"] = result
        reactor.stop()  # type: ignore[attr-defined]

    reactor.callWhenRunning(  # type: ignore[attr-defined]
        lambda: deferred_from_coro(
            bench(args.items, mode=args.mode, concurrency=args.concurrency)
        ).addBoth(finish)
    )
    reactor.run()  # type: ignore[attr-defined]
    result = outcome.get("result")
    if not isinstance(result, dict):
        print(f"benchmark failed: {result}", file=sys.stderr)
        return 1
    write_result(result)
    if args.json:
        print(json.dumps(result))
    else:
        print(f"{result['items']} products, {result['mode']} mode, {result['server']}")
        for label, key in (("per-item insert_one", "per_item"), ("distcrawl bulk", "bulk")):
            print(
                f"  {label + ' pipeline:':30} {result[key + '_per_s']:>9.1f} items/s "
                f"({result[key + '_seconds']} s, {result[key + '_stored']} stored)"
            )
        print(f"  ratio: {result['ratio']}x")
    return 0 if result["per_item_stored"] == result["bulk_stored"] == result["items"] else 1


if __name__ == "__main__":
    sys.exit(main())
