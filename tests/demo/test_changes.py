"""The demo shop that changes: epochs of price and stock changes, added and removed products,
ETag / Last-Modified / 304, and the ground truth of every change, over real HTTP.

A test clock drives the change epochs (the shop reads it on every request), so a test moves
time on instead of waiting for it.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from email.utils import formatdate
from typing import Any

import pytest

from distcrawl.demo.catalog import Catalog
from distcrawl.demo.changes import CatalogHistory, ChangePlan
from distcrawl.demo.shop import DemoShop

ShopFactory = Callable[..., DemoShop]
START = 1_800_000_000.0  # a fixed epoch 0, so two shops (and two runs) agree
_PRICE = re.compile(r'"price": "([0-9.]+)"')
_AVAILABILITY = re.compile(r'"availability": "https://schema.org/(\w+)"')
_PRODUCT_LINK = re.compile(r'href="(/p/[^"?]+)')


class Clock:
    def __init__(self, now: float = START) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class Answer:
    def __init__(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.status, self.headers, self.body = status, headers, body

    @property
    def text(self) -> str:
        return self.body.decode()


def get(shop: DemoShop, path: str, headers: dict[str, str] | None = None) -> Answer:
    conn = http.client.HTTPConnection("127.0.0.1", shop.port, timeout=10)
    try:
        conn.request("GET", path, headers=headers or {})
        raw = conn.getresponse()
        body = raw.read()
        return Answer(raw.status, {k.lower(): v for k, v in raw.getheaders()}, body)
    finally:
        conn.close()


def listed_paths(shop: DemoShop) -> set[str]:
    """Every product path the shop's listings show now (walking every page of every leaf)."""
    found: set[str] = set()
    for leaf in shop.catalog.leaves():
        page = 1
        while (answer := get(shop, f"{leaf.path}?page={page}")).status == 200:
            found |= set(_PRODUCT_LINK.findall(answer.text))
            page += 1
        assert answer.status == 404
    return found


def changing(shop_factory: ShopFactory, clock: Clock, **config: Any) -> DemoShop:
    settings: dict[str, Any] = {
        "products": 120,
        "change_interval": 10.0,
        "change_rate": 0.1,
        "change_start": START,
        "tracking_params": False,
        **config,
    }
    return shop_factory(clock=clock, **settings)


# -- validators ---------------------------------------------------------------------------


def test_default_shop_sends_no_validators_and_ignores_conditions(demo_shop: DemoShop) -> None:
    product = demo_shop.catalog.products()[0]
    answer = get(demo_shop, product.path, {"If-None-Match": "*", "If-Modified-Since": "x"})
    assert answer.status == 200
    assert "etag" not in answer.headers and "last-modified" not in answer.headers
    assert demo_shop.epoch() == 0
    assert demo_shop.changes()["changes"] == []
    assert demo_shop.truth()["gone"] == []


def test_conditional_pages_answer_304_to_their_validators(shop_factory: ShopFactory) -> None:
    shop = shop_factory(products=40, conditional=True)
    leaf = shop.catalog.leaves()[0]
    product = shop.catalog.products()[3]
    for path in ("/", f"/c/{leaf.top_slug}/", leaf.path, product.path):
        first = get(shop, path)
        assert first.status == 200
        etag, modified = first.headers["etag"], first.headers["last-modified"]
        assert etag.startswith('"') and etag.endswith('"')
        assert get(shop, path).headers["etag"] == etag  # stable while nothing changes

        not_modified = get(shop, path, {"If-None-Match": etag})
        assert not_modified.status == 304
        assert not_modified.body == b""
        assert not_modified.headers["etag"] == etag
        assert "content-length" not in not_modified.headers
        assert get(shop, path, {"If-None-Match": f'"other", W/{etag}'}).status == 304
        assert get(shop, path, {"If-Modified-Since": modified}).status == 304
        # If-None-Match wins over If-Modified-Since (RFC 9110)
        stale = {"If-None-Match": '"other"', "If-Modified-Since": modified}
        assert get(shop, path, stale).status == 200
        assert get(shop, path, {"If-Modified-Since": formatdate(0, usegmt=True)}).status == 200
        assert get(shop, path, {"If-Modified-Since": "not a date"}).status == 200
    assert "etag" not in get(shop, "/robots.txt").headers
    assert "etag" not in get(shop, "/nope").headers
    statuses = [(e["status"], e["bytes"] > 0) for e in shop.request_log()]
    assert (304, False) in statuses and (200, True) in statuses
    assert all(size for status, size in statuses if status == 200)


