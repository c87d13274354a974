"""The crawl's error groups as operators read them (``errors``, the dashboard): every group with
its count, first and last seen, sample URLs and whether the snapshot of its first occurrence is
kept; one group with that snapshot (URL, status, headers, the first part of the body, the
error's text) from MongoDB."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from distcrawl.frontier.store import FrontierStore

if TYPE_CHECKING:
    from collections.abc import Sequence

    from distcrawl.frontier.keys import FrontierKeys
    from distcrawl.frontier.protocol.observe import ErrorGroup
    from distcrawl.storage.observe import ObserveStore

__all__ = ["AmbiguousGroup", "GroupNotFound", "Snapshot", "find_group", "list_groups"]


class GroupNotFound(LookupError):
    """No error group has that id (or id prefix)."""


class AmbiguousGroup(LookupError):
    """Several groups' ids start with the prefix given."""


@dataclass
class Snapshot:
    """The first occurrence of a group, as MongoDB keeps it."""

    url: str
    status: int | None
    headers: list[tuple[str, str]]
    body: bytes
    body_bytes: int
    truncated: bool
    error: str
    node: str
    at: str

    @classmethod
    def of(cls, doc: dict[str, Any]) -> Snapshot:
        at = doc.get("at")
        return cls(
            url=str(doc.get("url") or ""),
            status=doc.get("status"),
            headers=[(str(k), str(v)) for k, v in doc.get("headers") or ()],
            body=bytes(doc.get("body") or b""),
            body_bytes=int(doc.get("body_bytes") or 0),
            truncated=bool(doc.get("truncated")),
            error=str(doc.get("error") or ""),
            node=str(doc.get("node") or ""),
            at=at.isoformat() if isinstance(at, dt.datetime) else str(at or ""),
        )

    def text(self) -> str:
        """The body as text (UTF-8, anything else replaced)."""
        return self.body.decode("utf-8", "replace")

    def as_dict(self, *, body: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {
            "url": self.url,
            "status": self.status,
            "headers": [list(h) for h in self.headers],
            "body_bytes": self.body_bytes,
            "body_kept": len(self.body),
            "truncated": self.truncated,
            "error": self.error,
            "node": self.node,
            "at": self.at,
        }
        if body:
            out["body"] = self.text()
        return out


def _run_id(store: FrontierStore) -> str | None:
    run = store.read_run()
    return run.id if run is not None else None


def list_groups(
    client: Any,
    keys: FrontierKeys,
    *,
    mongo: ObserveStore | None,
    sites: Sequence[str] = (),
) -> dict[str, Any]:
    """Every group (of *sites*, when given), the most failures first, JSON-ready; with
    *mongo*, each says where its first occurrence was seen (``snapshot``)."""
    store = FrontierStore(client, keys)
    run = _run_id(store)
    groups = [g for g in store.error_groups() if not sites or g.site in sites]
    kept: dict[str, dict[str, Any]] = {}
    mongo_error = None
    if mongo is not None and run is not None and any(g.snapshot_node for g in groups):
        try:
            kept = mongo.snapshots(keys.spider, run)
        except Exception as exc:
            mongo_error = f"MongoDB: {exc}"
    rows = []
    for group in groups:
        row = group.as_dict()
        doc = kept.get(group.id)
        row["snapshot"] = Snapshot.of(doc).as_dict(body=False) if doc else None
        rows.append(row)
    return {"crawl": keys.spider, "run": run, "groups": rows, "mongo_error": mongo_error}


def find_group(
    client: Any, keys: FrontierKeys, wanted: str, *, mongo: ObserveStore | None
) -> tuple[ErrorGroup, Snapshot | None]:
    """The group whose id is *wanted* (or the one group whose id starts with it) and the
    snapshot of its first occurrence (None: none kept, or no MongoDB)."""
    store = FrontierStore(client, keys)
    groups = store.error_groups()
    found = [g for g in groups if g.id == wanted] or [g for g in groups if g.id.startswith(wanted)]
    if not found:
        raise GroupNotFound(f"crawl {keys.spider!r} has no error group {wanted!r}")
    if len(found) > 1:
        names = ", ".join(g.id for g in found[:5])
        raise AmbiguousGroup(f"{wanted!r} starts the ids of {len(found)} groups: {names}")
    group = found[0]
    run = _run_id(store)
    if mongo is None or run is None or not group.snapshot_node:
        return group, None
    doc = mongo.snapshot(keys.spider, run, group.id)
    return group, Snapshot.of(doc) if doc else None
