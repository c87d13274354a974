"""A client of the test's Redis for the operations layer's tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis


@pytest.fixture
def r(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()
