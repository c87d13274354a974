"""End to end: real `scrapy crawl catalog` processes, a real Redis, SecantusDB and demo shop."""

from __future__ import annotations

import json
import re
import subprocess
from collections import Counter
from pathlib import Path
from urllib.parse import urlsplit

import pymongo
import pytest
import redis
from crawl_nodes import (
    Node,
    assert_clean_log,
    assert_each_product_once,
    product_fetches,
    stats_of,
    stop_all,
    stored_urls,
)
from frontier_state import KEYS, leases_left, queued

from distcrawl.frontier.store import FrontierStore

pytestmark = pytest.mark.slow

PROFILES = Path(__file__).resolve().parents[2] / "distcrawl" / "demo" / "profiles"


def lpush(redis_cli: Path, redis_url: str, *values: str) -> None:
    """Seed exactly as an operator would: the real redis-cli binary."""
    subprocess.run(
        [str(redis_cli), "-u", redis_url, "lpush", "catalog:start_urls", *values],
        check=True,
        capture_output=True,
    )


def test_a_second_crawl_of_a_shop_says_once_that_every_link_was_seen_before(
    redis_url, mongo_uri, redis_cli, shop_factory, tmp_path
) -> None:
    shop = shop_factory(products=30)
    lpush(redis_cli, redis_url, shop.url)
    first = Node(redis_url=redis_url, mongo_uri=mongo_uri, log_dir=tmp_path, node_id="first")
    try:
        assert first.wait() == 0
    finally:
        stop_all([first])
    pages = sum(1 for e in shop.request_log() if e["path"] != "/robots.txt")
    seen = FrontierStore(redis.Redis.from_url(redis_url), KEYS).seen()
    assert seen >= pages > 30
    # the same shop again: its seed is fetched, every link on it was seen before
    lpush(redis_cli, redis_url, shop.url)
    again = Node(redis_url=redis_url, mongo_uri=mongo_uri, log_dir=tmp_path, node_id="again")
    try:
        assert again.wait() == 0
    finally:
        stop_all([again])
    said = [line for line in again.log().splitlines() if "drained with nothing new" in line]
    assert len(said) == 1, again.log()[-3000:]
    filtered = stats_of(again.log())["frontier/filtered"]
    assert filtered > 0
    assert f"({filtered} filtered on node again;" in said[0]
    assert f"holds {seen} URLs" in said[0]
    assert "distcrawl control catalog reset --yes-really" in said[0]
    assert "revisit mode" in said[0]
    assert "nothing new" not in first.log()  # a first crawl found everything new


def test_two_nodes_store_every_product_exactly_once(
    redis_url, mongo_uri, redis_cli, shop_factory, tmp_path
) -> None:
    shop = shop_factory(products=300)
    lpush(redis_cli, redis_url, shop.url)
    nodes = [
        Node(redis_url=redis_url, mongo_uri=mongo_uri, log_dir=tmp_path, node_id=f"n{i}")
        for i in (1, 2)
    ]
    try:
        assert [n.wait() for n in nodes] == [0, 0]
    finally:
        stop_all(nodes)
    urls = stored_urls(mongo_uri)
    assert set(urls) == shop.expected_product_urls()
    assert_each_product_once(mongo_uri, shop)
    fetched = Counter(e["path"] for e in shop.request_log() if e["path"] != "/robots.txt")
    assert max(fetched.values()) == 1, "a page was fetched twice"
    # a product reached through two URLs (tracked listing links) is one product
    assert max(product_fetches(shop).values()) == 1, "a product was fetched twice"
    for node in nodes:
        assert_clean_log(node.log())
        assert "Spider closed (finished)" in node.log()
    r = redis.Redis.from_url(redis_url)
    assert queued(r) == 0
    assert not leases_left(r)


