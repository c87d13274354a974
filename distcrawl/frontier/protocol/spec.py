"""What each command of the frontier's Lua library takes: its slot, its arguments by name, and,
for the commands that take batches of records, a JSON header (fields with their defaults) and
sections of records. Declared once, here: the library reads them from its generated include
``protocol`` (:func:`lua_protocol`), and :meth:`CommandSpec.encode` writes a call's arguments
in the order they declare."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from distcrawl.base.names.status import RETRY_AFTER_HOLD
from distcrawl.frontier.batch import SiteBudget
from distcrawl.frontier.keys import (
    SITE_CUT_CAUSE_FIELD,
    SITE_DELAY_SOURCE_FIELD,
    SITE_HOLD_CAUSE_FIELD,
    STATUS_LEASES_FIELD,
    STATUS_WAITING_FIELD,
)
from distcrawl.frontier.schema import CONTROL, SEEDS, SHARD

__all__ = [
    "COMMANDS",
    "FORMAT",
    "LEVELS_READ",
    "LEVELS_TOLD",
    "SCORE_SPAN",
    "TOMBSTONE",
    "CommandSpec",
    "Section",
    "level_of",
    "level_score",
    "lua_protocol",
    "queued_in",
]

#: the version of the frontier's format (the keys, the values and the library's arguments): the
#: first node of a crawl writes it into the crawl's keys, and a node or operator command of
#: another version refuses to open the crawl
FORMAT = 3
#: a request's order score is -priority * SCORE_SPAN + seq (seq < SCORE_SPAN): higher priority
#: first, then first in first out (a site's waiting room); a priority level's score in a shard's
#: ``levels`` is -priority * SCORE_SPAN + the requests its queue holds
SCORE_SPAN = 10_000_000_000
#: the best priority levels of its queue a ``sync`` call reads (more are served by later calls)
LEVELS_READ = 16
#: the best priority levels of its queue a ``sync`` reply tells, each with its count
LEVELS_TOLD = 4
#: how a recovery's tombstone starts: the mark of a node presumed dead, in every shard
TOMBSTONE = "!"


def level_score(priority: int, count: int) -> int:
    """The score of a priority level holding ``count`` requests in a shard's ``levels``."""
    return -priority * SCORE_SPAN + count


