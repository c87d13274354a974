"""[revisit] How a crawl's scheduled re-visits stand, over every shard."""

from __future__ import annotations

from typing import Any

from distcrawl.frontier.batch import text
from distcrawl.frontier.keys import FrontierKeys
from distcrawl.frontier.protocol.runner import Step, shard_call

__all__ = ["revisit_status"]


def revisit_status(keys: FrontierKeys, grace_s: float) -> Step[dict[str, Any]]:
    grace = int(grace_s * 1000)
    replies = yield [shard_call(keys, s, "revisit_status", grace=grace) for s in range(keys.shards)]
    scheduled = due = late = behind = 0
    nexts: list[int] = []
    for n, soon, next_in, behind_ms, queued in replies:
        scheduled += int(n)
        due += int(soon)
        late += int(queued)
        behind = max(behind, int(behind_ms))
        if text(next_in):
            nexts.append(int(float(text(next_in))))
    return {
        "scheduled": scheduled,
        "due_within_grace": due,
        "next_due_s": min(nexts) / 1000 if nexts else None,
        "behind_s": behind / 1000,
        "due_queued": late,
    }