# -- changes ------------------------------------------------------------------------------


def test_prices_and_stock_change_each_epoch_and_the_truth_knows_when(
    shop_factory: ShopFactory,
) -> None:
    clock = Clock(START + 1)
    shop = changing(shop_factory, clock)
    products = shop.catalog.products()
    etags = {p.path: get(shop, p.path).headers["etag"] for p in products}
    assert shop.changes()["changes"] == []

    clock.now = START + 10.5  # epoch 1
    truth = shop.changes()
    assert truth["epoch"] == 1
    changes = truth["changes"]
    changed = {c["path"] for c in changes}
    assert len(changed) == 12  # 10 % of 120
    assert {c["field"] for c in changes} <= {"price", "availability"}
    assert all(c["at"] == START + 10 and c["old"] != c["new"] for c in changes)
    for product in products:
        answer = get(shop, product.path, {"If-None-Match": etags[product.path]})
        if product.path not in changed:
            assert answer.status == 304, product.path
            continue
        assert answer.status == 200
        timeline = truth["products"][product.path]["timeline"]
        assert [state["at"] for state in timeline] == [START, START + 10]
        now = timeline[-1]
        assert _PRICE.search(answer.text)[1] == now["price"]  # type: ignore[index]
        assert _AVAILABILITY.search(answer.text)[1] == now["availability"]  # type: ignore[index]
        modified = answer.headers["last-modified"]
        assert modified == formatdate(START + 10, usegmt=True)

    clock.now = START + 35  # epochs 2 and 3 at once: each one is still made at its own time
    later = shop.changes()
    assert later["epoch"] == 3
    assert later["changes"][: len(changes)] == changes
    assert {c["at"] for c in later["changes"]} == {START + 10, START + 20, START + 30}


def test_changes_are_deterministic_from_the_seed_and_the_time(
    shop_factory: ShopFactory,
) -> None:
    clock = Clock(START + 45)
    one = changing(shop_factory, clock, seed=7, change_add=2, change_remove=2)
    two = changing(shop_factory, clock, seed=7, change_add=2, change_remove=2)
    other = changing(shop_factory, clock, seed=8, change_add=2, change_remove=2)

    def strip(truth: dict[str, Any], shop: DemoShop) -> str:
        return json.dumps(truth).replace(shop.url.rstrip("/"), "")

    assert strip(one.changes(), one) == strip(two.changes(), two)
    assert strip(one.changes(), one) != strip(other.changes(), other)
    # computed in one go or epoch by epoch: the same history
    stepwise = CatalogHistory(Catalog(120, seed=7), ChangePlan(10.0, 0.1, 2, 2), start=START)
    for epoch in range(5):
        stepwise.advance(epoch)
    assert strip(stepwise.ground_truth(4, one.url.rstrip("/")), one) == strip(one.changes(), one)


def test_removed_products_answer_gone_and_leave_the_listings_added_ones_join(
    shop_factory: ShopFactory,
) -> None:
    clock = Clock(START)
    shop = changing(shop_factory, clock, change_rate=0.0, change_add=3, change_remove=4)
    assert listed_paths(shop) == {p.path for p in shop.catalog.products()}

    clock.now = START + 21  # two epochs: 8 removed, 6 added
    truth = shop.changes()
    removed = {r["path"] for r in truth["removed"]}
    added = {a["path"] for a in truth["added"]}
    assert (len(removed), len(added)) == (8, 6)
    assert {a["at"] for a in truth["added"]} == {START + 10, START + 20}
    live = {p.path for p in shop.catalog.products()} - removed | added
    assert listed_paths(shop) == live
    for path in removed:
        assert get(shop, path).status == 410
        assert truth["products"][path]["removed_at"] in (START + 10, START + 20)
    for path in added:
        answer = get(shop, path)
        assert answer.status == 200
        assert path.split("/p/")[1].split("-")[0] in answer.text  # the product id in its name
    base = shop.url.rstrip("/")
    assert set(shop.truth()["expected"]) == {base + path for path in live}
    assert set(shop.truth()["gone"]) == {base + path for path in removed}
    assert all(shop.product_sku(base + path) for path in removed | added)

    # a 404 instead of a 410, if the shop is told so
    other = changing(
        shop_factory, Clock(START + 11), change_rate=0.0, change_remove=1, gone_status=404
    )
    (gone,) = other.changes()["removed"]
    assert get(other, gone["path"]).status == 404