def test_a_node_that_may_hold_its_writes_an_hour_flushes_them_when_its_work_runs_low(
    redis_url, mongo_uri, redis_cli, shop_factory, tmp_path
) -> None:
    """DISTCRAWL_FLUSH_DELAY bounds how long a node keeps its acks and links while it has work
    prefetched; running low on work, or closing, flushes them whatever the delay. The node
    also takes its own links back as the spider made them, without decoding them again."""
    shop = shop_factory(products=200)
    lpush(redis_cli, redis_url, shop.url)
    node = Node(
        redis_url=redis_url,
        mongo_uri=mongo_uri,
        log_dir=tmp_path,
        node_id="holder",
        settings={"DISTCRAWL_FLUSH_DELAY": "3600"},
    )
    try:
        assert node.wait() == 0
    finally:
        stop_all([node])
    assert_each_product_once(mongo_uri, shop)
    log = node.log()
    assert_clean_log(log)
    stats = stats_of(log)
    assert stats["frontier/acked"] == stats["frontier/leased"] > 200
    r = redis.Redis.from_url(redis_url)
    assert queued(r) == 0
    assert not leases_left(r)


def test_plain_variant_with_a_site_profile(
    redis_url, mongo_uri, redis_cli, shop_factory, tmp_path
) -> None:
    shop = shop_factory(products=120, variant="plain")
    lpush(redis_cli, redis_url, shop.url)
    node = Node(
        redis_url=redis_url,
        mongo_uri=mongo_uri,
        log_dir=tmp_path,
        node_id="plain",
        env={"DISTCRAWL_SITE_PROFILES": str(PROFILES)},
    )
    try:
        assert node.wait() == 0
    finally:
        node.kill()
    assert sorted(stored_urls(mongo_uri)) == sorted(shop.expected_product_urls())
    assert_clean_log(node.log())


def test_json_seeds_carry_priority_and_meta_and_bad_seeds_are_skipped(
    redis_url, mongo_uri, redis_cli, shop_factory, tmp_path
) -> None:
    shop = shop_factory(products=40)
    seed = json.dumps({"url": shop.url, "priority": 5000, "meta": {"seed_campaign": "xmas"}})
    lpush(redis_cli, redis_url, "not a url", "ftp://x.test/", '{"url": 1}', seed)
    node = Node(redis_url=redis_url, mongo_uri=mongo_uri, log_dir=tmp_path, node_id="seeds")
    try:
        assert node.wait() == 0
    finally:
        node.kill()
    log = node.log()
    assert f"Seed accepted: {shop.url} (priority 5000)" in log
    assert log.count("Refused seed") == 3
    assert set(stored_urls(mongo_uri)) == shop.expected_product_urls()
    rejected = [json.loads(x) for x in redis.Redis.from_url(redis_url).lrange(KEYS.rejected, 0, -1)]
    assert sorted(r["reason"] for r in rejected) == ["bad_characters", "bad_scheme", "missing_url"]


def test_category_pages_leave_the_queue_before_product_pages(
    redis_url, mongo_uri, redis_cli, shop_factory, tmp_path
) -> None:
    shop = shop_factory(products=60, tracking_params=False)
    lpush(redis_cli, redis_url, shop.url)
    node = Node(
        redis_url=redis_url,
        mongo_uri=mongo_uri,
        log_dir=tmp_path,
        node_id="order",
        settings={"CONCURRENT_REQUESTS": 1, "DISTCRAWL_PREFETCH": 1},
    )
    try:
        assert node.wait() == 0
    finally:
        node.kill()
    paths = [e["path"] for e in shop.request_log() if e["path"] != "/robots.txt"]
    kinds = [
        "product" if p.startswith("/p/") else "category" if p.count("/") == 3 else "other"
        for p in paths
    ]
    first_product = kinds.index("product")
    assert "category" not in kinds[first_product:], paths


def test_plain_variant_without_a_profile_is_crawled_completely(
    redis_url, mongo_uri, redis_cli, shop_factory, tmp_path
) -> None:
    """A shop the spider has never seen, with no structured data and no profile: heuristics."""
    shop = shop_factory(products=80, variant="plain")
    lpush(redis_cli, redis_url, shop.url)
    node = Node(redis_url=redis_url, mongo_uri=mongo_uri, log_dir=tmp_path, node_id="noprof")
    try:
        assert node.wait() == 0
    finally:
        node.kill()
    assert sorted(stored_urls(mongo_uri)) == sorted(shop.expected_product_urls())
    client = pymongo.MongoClient(mongo_uri)
    try:
        docs = list(client.get_default_database()["products"].find())
    finally:
        client.close()
    assert all(d["name"] and d.get("price") is not None and d.get("currency") for d in docs)
    assert all(len(d["category_path"]) == 2 for d in docs)


