"""The key schema (keys.py, schema.py): every key is declared once; the Python builders, the Lua
library's key names and the layout document come from the declarations, and a crawl writes no
key the schema does not declare."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from importlib import resources
from pathlib import Path

import pytest
import redis

from distcrawl.frontier.keys import (
    SCHEMA,
    ControlKeys,
    FrontierKeys,
    SeedKeys,
    ShardKeys,
    layout,
    lua_keys,
)
from distcrawl.frontier.protocol.loader import library
from distcrawl.frontier.schema import KeyOf, KeySpec
from distcrawl.frontier.store import Child, DeadLetter, Dupefilter, FrontierStore, SiteBudget

LUA = Path(str(resources.files("distcrawl.frontier").joinpath("lua")))


@pytest.fixture
def client(redis_url: str) -> Iterator[redis.Redis]:
    c = redis.Redis.from_url(redis_url)
    c.flushall()
    yield c
    c.flushall()
    c.close()


def _sample(key: KeySpec, slot: object) -> str:
    value = getattr(slot, key.name)
    return value(*(f"p{i}" for i in range(len(key.params)))) if key.params else value


def _regex(record_pattern: str, keys: FrontierKeys) -> re.Pattern[str]:
    """A layout record's pattern as a regex over the crawl's key names."""
    prefixes = "|".join(re.escape(s.prefix) for s in keys.all_shards())
    text = re.escape(record_pattern)
    text = text.replace(re.escape("{S:k.ddddd}"), f"(?:{prefixes})")
    text = text.replace(re.escape("{S}"), re.escape(keys.prefix))
    text = text.replace(re.escape("{L}"), re.escape(keys.seeds.prefix))
    return re.compile(re.sub(r"<\w+>", ".+", text) + r"\Z")


def test_the_layout_is_the_schema_and_each_record_names_what_the_builders_make() -> None:
    records = layout()
    assert [r.pattern for r in records[:-1]] == [k.record().pattern for k in SCHEMA]
    assert records[-1].pattern == "<start list>"
    assert all(r.type and r.meaning and r.slot for r in records)
    keys = FrontierKeys("c", "c:start_urls", shards=4)
    for key, record in zip(SCHEMA, records, strict=False):
        slot = {"control": keys, "seeds": keys.seeds}.get(key.slot, keys.shard(2))
        assert _regex(record.pattern, keys).match(_sample(key, slot)), record
        assert isinstance(key, KeyOf) == bool(key.params)
    # the classes declare nothing else, and every declaration is a builder of its class
    declared = {(k.slot, k.name) for k in SCHEMA}
    assert declared == {
        ("control", k.name) for k in vars(ControlKeys).values() if isinstance(k, KeySpec)
    } | {("shard", k.name) for k in vars(ShardKeys).values() if isinstance(k, KeySpec)} | {
        ("seeds", k.name) for k in vars(SeedKeys).values() if isinstance(k, KeySpec)
    }


def test_the_library_names_keys_only_through_the_schema() -> None:
    builders = set(
        re.findall(r"^function K\.(\w+)\(P\b.*?\) return P \.\. .* end$", lua_keys(), re.M)
    )
    assert set(builders) == {k.name for k in SCHEMA}
    for path in LUA.glob("*/*.lua"):
        code = re.sub(r"--\[\[.*?\]\]", "", path.read_text(), flags=re.S)
        code = re.sub(r"--[^\n]*", "", code)
        assert not re.search(r"""['"]:[a-z]""", code), f"{path}: a key name spelt out"
        assert not re.search(r"\bP \.\.", code), f"{path}: a key built by hand"
        for name in re.findall(r"\bK\.(\w+)\(", code):
            assert name in builders, f"{path}: K.{name} is not in the schema"


def _crawl_everything(store: FrontierStore, revisit: bool = False) -> None:
    """Most of what a crawl writes: claims, heart-beats, seeds, pushes (delayed, dont_filter),
    leases, acks, dead letters, feedback cuts, limits, waiting rooms, pauses, recoveries."""
    keys = store.keys
    store.client.lpush(keys.start_urls, "http://s0.test/", "http://s1.test/")
    store.claim("n1", json.dumps({"run": "1"}), 60_000)
    store.heartbeat("n1", "{}")
    store.take_seeds("n1", 1)
    kids = [
        Child(
            f"u{i}",
            100 + i % 3,
            i % 5 == 0,
            5_000 if i % 7 == 0 else 0,
            f"s{i % 6}.test",
            json.dumps({"u": f"http://s{i % 6}.test/{i}"}),
        )
        for i in range(40)
    ]
    store.set_site_limits("s1.test", rate=0.01, concurrency=1)
    budget = SiteBudget(rate=50, concurrency=2)
    store.sync("n1", children=kids, seeds_done=True, rejected=['{"raw": "x"}'], tag="t")
    got = store.sync("n1", lease=20, budget=budget, tag="t").leased
    dead = [DeadLetter("d1", json.dumps({"request": "{}", "url": "http://s2.test/"}), "s2.test")]
    feedback = [("s3.test", 0, 2, 0), ("s4.test", 5, 0, 0)]
    store.sync(
        "n1", acks=[x.lease for x in got[:3]], dead=dead, feedback=feedback, budget=budget, tag="t"
    )
    if revisit:
        from distcrawl.frontier.batch import Revisit

        store.sync(
            "n1",
            revisits=[Revisit(x.lease, 10, x.payload.decode(), "rv") for x in got[3:5]],
            tag="t",
        )
    store.set_paused('{"by": "test"}')
    store.set_paused(None)
    store.requeue_dead()
    store.mark_seen([b"x" * 20])
    store.heartbeat("n2", "{}")
    store.release("n2")
    store.recover("n3", 1)
    store.drained()
    store.seen()
    store.revisit_status()


@pytest.mark.parametrize(
    ("shards", "dupefilter", "forget_ms"),
    [
        (1, "exact", None),
        (4, "exact", None),
        (4, "bloom", None),
        (4, "exact", 60_000),
        (3, "bloom", 60_000),
    ],
)
def test_a_crawl_writes_no_key_the_schema_does_not_declare(
    client: redis.Redis, shards: int, dupefilter: str, forget_ms: int | None
) -> None:
    # the documented seed list: its name hashes where it will, its neighbours with it
    keys = FrontierKeys("k", "k:start_urls", shards=shards)
    store = FrontierStore(
        client, keys, dupefilter=Dupefilter(kind=dupefilter, capacity=1000), forget_ms=forget_ms
    )
    _crawl_everything(store, revisit=forget_ms is not None)
    patterns = [_regex(r.pattern, keys) for r in layout()[:-1]]
    written = sorted(k.decode() for k in client.scan_iter("*"))
    assert len(written) > 15
    stray = [k for k in written if k != keys.start_urls and not any(p.match(k) for p in patterns)]
    assert not stray
    # and the library took every one of them from the schema: none outside the crawl's slots
    assert all(k.startswith(("{k}", "{k:")) for k in written if k != keys.start_urls)


def test_every_slot_class_and_the_library_agree_on_each_name() -> None:
    text = library().text
    for key in SCHEMA:
        assert f"function K.{key.name}(" in text
    keys = FrontierKeys("s", "s:l", shards=2)
    control, shard, seeds = ControlKeys("s"), keys.shard(1), keys.seeds
    for key in SCHEMA:
        name = _sample(key, {"control": control, "seeds": seeds}.get(key.slot, shard))
        assert name.startswith(("{s}:", "{s:1.", "{s:l}:")) and "<" not in name