def test_listing_validators_follow_what_the_page_shows(shop_factory: ShopFactory) -> None:
    clock = Clock(START)
    shop = changing(shop_factory, clock, products=60, change_rate=0.05, page_size=10)
    pages = [f"{leaf.path}?page={n}" for leaf in shop.catalog.leaves() for n in (1, 2)]
    pages = [path for path in pages if get(shop, path).status == 200]
    before = {path: get(shop, path) for path in pages}
    clock.now = START + 10
    changed_paths = {c["path"] for c in shop.changes()["changes"]}
    assert changed_paths
    answers = []
    for path, first in before.items():
        shown = set(_PRODUCT_LINK.findall(first.text))
        again = get(shop, path, {"If-None-Match": first.headers["etag"]})
        # a card shows the price, not the stock: the page changed exactly when a price on it did
        prices_changed = any(
            c["path"] in shown and c["field"] == "price" for c in shop.changes()["changes"]
        )
        assert (again.status == 200) == prices_changed, path
        answers.append(again.status)
    assert set(answers) == {200, 304}


def test_changes_over_http_and_from_the_command_line(tmp_path: Any) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "distcrawl.cli", "shop", "--products", "30", "--port", "0",
         "--change-interval", "1", "--change-rate", "0.5", "--add-products", "1",
         "--remove-products", "1", "--change-cycles", "2", "--gone-status", "404"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        url = json.loads(proc.stdout.readline())["url"]
        port = int(url.rsplit(":", 1)[1].strip("/"))
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)

        def fetch(path: str, headers: dict[str, str] | None = None) -> Answer:
            conn.request("GET", path, headers=headers or {})
            raw = conn.getresponse()
            return Answer(raw.status, {k.lower(): v for k, v in raw.getheaders()}, raw.read())

        assert "etag" in fetch("/").headers  # validators are on when the shop changes
        deadline = 120.0
        started = time.monotonic()
        while (truth := json.loads(fetch("/_shop/changes").body))["epoch"] < 2:
            assert time.monotonic() - started < deadline, truth["epoch"]
            time.sleep(0.2)
        assert (truth["interval"], truth["rate"], truth["cycles"]) == (1.0, 0.5, 2)
        assert len(truth["removed"]) == len(truth["added"]) == 2
        assert len({c["path"] for c in truth["changes"] if c["at"] == truth["start"] + 1}) == 15
        assert fetch(truth["removed"][0]["path"]).status == 404
        assert fetch("/_shop/changes").status == 200
        conn.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)


def test_bad_change_options_are_refused(shop_factory: ShopFactory) -> None:
    with pytest.raises(ValueError, match="change interval"):
        shop_factory(change_rate=0.1)
    with pytest.raises(ValueError, match=r"within 0\.\.1"):
        shop_factory(change_interval=1, change_rate=1.5)
    with pytest.raises(ValueError, match="404 or 410"):
        shop_factory(gone_status=500)
    with pytest.raises(ValueError, match="change epochs ago"):
        shop_factory(change_interval=1, change_start=0.0)
    shop_factory(change_interval=1, change_start=0.0, change_cycles=3)  # bounded: fine
    proc = subprocess.run(
        [sys.executable, "-m", "distcrawl.cli", "shop", "--change-rate", "0.2"],
        capture_output=True, text=True, timeout=60, check=False,
        env={**os.environ},
    )  # fmt: skip
    assert proc.returncode == 2
    assert "need a change interval" in proc.stderr