def test_a_product_reached_through_many_urls_is_stored_once(
    redis_url, mongo_uri, redis_cli, shop_factory, tmp_path
) -> None:
    shop = shop_factory(products=24)
    port = urlsplit(shop.url).port
    path = shop.catalog.products()[3].path
    base = f"http://localhost:{port}"
    aliases = [
        f"{base}{path}",
        f"{base}{path}?utm_source=newsletter&utm_medium=email",  # tracking parameters
        f"{base}{path}?ref=card2&gclid=abc",
        f"{base}{path}?page=1",  # a first-page alias
        f"{base}{path}#reviews",  # a fragment
        f"http://LOCALHOST:{port}{path}",  # host case
        f"HTTP://LocalHost:{port}{path}?fbclid=x#top",
    ]
    # the home page with and without its trailing slash, which the shop treats the same
    lpush(redis_cli, redis_url, base, f"{base}/", *aliases)
    node = Node(redis_url=redis_url, mongo_uri=mongo_uri, log_dir=tmp_path, node_id="aliases")
    try:
        assert node.wait() == 0
    finally:
        stop_all([node])
    assert_clean_log(node.log())
    # the nine seeds came in one batch: its line, at once, counts them; every one was accepted
    assert re.search(r"Seeds accepted: 9, taken again: 0 \(9 in all by node aliases\)", node.log())
    assert stats_of(node.log())["frontier/seeds/accepted"] == 9
    assert_each_product_once(mongo_uri, shop)
    urls = stored_urls(mongo_uri)
    assert len(urls) == 24
    assert f"{base}{path}" in urls
    # every link to a product (listings link a third with tracking parameters) was fetched
    # once; only the explicit seeds above fetched it again
    fetches = product_fetches(shop)
    sku = shop.product_sku(path)
    assert fetches.pop(sku) == len(aliases)
    assert set(fetches.values()) == {1}


def test_a_node_that_cannot_store_its_journal_exits_3_and_status_shows_the_products(
    redis_url, mongo_server, mongo_uri, shop_factory, tmp_path, capsys
) -> None:
    import json as json_

    from distcrawl.cli import main

    shop = shop_factory(products=30)
    redis.Redis.from_url(redis_url).lpush("catalog:start_urls", shop.url)
    journal = tmp_path / "journal"
    mongo_server.stop()  # for the whole crawl: every product goes to the journal
    node = Node(
        redis_url=redis_url,
        mongo_uri=mongo_uri,
        log_dir=tmp_path,
        node_id="stranded",
        settings={
            "MONGO_JOURNAL_PATH": str(journal),
            "MONGO_TIMEOUT": 1,
            "MONGO_JOURNAL_AFTER": 0.5,
            "MONGO_CLOSE_TIMEOUT": 0.5,
            "MONGO_JOURNAL_CLOSE_TIMEOUT": 2,
        },
    )
    try:
        assert node.wait() == 3, node.log()[-3000:]
    finally:
        stop_all([node])
    assert f"30 products are NOT in MongoDB: they wait in the journal {journal}" in node.log()
    assert "Exiting with status 3" in node.log()
    code = main(["status", "catalog", "--json", "--sample", "0", "-s", f"REDIS_URL={redis_url}"])
    out, err = capsys.readouterr()
    assert code == 0, err
    status = json_.loads(out)
    (entry,) = [n for n in status["nodes"] if n["node"] == "stranded"]
    assert (entry["state"], entry["journal_held"]) == ("stopped", 30)
    assert status["totals"]["journal_held"] == 30

    mongo_server.start()
    replay = ["journal", "replay", str(journal), "--mongo-uri", mongo_uri, "--json"]
    assert main([*replay, "-s", f"REDIS_URL={redis_url}"]) == 0
    out, _ = capsys.readouterr()
    assert json_.loads(out)["told"] == ["stranded"]  # the crawl learnt what the replay left
    assert set(stored_urls(mongo_uri)) == shop.expected_product_urls()
    assert_each_product_once(mongo_uri, shop)
    # status (and with it the dashboard and /metrics) now shows the journal empty
    code = main(["status", "catalog", "--json", "--sample", "0", "-s", f"REDIS_URL={redis_url}"])
    out, err = capsys.readouterr()
    status = json_.loads(out)
    (entry,) = [n for n in status["nodes"] if n["node"] == "stranded"]
    assert (entry["journal_held"], status["totals"]["journal_held"]) == (0, 0)
