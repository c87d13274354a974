"""A node's local journal from an operator's side: what it holds, and a replay onto MongoDB."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pymongo
from scrapy.settings import Settings

from distcrawl.ops import journal
from distcrawl.storage.documents import make_record
from distcrawl.storage.journal import Journal

NOW = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def _product(i: int) -> dict[str, object]:
    return {
        "url": f"https://shop.test/p/{i}",
        "name": f"Product {i}",
        "price": "10.00",
        "currency": "EUR",
        "availability": "InStock",
        "site": "shop.test",
        "sku": f"SKU-{i}",
    }


def test_held_then_replayed_onto_another_database(tmp_path: Path, mongo_uri: str) -> None:
    written = Journal(tmp_path, database="db", collection="products")
    written.append([make_record(_product(i), ("url",), history=3, now=NOW) for i in range(4)])
    live = [{"journal": "db.products", "segments": 0, "products": 0, "held_by_live_nodes": 1}]
    assert journal.held(tmp_path) == live  # its writer still holds it
    written.close()
    assert journal.targets(tmp_path) == [("db", "products")]
    assert journal.held(tmp_path)[0]["products"] == 4
    database = mongo_uri.rsplit("/", 1)[1].split("?")[0]
    seen: list[str] = []
    outcome = journal.replay(
        tmp_path,
        mongo_uri,
        journal.ReplayOptions(Settings()),
        database=database,
        progress=lambda source, summary, products, segments: seen.append(source),
    )
    assert (outcome["replayed"], outcome["left"], outcome["rejected"]) == (4, 0, 0)
    assert outcome["targets"][0]["onto"] == f"{database}.products" and seen
    client: pymongo.MongoClient[dict[str, object]] = pymongo.MongoClient(mongo_uri)
    try:
        assert client[database]["products"].count_documents({}) == 4
    finally:
        client.close()
    assert journal.held(tmp_path) == []  # every segment done and deleted


def test_a_replay_tells_the_stopped_nodes_of_its_folder_what_it_left(tmp_path: Path, r) -> None:
    import json
    import socket

    from distcrawl.frontier.store import FrontierKeys, FrontierStore
    from distcrawl.ops.snapshot import read_snapshot
    from distcrawl.ops.status import build_status

    keys = FrontierKeys(spider="catalog", start_urls="catalog:start_urls", shards=2)
    store = FrontierStore(r, keys)
    here, path = socket.gethostname(), str(tmp_path.resolve())
    nodes = {"stopped": (here, path), "elsewhere": ("other-host", path), "live": (here, path)}
    for name, (host, folder) in nodes.items():
        info = {"host": host, "journal": folder, "stats": {"pipeline/journal_held": 7}}
        store.heartbeat(name, json.dumps(info))
    store.release("stopped")  # a clean stop
    store.release("elsewhere")
    written = Journal(tmp_path, database="db", collection="products")
    written.append([make_record(_product(i), ("url",), history=3, now=NOW) for i in range(2)])
    written.close()
    told = journal.record_replay(r, keys, tmp_path, heartbeat_timeout=30)
    assert told == ["stopped"]  # a live node says it itself; another host's folder is not this
    held = {n["node"]: n["journal_held"] for n in build_status(read_snapshot(r, keys),
            heartbeat_timeout=30)["nodes"]}  # fmt: skip
    assert held == {"stopped": 2, "elsewhere": 7, "live": 7}  # 2 left in the folder
