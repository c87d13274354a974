"""A node's start waits out an error reply of a class no outage names, as its running loop
retries one, within its start timeout; then it refuses in one line (found by the fault search,
seed 1334598814: one such reply to the rejoin made the node exit 1 with tracebacks)."""

from __future__ import annotations

import asyncio

import pytest
import redis

from distcrawl.node.scheduler.outage import RedisUnreachableAtStart, StartWait


def test_an_unknown_error_reply_at_start_is_waited_out() -> None:
    replies = [redis.ResponseError("FAULTPROXY an error reply of a class no client knows")] * 2
    calls = []

    async def step() -> None:
        calls.append(1)
        if replies:
            raise replies.pop()

    asyncio.run(StartWait(timeout=30).run(step))
    assert len(calls) == 3


def test_an_unknown_error_reply_that_lasts_refuses_the_start_in_one_line() -> None:
    async def step() -> None:
        raise redis.ResponseError("WEIRD nothing a node knows")

    with pytest.raises(RedisUnreachableAtStart, match="WEIRD") as refused:
        asyncio.run(StartWait(timeout=1, where="redis://127.0.0.1:1").run(step))
    assert "\n" not in str(refused.value)


def test_an_error_that_is_no_reply_is_raised_at_once() -> None:
    async def step() -> None:
        raise ValueError("a bug")

    with pytest.raises(ValueError, match="a bug"):
        asyncio.run(StartWait(timeout=30).run(step))
