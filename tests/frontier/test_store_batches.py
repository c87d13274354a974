"""The frontier's per-batch work against a real Redis-protocol server: the dupefilter's buckets,
the lease plan across shards, the Bloom filter's size."""

from __future__ import annotations

import math
import random
from typing import Any

import pytest
import redis
from frontier_state import clear_frontier
from store_records import child, fingerprint

from distcrawl.frontier.batch import bucket_hash
from distcrawl.frontier.store import (
    Child,
    FrontierKeys,
    FrontierStore,
    SiteBudget,
)
from distcrawl.frontier.views import ROTATE

# -- per-batch work: the dupefilter, the lease plan, the Bloom filter's size ---------------------


def test_the_script_reads_a_fingerprints_bucket_bits_as_the_node_computes_them(
    redis_url: str,
) -> None:
    """``hash_of_decimal`` (a fingerprint's h where the node sent none) against the node's
    ``bucket_hash``: short and long numbers, negative ones, the int64 extremes, the edges of
    the top 32 bits."""

    from distcrawl.frontier.protocol.loader import script

    rng = random.Random(5)
    members = [0, 1, -1, 7, -8, 2**63 - 1, -(2**63), 10**15 - 1, -(10**15) + 1, 10**15, -(10**15)]
    members += [2**32 * k + j for k in (-1, 0, 1, 2**31 - 1, -(2**31)) for j in (-1, 0, 1)]
    members += [rng.randrange(-(2**63), 2**63) for _ in range(300)]
    members += [rng.randrange(-(10**16), 10**16) for _ in range(100)]
    lua = script(
        "dupefilter",
        body="""
local out = {}
for _, dec in ipairs(ARGV) do out[#out + 1] = hash_of_decimal(dec) end
return out
""",
    )
    client = redis.Redis.from_url(redis_url)
    got = client.eval(lua, 0, *[str(m) for m in members if -(2**63) <= m < 2**63])
    want = [bucket_hash(m) for m in members if -(2**63) <= m < 2**63]
    assert got == want


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_after_splits_every_fingerprint_is_in_the_bucket_the_node_finds_for_it(
    redis_url: str, seed: int
) -> None:
    """Random fingerprints (the int64 extremes and the top bits' edges among them) pushed in
    batches, the node's bucket hints on and off: once the buckets have split at every level,
    each one holds exactly the fingerprints whose bucket the node computes as its own, and
    each is filtered when pushed again."""
    rng = random.Random(seed)
    client = redis.Redis.from_url(redis_url)
    keys = FrontierKeys(f"split{seed}", "split:start_urls", shards=1)
    clear_frontier(client, keys)
    store = FrontierStore(client, keys)
    edges = [0, -1, 2**63 - 1, -(2**63)] + [2**32 * k for k in (-1, 1, 2**30, -(2**30))]
    members = edges + [rng.randrange(-(2**63), 2**63) for _ in range(3000)]
    fps = [(m % 2**64).to_bytes(8, "big") + bytes(8) for m in members]
    for at in range(0, len(fps), 150):
        batch = [Child(fp, 0, False, 0, "s.test", "{}") for fp in fps[at : at + 150]]
        store.sync("n1", children=batch)
        if at % 300 == 0:
            store.views[0].buckets = None  # a node that does not know the buckets yet
    shard = keys.shard(0)
    level, split = (int(client.hget(shard.seen_info, f)) for f in ("L", "split"))
    assert level >= 3
    where: dict[int, int] = {}
    for b in range(2**level + split):
        for m in client.smembers(shard.seen_bucket(b)):
            where[int(m)] = b
    assert len(where) == len(set(members))
    for m in set(members):
        h = bucket_hash(m)
        b = h % 2**level
        if b < split:
            b = h % 2 ** (level + 1)
        assert where[m] == b, m
    again = store.sync("n1", children=[Child(fp, 0, False, 0, "s.test", "{}") for fp in fps])
    assert (again.added, again.filtered) == (0, len(fps))
    clear_frontier(client, keys)


def test_exact_dupefilter_checks_a_batch_by_bucket_and_keeps_duplicates_out(
    store: FrontierStore,
) -> None:
    # enough URLs that the buckets split, then a batch of seen, new and repeated ones
    n = 3000
    kids = [Child(fingerprint(i), 0, False, 0, "s.test", "{}") for i in range(n)]
    first = store.sync("n1", children=kids)
    assert first.added == n
    mixed = [Child(fingerprint(i), 0, False, 0, "s.test", "{}") for i in range(n - 50, n + 50)]
    mixed += mixed[-10:]  # new ones twice in the same batch
    r = store.sync("n1", children=mixed)
    assert (r.added, r.filtered) == (50, 60)
    assert store.seen() == n + 50


def test_an_ack_frees_a_slot_even_when_the_sites_in_flight_count_is_not_a_number(
    store: FrontierStore,
) -> None:
    store.sync("n1", children=[child(f"a{i}", site="a.test") for i in range(3)])
    budget = SiteBudget(concurrency=1)
    [leased] = store.sync("n1", lease=3, budget=budget).leased
    store.client.hset(store.keys.site_keys("a.test").active, "a.test", "1.0")  # by hand, say
    assert store.sync("n1", acks=[leased.lease]).acked == 1
    assert len(store.sync("n2", lease=3, budget=budget).leased) == 1


def _spread(store: FrontierStore, sites: int, per_site: int, prio: int = 100) -> list[str]:
    names = [f"s{i}.test" for i in range(sites)]
    store.sync(
        "loader",
        children=[child(f"{s}/p{j}", prio, site=s) for s in names for j in range(per_site)],
    )
    return names


