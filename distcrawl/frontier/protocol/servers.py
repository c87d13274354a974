"""Server budgets from Python: the grants of a server's shared budget (the sites of one IP
address share it across the cluster), and which server each site answers from."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import NamedTuple

from distcrawl.frontier.keys import ControlKeys
from distcrawl.frontier.protocol.runner import Step, control_call

__all__ = ["Grant", "ServerLimits", "note_servers", "take_server"]


class ServerLimits(NamedTuple):
    """A server's budget on all nodes together: requests in flight (0: none), requests/s (0:
    none) and the rate's burst."""

    concurrency: int
    rate: float
    burst: float


class Grant(NamedTuple):
    """What ``take_server`` answered for one server: grants given, and the ms until one may be
    due (-1: when one comes back; 0: none wanted or all given)."""

    granted: int
    due_ms: int


def take_server(
    keys: ControlKeys,
    node: str,
    *,
    timeout_ms: int,
    limits: ServerLimits,
    asks: Sequence[tuple[str, int, int]],
) -> Step[list[Grant]]:
    """Per server in ``asks`` (server, grants wanted, grants given back) the grants given."""
    flat: list[object] = []
    for server, want, done in asks:
        flat += [server, int(want), int(done)]
    call = control_call(
        keys,
        "take_server",
        node=node,
        timeout=int(timeout_ms),
        conc=int(limits.concurrency),
        rate=limits.rate,
        burst=limits.burst,
        grants=flat,
    )
    [raw] = yield [call]
    return [Grant(int(granted), int(due)) for granted, due in raw]


def note_servers(keys: ControlKeys, pairs: Iterable[tuple[str, str]]) -> Step[int]:
    """Record the server (IP address) each site answers from; returns how many changed."""
    flat = [value for pair in pairs for value in pair]
    [changed] = yield [control_call(keys, "note_servers", pairs=flat)]
    return int(changed)