def level_of(score: float) -> tuple[int, int]:
    """The priority and count of a level's score in ``levels``."""
    priority = -int(score // SCORE_SPAN)
    return priority, int(score) + priority * SCORE_SPAN


def queued_in(levels: Iterable[tuple[Any, float]]) -> int:
    """The requests a shard's queue holds, from its ``levels`` read with their scores."""
    return sum(level_of(score)[1] for _, score in levels)


@dataclass(frozen=True)
class Section:
    """Records of one kind in a call: ``fields`` per record, sent column by column."""

    name: str
    fields: tuple[str, ...]


@dataclass(frozen=True)
class CommandSpec:
    """A command of the library: its slot (KEYS[1] is that slot's prefix; with ``start_list``,
    KEYS[2] is the seed list, in the seed slot's commands), its arguments in order (a last ``*name``
    takes a list, the rest), and for a command that takes a header, the header's defaults and its
    sections."""

    name: str
    slot: str
    args: tuple[str, ...]
    start_list: bool = False
    header: Mapping[str, Any] = field(default_factory=dict)
    #: header fields without a default (left out, the library reads nil)
    optional: tuple[str, ...] = ()
    sections: tuple[Section, ...] = ()

    def encode(self, **values: Any) -> list[Any]:
        """The arguments, in order, from their values by name (a ``*name`` one: an iterable)."""
        if values.keys() != {a.lstrip("*") for a in self.args}:
            raise TypeError(f"{self.name} takes {', '.join(self.args)}, not {', '.join(values)}")
        out: list[Any] = []
        for name in self.args:
            if name.startswith("*"):
                out += values[name[1:]]
            else:
                out.append(values[name])
        return out

    def encode_header(self, header: Mapping[str, Any]) -> str:
        """The header as JSON, without the fields that have their default value (the library
        reads those from the same defaults)."""
        unknown = header.keys() - self.header.keys() - set(self.optional)
        if unknown:
            raise TypeError(f"{self.name}'s header has no field {', '.join(sorted(unknown))}")
        sent = {k: v for k, v in header.items() if v is not None and self.header.get(k, _NONE) != v}
        return json.dumps(sent, separators=(",", ":"))

    def encode_sections(self, rows: Mapping[str, Sequence[Sequence[Any]]]) -> list[Any]:
        """The sections' records column by column, in the order the sections are declared
        (``rows``: each section's records by name, a record's fields in declared order)."""
        out: list[Any] = []
        for section in self.sections:
            records = rows.get(section.name, ())
            for i in range(len(section.fields)):
                out += [r[i] for r in records]
        return out


_NONE = object()

#: the budget defaults a node sends when it has no settings (SiteBudget's)
_BUDGET = SiteBudget()

SYNC = CommandSpec(
    "sync",
    SHARD,
    ("node", "header"),
    header={
        "children": 0,
        "acks": 0,
        "dead": 0,
        "feedback": 0,
        "revisits": 0,
        "groups": 0,
        "grouped": 0,
        "lease": 0,
        "extra": 0,
        "read": 0,
        "flagged": 0,
        "live": 1,
        "idle": 0,
        "wake": "",
        "shard": 0,
        "paused": 0,
        "rate": _BUDGET.rate,
        "conc": _BUDGET.concurrency,
        "burst": _BUDGET.burst,
        "adaptive": _BUDGET.adaptive_rate,
        "recover": int(_BUDGET.recovery * 1000),
        "mp": "",
        "mn": "",
        "tag": "",
    },
    optional=("above", "floor", "bloom", "rv", "ls", "order"),
    sections=(
        Section("children", ("fp", "h", "spec", "payload")),
        Section("acks", ("rid", "site")),
        Section("dead", ("id", "record", "site", "rid")),
        Section("feedback", ("site", "ok", "throttled", "slow", "newest", "hold")),
        Section("revisits", ("rid", "site", "interval", "payload", "fp", "h")),
        Section("groups", ("bucket", "size")),
        Section("grouped", ("fp", "spec", "payload")),
    ),
)

MARK_SEEN = CommandSpec(
    "mark_seen",
    SHARD,
    ("header",),
    header={"fingerprints": 0},
    optional=("bloom", "rv"),
    sections=(Section("fingerprints", ("fp", "h")),),
)

COMMANDS: dict[str, CommandSpec] = {
    spec.name: spec
    for spec in (
        SYNC,
        MARK_SEEN,
        CommandSpec("take_token", SHARD, ("site", "rate", "burst", "debt")),
        CommandSpec("set_site_robots", SHARD, ("site", "delay", "source", "hold", "why")),
        CommandSpec("set_site_limits", SHARD, ("site", "rate", "conc")),
        CommandSpec("release", SHARD, ("node", "wake", "shard", "mark", "*rids")),
        CommandSpec("release_dead", SHARD, ("node", "wake", "shard", "tombstone")),
        CommandSpec("drained", SHARD, ("*nodes",)),
        CommandSpec("revisit_status", SHARD, ("grace",)),
        CommandSpec("requeue_dead", SHARD, ("max", "tag", "*ids")),
        CommandSpec("heartbeat", CONTROL, ("node", "info", "idle")),
        CommandSpec("reject", CONTROL, ("*records",)),
        CommandSpec("stop", CONTROL, ("node",)),
        CommandSpec("rejoin", CONTROL, ("node",)),
        CommandSpec("recover", CONTROL, ("node", "timeout")),
        CommandSpec("claim", CONTROL, ("node", "owner", "timeout", "force")),
        CommandSpec("recovered", CONTROL, ("*nodes",)),
        CommandSpec("census", CONTROL, ()),
        CommandSpec("observe", CONTROL, ("node", "groups_max", "snaps_max", "window", "delta")),
        CommandSpec("notice", CONTROL, ("event", "record", "rate")),
        CommandSpec("run", CONTROL, ("id", "node")),
        CommandSpec(
            "take_server", CONTROL, ("node", "timeout", "conc", "rate", "burst", "*grants")
        ),
        CommandSpec("note_servers", CONTROL, ("*pairs",)),
        CommandSpec("take_seeds", SEEDS, ("node", "n"), start_list=True),
        CommandSpec("staged", SEEDS, ("node",)),
        CommandSpec("give_back", SEEDS, ("*nodes",)),
        CommandSpec("seed_census", SEEDS, ("*nodes",), start_list=True),
    )
}


def _lua(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(int(value)) if float(value).is_integer() else repr(float(value))
    if isinstance(value, str):
        if "'" in value or "\\" in value or "\n" in value:
            raise ValueError(f"no quotes in the protocol's strings: {value!r}")
        return f"'{value}'"
    raise TypeError(f"no Lua form for {value!r}")


def _list(items: Iterable[str]) -> str:
    return "{" + ", ".join(items) + "}"


def lua_protocol() -> str:
    """The Lua include ``protocol``: the constants above and, per command, ARGS.<name> (its
    argument names), HEADERS.<name> (a metatable whose __index holds the header's defaults)
    and SECTIONS.<name> (each section's name, fields, and its empty form: no records, read
    by every call that has none)."""
    lines = [
        "-- The protocol's constants and each command's arguments, generated from",
        "-- distcrawl/frontier/protocol/spec.py when the library is assembled.",
        f"local SCORE_SPAN = {_lua(SCORE_SPAN)}",
        f"local LEVELS_READ = {_lua(LEVELS_READ)}",
        f"local LEVELS_TOLD = {_lua(LEVELS_TOLD)}",
        f"local FORMAT = {_lua(str(FORMAT))}",
        f"local TOMBSTONE = {_lua(TOMBSTONE)}",
        f"local STATUS_LEASES = {_lua(STATUS_LEASES_FIELD)}",
        f"local STATUS_WAITING = {_lua(STATUS_WAITING_FIELD)}",
        f"local CUT_CAUSE = {_lua(SITE_CUT_CAUSE_FIELD)}",
        f"local DELAY_SOURCE = {_lua(SITE_DELAY_SOURCE_FIELD)}",
        f"local HOLD_CAUSE = {_lua(SITE_HOLD_CAUSE_FIELD)}",
        f"local RETRY_AFTER_HOLD = {_lua(RETRY_AFTER_HOLD)}",
        "local ARGS, HEADERS, SECTIONS = {}, {}, {}",
    ]
    for spec in COMMANDS.values():
        lines.append(f"ARGS.{spec.name} = {_list(_lua(a) for a in spec.args)}")
        if spec.header:
            lines.append(f"HEADERS.{spec.name} = {{__index = {{")
            lines += [f"  {k} = {_lua(v)}," for k, v in spec.header.items()]
            lines.append("}}")
        if spec.sections:
            lines.append(f"SECTIONS.{spec.name} = {{")
            for s in spec.sections:
                fields = _list(_lua(f) for f in s.fields)
                empty = _list(["n = 0", *(f"{f} = {{}}" for f in s.fields)])
                lines += [
                    f"  {{name = {_lua(s.name)}, fields = {fields},",
                    f"    empty = {empty}}},",
                ]
            lines.append("}")
    return "\n".join(lines) + "\n"