def test_a_flush_leases_from_a_few_shards_and_every_shard_gets_its_turn(
    store: FrontierStore,
) -> None:
    if store.keys.shards == 1:
        pytest.skip("one shard")
    _spread(store, 400, 10)  # ~250 per shard
    store.sync("n1", lease=1)  # the node reads every shard once
    touched: set[int] = set()
    acks: list[Any] = []
    # it stays with the shard it acks to (no extra call) but takes another in turn every
    # ROTATE leases
    for _ in range(16 * ROTATE):
        r = store.sync("n1", acks=acks, lease=32)
        assert len(r.leased) >= 32
        shards = {leased.lease.shard for leased in r.leased}
        # a chunk from each shard while the shards hold that many: a few calls, not 16
        assert len(shards) <= 5
        assert r.priority_inversions == 0
        touched |= shards
        acks = [leased.lease for leased in r.leased]
    assert touched == set(range(store.keys.shards))


@pytest.mark.parametrize("lag", [1, 2, 3])
def test_every_shard_gets_its_turn_when_acks_and_links_reach_shards_flushes_later(
    store: FrontierStore, lag: int
) -> None:
    """A node whose acks and links go ``lag`` flushes after the lease (probes hold them one
    flush): however the flushes interleave, no shard its flushes call anyway keeps it for
    more than ROTATE leases in a row, and the shards share the leases evenly."""
    if store.keys.shards == 1:
        pytest.skip("one shard")
    _spread(store, 400, 40)  # ~1,000 per shard: no shard runs dry
    store.sync("n1", lease=1)  # the node reads every shard once
    pending: list[list[Any]] = [[] for _ in range(lag)]
    per_shard = [0] * store.keys.shards
    flushes = 2 * store.keys.shards * ROTATE
    for step in range(flushes):
        due = pending.pop(0)
        acks = [leased.lease for leased in due]
        # each page links to one new page of its own site
        kids = [
            child(f"{leased.lease.site}/n{step}-{j}", 100, site=leased.lease.site)
            for j, leased in enumerate(due)
        ]
        r = store.sync("n1", acks=acks, children=kids, lease=32)
        pending.append(r.leased)
        for leased in r.leased:
            per_shard[leased.lease.shard] += 1
    mean = sum(per_shard) / len(per_shard)
    assert max(per_shard) <= 32 * ROTATE + mean, per_shard
    assert min(per_shard) > 0, per_shard


def test_a_shard_called_for_other_work_hands_out_what_beats_the_worst_leased(
    store: FrontierStore,
) -> None:
    if store.keys.shards == 1:
        pytest.skip("one shard")
    names = _spread(store, 200, 3)
    store.sync("n1", lease=1)  # every shard read: all hold priority 100 at their heads
    # another node pushes a category page into a shard where this node knows only products
    other = names[0]
    helper = FrontierStore(store.client, store.keys)
    helper.sync("n2", children=[child(f"{other}/c", 300, site=other)])
    # this node's next flush pushes a product there (so calls that shard anyway) and leases 8,
    # all from another shard (one shard takes its turn with at least 8)
    r = store.sync("n1", children=[child(f"{other}/p-new", 100, site=other)], lease=8)
    got = [(leased.lease.shard, leased.priority) for leased in r.leased]
    assert (store.keys.shard_of(other), 300) in got
    assert r.priority_inversions == 0


def test_the_bloom_filter_is_made_at_its_full_size_and_keeps_its_error_rate(
    redis_url: str,
) -> None:
    from distcrawl.frontier.store import Dupefilter

    client = redis.Redis.from_url(redis_url)
    keys = FrontierKeys("bloomsize", "bloomsize:start_urls", shards=2)
    clear_frontier(client, keys)
    n, rate = 10_000, 0.01
    dupefilter = Dupefilter("bloom", 2 * n, rate)  # n URLs per shard; one site, one shard
    m, _ = dupefilter.bloom_shape(2) or (0, 0)
    store = FrontierStore(client, keys, dupefilter=dupefilter, refresh=0.0)
    bloom = keys.site_keys("s.test").bloom
    store.sync("n1", children=[Child(fingerprint(0), 0, False, 0, "s.test", "{}")])
    # the first write makes the whole filter: no growth (and no over-allocation) later
    assert client.strlen(bloom) == (m + 7) // 8
    size = client.memory_usage(bloom, samples=0)
    for start in range(1, n, 2000):
        ids = range(start, min(n, start + 2000))
        kids = [Child(fingerprint(i), 0, False, 0, "s.test", "{}") for i in ids]
        store.sync("n1", children=kids)
    assert client.memory_usage(bloom, samples=0) == size
    assert size / n <= 1.2 * (-math.log(rate) / math.log(2) ** 2 / 8)  # ~the theoretical bytes
    # measured on URLs never pushed, at capacity: about the rate it was sized for
    probes = [
        Child(fingerprint(i), 0, False, 0, "s.test", "{}") for i in range(10**6, 10**6 + 20_000)
    ]
    false_positives = store.sync("n1", children=probes).filtered
    assert 0 < false_positives <= 1.5 * rate * len(probes)


def test_rids_carry_the_pushing_nodes_short_tag(store: FrontierStore) -> None:
    """A fenced push names its requests ``<seq>.<tag>``: the 4-character tag the node chose,
    which holds none of the characters the script splits on."""
    from distcrawl.frontier.batch import new_rid_tag

    tags = {new_rid_tag() for _ in range(200)}
    assert len(tags) > 190  # random, not a constant
    assert all(len(t) == 4 and "." not in t and ":" not in t for t in tags)
    tag = new_rid_tag()
    store.sync("n1", children=[child("http://a.test/1", site="a.test")], tag=tag)
    result = store.sync("n1", lease=1, tag=tag)
    [leased] = result.leased
    seq, _, got = leased.lease.rid.partition(".")
    assert got == tag and seq.isdigit()
