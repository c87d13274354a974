"""The order guarantee across shards (docs/design/frontier.md, "Priorities across shards"),
searched: random schedules of several nodes pushing, leasing and acking requests of random
priorities over the shards of one real Redis server, each round trip checked against the
shards' queues as Redis holds them after it."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
import redis
from frontier_state import clear_frontier

from distcrawl.frontier.keys import FrontierKeys
from distcrawl.frontier.protocol.spec import level_of
from distcrawl.frontier.store import Child, FrontierStore, Lease
from distcrawl.frontier.views import LeasePlan

PRIORITIES = (0, 10, 20, 30, 40, 50)


def best_queued(client: redis.Redis, keys: FrontierKeys) -> dict[int, int]:
    """Each shard's best queued priority, read from its levels (shards with an empty queue
    left out)."""
    best: dict[int, int] = {}
    for i in range(keys.shards):
        head = client.zrange(keys.shard(i).levels, 0, 0, withscores=True)
        if head:
            best[i] = level_of(head[0][1])[0]
    return best


class PlanSpy:
    """Keeps the last plan a node's views made (what its round trip asked of each shard)."""

    def __init__(self, store: FrontierStore) -> None:
        self.last: LeasePlan | None = None
        plan = store.views.plan

        def spy(*args: Any, **kwargs: Any) -> LeasePlan:
            self.last = plan(*args, **kwargs)
            return self.last

        store.views.plan = spy  # type: ignore[method-assign]


@pytest.mark.parametrize("seed", range(6))
def test_no_lease_passes_a_better_request_kept_in_a_shard_called_in_the_same_round_trip(
    redis_url: str, seed: int
) -> None:
    """Three nodes, eight shards, 40 sites: each step one node pushes 0-30 children of random
    priorities, acks some of its leases and leases 0-24 (every value of each drawn at random).
    After the round trip, no shard it called (one it leased from, acked to or pushed to) keeps
    a request of a higher priority than one the round trip leased elsewhere, except where the
    guarantee says so: the node's lease reached below every priority it knew of (no floor), or
    that shard handed out a whole lease's worth above the cutoff."""
    rng = random.Random(seed)
    client = redis.Redis.from_url(redis_url)
    keys = FrontierKeys(f"order{seed}", f"order{seed}:start_urls", shards=8)
    clear_frontier(client, keys)
    names = ("n1", "n2", "n3")
    stores = {n: FrontierStore(client, keys, refresh=rng.choice([0.0, 5.0])) for n in names}
    spies = {n: PlanSpy(s) for n, s in stores.items()}
    held: dict[str, list[Lease]] = {n: [] for n in names}
    sites = [f"s{i}.test" for i in range(40)]
    url = 0
    leased_total = tested = 0
    for _ in range(120):
        name = rng.choice(names)
        store = stores[name]
        kids = []
        for _ in range(rng.randrange(0, 31)):
            url += 1
            site = rng.choice(sites)
            payload = json.dumps({"url": f"http://{site}/{url}"})
            kids.append(Child(f"u{url}".encode(), rng.choice(PRIORITIES), False, 0, site, payload))
        rng.shuffle(held[name])
        n_acks = rng.randrange(0, len(held[name]) + 1)
        acks, held[name] = held[name][:n_acks], held[name][n_acks:]
        lease = rng.choice([0, 1, 4, 8, 16, 24])
        before = best_queued(client, keys)
        spies[name].last = None
        r = store.sync(name, children=kids, acks=acks, lease=lease)
        held[name] += [leased.lease for leased in r.leased]
        leased_total += len(r.leased)
        after = best_queued(client, keys)
        called = {leased.lease.shard for leased in r.leased}
        called |= {a.shard for a in acks} | {keys.shard_of(c.site) for c in kids}
        plan = spies[name].last
        from_shard: dict[int, int] = {}
        for leased in r.leased:
            from_shard[leased.lease.shard] = from_shard.get(leased.lease.shard, 0) + 1
        for leased in r.leased:
            others = called - {leased.lease.shard}
            # a round trip that had to take a better request out of another shard it called
            tested += any(before.get(s, -1) > leased.priority for s in others)
            for s in others:
                if after.get(s, -1) <= leased.priority:
                    continue
                no_floor = plan is None or plan.floor is None
                extra_spent = from_shard.get(s, 0) >= max(1, lease)
                assert no_floor or extra_spent, (
                    f"{name} leased priority {leased.priority} from shard {leased.lease.shard}"
                    f" while shard {s}, called in the same round trip, keeps {after[s]}"
                )
    # the schedules lease most of what they push, and often against better requests elsewhere
    assert leased_total > 500 and tested > 20, (leased_total, tested)
    clear_frontier(client, keys)
