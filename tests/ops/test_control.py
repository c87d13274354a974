"""Pause, resume and reset of a whole crawl over several shards, against a real Redis."""

from __future__ import annotations

from crawl_writes import kids, lease

from distcrawl.frontier.store import FrontierKeys, FrontierStore
from distcrawl.ops import control

KEYS = FrontierKeys(spider="catalog", start_urls="catalog:start_urls", shards=4)


def test_pause_stops_leasing_in_every_shard_and_resume_starts_it_again(r) -> None:
    store = FrontierStore(r, KEYS)
    store.sync("n1", children=kids("a.test", 3) + kids("b.test", 3) + kids("c.test", 3))
    outcome = control.pause(r, KEYS)
    assert outcome["paused"] and outcome["by"] and control.is_paused(r, KEYS)
    assert lease(store, "n1", 9) == []
    assert control.resume(r, KEYS) == {"paused": False, "was_paused": True}
    assert len(lease(store, "n1", 9)) == 9
    assert control.resume(r, KEYS)["was_paused"] is False


def test_reset_keeps_the_leases_of_live_nodes_and_counts_what_it_drops(r) -> None:
    store = FrontierStore(r, KEYS)
    store.sync("n1", children=kids("a.test", 4) + kids("b.test", 4))
    store.heartbeat("live", "{}")
    held = lease(store, "live", 3)
    r.lpush(KEYS.start_urls, "https://s.test/")
    plan = control.reset_plan(r, KEYS, heartbeat_timeout=30, force=False, keep_seeds=True)
    assert plan["would_delete"] == {"queued": 5, "seen": 8, "parked": 0, "dead_letters": 0}
    assert (plan["keeps_leases_of"], plan["kept_leases"]) == (["live"], 3)
    outcome = control.reset(r, KEYS, heartbeat_timeout=30, keep_seeds=True)
    assert (outcome["kept_leases"], outcome["live_nodes"]) == (3, ["live"])
    assert outcome["before"]["queued"] == 5 and not outcome["still_paused"]
    assert [int(x) for x in store.drained()] == [0, 0, 3, 0, 1]  # the leases and the seed
    assert store.sync("live", acks=[leased.lease for leased in held]).acked == 3
    forced = control.reset(r, KEYS, heartbeat_timeout=30, force=True)
    assert forced["live_nodes"] == [] and [int(x) for x in store.drained()] == [0, 0, 0, 0, 0]
