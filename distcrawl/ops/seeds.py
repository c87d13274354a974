"""Seeds from an operator: checked exactly as the nodes will check them, the good ones pushed
to the crawl's start list, each refused one with its reason."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from distcrawl.node.seeds.parse import BadSeed, parse_seed, refusal_hint

if TYPE_CHECKING:
    from distcrawl.frontier.keys import FrontierKeys

__all__ = ["Checked", "check", "prepare", "push", "refusal_hint"]

#: seeds pushed per LPUSH
_PUSH_BATCH = 1000


def prepare(raw: str, priority: int | None, meta: dict[str, Any] | None) -> str:
    """The seed to push: *raw* as given, or a JSON seed carrying *priority* and *meta* (a JSON
    seed's own keys win)."""
    raw = raw.strip()
    if priority is None and meta is None:
        return raw
    extra: dict[str, Any] = {}
    if priority is not None:
        extra["priority"] = priority
    if meta is not None:
        extra["meta"] = meta
    if raw.startswith("{"):
        try:
            data = json.loads(raw)
        except ValueError:
            return raw  # the check says why
        if not isinstance(data, dict):
            return raw
        return json.dumps({**extra, **data}, separators=(",", ":"))
    return json.dumps({"url": raw, **extra}, separators=(",", ":"))


@dataclass
class Checked:
    """Seeds as pushed that the nodes will take, and the refused ones:
    ``{seed (as given), reason, error}``."""

    accepted: list[str] = field(default_factory=list)
    refused: list[dict[str, str]] = field(default_factory=list)


def check(seeds: Iterable[tuple[str, str]], *, allow: bool | frozenset[str]) -> Checked:
    """Check ``(as given, as pushed)`` seeds with the nodes' own check
    (``DISTCRAWL_ALLOW_PRIVATE`` as *allow*)."""
    out = Checked()
    for given, raw in seeds:
        try:
            parse_seed(raw, allow_private=allow)
        except BadSeed as exc:
            out.refused.append({"seed": given[:300], "reason": exc.reason, "error": str(exc)})
            continue
        out.accepted.append(raw)
    return out


def push(client: Any, keys: FrontierKeys, seeds: Sequence[str]) -> int:
    """Push *seeds* to the start list in order: the nodes take from the other end, so the
    first given is the first taken. Returns how many were pushed."""
    for i in range(0, len(seeds), _PUSH_BATCH):
        client.lpush(keys.start_urls, *seeds[i : i + _PUSH_BATCH])
    return len(seeds)
