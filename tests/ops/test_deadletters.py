"""The one reader of dead letters and refused entries, against a real Redis: reasons and sites
as status shows them, filters, pages that continue where they stopped, re-queue and purge."""

from __future__ import annotations

import asyncio
import json

import redis.asyncio as aioredis
from crawl_writes import dead_letter

from distcrawl.frontier.store import FrontierKeys, FrontierStore
from distcrawl.ops import deadletters
from distcrawl.ops.deadletters import Cursor, DeadLetter, Filter
from distcrawl.ops.reads import run

KEYS = FrontierKeys(spider="catalog", start_urls="catalog:start_urls", shards=4)


def test_a_records_reason_and_site_are_read_one_way() -> None:
    assert DeadLetter("a", 0, {"reason": "http_503", "url": "http://A.test/x"}).site == "a.test"
    assert DeadLetter("a", 0, {"site": "b.test", "url": "http://a.test/"}).site == "b.test"
    assert DeadLetter("a", 0, {"url": "not a url"}).site == "unknown"
    assert DeadLetter("a", 0, {"url": "http://a.test/"}).reason == "unknown"
    assert deadletters.read_record(b"\xff") == {"reason": "unreadable_record"}
    assert deadletters.read_record("[1]") == {"reason": "unreadable_record"}
    letter = DeadLetter("x", 0, {"reason": "http_503", "request": "{...}", "url": "http://a.t/"})
    assert letter.summary() == {
        "id": "x",
        "reason": "http_503",
        "site": "a.t",
        "url": "http://a.t/",
    }


def test_filters_match_sites_without_case_and_reasons_exactly() -> None:
    letter = DeadLetter("a", 0, {"reason": "http_503", "url": "http://Shop.test/"})
    assert Filter.of()(letter)
    assert Filter.of(sites=["SHOP.test"])(letter)
    assert Filter.of(sites=["shop.test"], reasons=["http_503", "http_500"])(letter)
    assert not Filter.of(reasons=["HTTP_503"])(letter)
    assert not Filter.of(sites=["other.test"], reasons=["http_503"])(letter)


def test_pages_continue_where_they_stopped_and_miss_nothing(r, redis_url) -> None:
    for i in range(45):
        dead_letter(r, KEYS, f"d{i}", f"http://s{i % 7}.test/{i}", f"r{i % 3}")
    sizes = [r.hlen(shard.dead) for shard in KEYS.all_shards()]
    assert sum(sizes) == 45 and sum(1 for n in sizes if n) > 1  # spread over shards

    async def pages(match: Filter, limit: int) -> list[list[str]]:
        client = aioredis.from_url(redis_url)
        out: list[list[str]] = []
        cursor: Cursor | None = Cursor()
        try:
            while cursor is not None:
                page = await deadletters.apage(
                    client, KEYS, match, start=cursor, limit=limit, calls=5, count=1000
                )
                out.append([letter.id for letter in page.letters])
                assert len(out) <= 45, "the pages go round in circles"
                # a page ends inside a chunk HSCAN read whole: the next reads it again past it
                cursor = Cursor.parse(str(page.next), KEYS.shards) if page.next else None
        finally:
            await client.aclose()
        return out

    every = asyncio.run(pages(Filter(), 4))
    ids = [i for page in every for i in page]
    assert sorted(ids) == sorted(f"d{i}" for i in range(45))  # each once
    assert all(len(page) <= 4 for page in every)
    some = [i for page in asyncio.run(pages(Filter.of(reasons=["r1"]), 3)) for i in page]
    assert sorted(some) == sorted(f"d{i}" for i in range(1, 45, 3))


def test_a_bounded_page_stops_after_its_calls(r) -> None:
    for i in range(30):
        dead_letter(r, KEYS, f"d{i}", "http://one.test/x", "http_503")
    page = run(r, deadletters.scan(KEYS, Filter.of(reasons=["none"]), limit=10, calls=1, count=5))
    assert page.letters == [] and page.next is not None and 0 < page.read <= 30


def test_requeue_and_purge_the_matching_letters(r) -> None:
    for i in range(6):
        dead_letter(r, KEYS, f"a{i}", f"http://a{i}.test/p", "http_503")
        dead_letter(r, KEYS, f"b{i}", f"http://b{i}.test/p", "DownloadTimeoutError")
    timeouts = deadletters.matching(r, KEYS, reasons=["DownloadTimeoutError"])
    assert sorted(letter.id for letter in timeouts) == [f"b{i}" for i in range(6)]
    assert deadletters.requeue(r, KEYS, [letter.id for letter in timeouts]) == 6
    assert int(FrontierStore(r, KEYS).drained()[0]) == 6  # queued again
    left = deadletters.matching(r, KEYS)
    assert deadletters.tally(left).by_reason == {"http_503": 6}
    assert deadletters.purge(r, KEYS, left[:4]) == 4
    assert sorted(letter.id for letter in deadletters.matching(r, KEYS)) == sorted(
        letter.id for letter in left[4:]
    )


def test_refused_entries_newest_first_an_unreadable_one_named(r, redis_url) -> None:
    entry = {"kind": "seed", "raw": "ftp://x.test/", "reason": "bad_scheme", "node": "n1", "at": 1}
    r.lpush(KEYS.rejected, json.dumps(entry))
    r.lpush(KEYS.rejected, b"\xff junk")
    found = deadletters.refused(r, KEYS)
    assert found.total == 2
    assert [e["reason"] for e in found.entries] == ["unreadable_record", "bad_scheme"]
    assert found.entries[1] == entry
    assert deadletters.refused(r, KEYS, limit=1).entries[0]["raw"].endswith("junk")

    async def second_page() -> deadletters.Refused:
        client = aioredis.from_url(redis_url)
        try:
            return await deadletters.arefused(client, KEYS, 1, 1)
        finally:
            await client.aclose()

    assert asyncio.run(second_page()).entries == [entry]
