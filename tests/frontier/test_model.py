"""The frontier's protocol against a model: random interleavings of pushes, leases, acks,
failures, parked retries, heart-beats, recoveries, rewinds and Redis restarts across 3 node
identities, the whole frontier compared with the model after every step (see
``tests/frontier_model.py``; ``bench/model.py`` runs many more examples)."""

from __future__ import annotations

from frontier_model import run_model

from distcrawl.servers.process import RedisServer

#: examples and steps in CI: about a minute of CPU
EXAMPLES = 25
STEPS = 40


def test_the_frontier_holds_what_the_model_says(redis_server: RedisServer, redis_url: str) -> None:
    run_model(redis_server, examples=EXAMPLES, steps=STEPS)
