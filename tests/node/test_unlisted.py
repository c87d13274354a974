"""The unlisted watch: what a listing dropped, what it links again, and when a product that no
listing links is gone (against a real Redis)."""

from __future__ import annotations

import asyncio

import redis
import redis.asyncio as aioredis

from distcrawl.node.revisit.unlisted import UnlistedWatch, decode_links, encode_links

KEY = "{catalog}:unlisted"
A, B, C = (f"http://shop.test/p/{i}-item.html" for i in (1, 2, 3))


def test_links_round_trip_compactly_and_junk_is_none() -> None:
    links = {f"http://shop.test/p/{i}-thing-{i}.html" for i in range(40)}
    packed = encode_links(links)
    assert decode_links(packed) == links
    assert len(packed) < sum(map(len, links)) / 2
    assert decode_links(encode_links(())) == set()
    for junk in (None, 7, "not base64 !", "aGVsbG8="):  # the last: base64, not zlib
        assert decode_links(junk) is None


def test_dropped_products_are_gone_after_the_grace_unless_a_listing_links_them(
    redis_url: str,
) -> None:
    sync = redis.Redis.from_url(redis_url)
    sync.delete(KEY)

    async def scenario() -> None:
        client = aioredis.Redis.from_url(redis_url)
        try:
            watch = UnlistedWatch(KEY, grace_s=0.0)
            assert watch.visited({A, B, C}, None) == 0  # a first visit drops nothing
            assert watch.visited({A}, {A, B, C}) == 2  # page 1 lost B and C
            await watch.tick(client)
            assert set(sync.hkeys(KEY)) == {B.encode(), C.encode()}
            assert watch.gone == {B, C}  # grace 0: gone at once
            # C only moved: page 2 links it (a 304 of page 2 would too)
            watch.visited({C}, {C})
            watch._next_refresh = 0.0
            await watch.tick(client)
            assert set(sync.hkeys(KEY)) == {B.encode()} and watch.gone == {B}
            # a long grace: unlisted, not gone yet; the first time it was dropped counts
            patient = UnlistedWatch(KEY, grace_s=3600.0)
            patient.visited(set(), {B})
            await patient.tick(client)
            assert patient.gone == frozenset() and set(sync.hkeys(KEY)) == {B.encode()}
        finally:
            await client.aclose()

    asyncio.run(scenario())
    sync.delete(KEY)
