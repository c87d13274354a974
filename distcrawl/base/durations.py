"""Durations and intervals as people write them: ``90s``, ``15m``, ``6h``, ``1d``, ``2w``."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["parse_duration", "parse_intervals", "short_duration"]

_UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
_DURATION = re.compile(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*([smhdw]?)\s*", re.IGNORECASE)


def short_duration(seconds: float | None) -> str:
    """``4.2s``, ``42s``, ``6m40s``, ``2h05m``, ``3d`` (``unknown`` for None), as the status
    and the dashboard write durations."""
    if seconds is None:
        return "unknown"
    if seconds < 10:
        return f"{seconds:.1f}s"
    whole = int(seconds)
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    if whole < 86400:
        return f"{whole // 3600}h{whole % 3600 // 60:02d}m"
    return f"{whole // 86400}d"


def parse_duration(value: Any, what: str = "duration") -> float:
    """Seconds from ``90``, ``90s``, ``15m``, ``6h``, ``1d``, ``2w`` (or a number)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = float(value)
    else:
        match = _DURATION.fullmatch(str(value))
        if not match:
            raise ValueError(f"{what}: {value!r} is not a duration (e.g. 90s, 15m, 6h, 1d)")
        seconds = float(match.group(1)) * _UNITS[match.group(2).lower()]
    if not seconds > 0:
        raise ValueError(f"{what}: {value!r} must be longer than 0")
    return seconds


def parse_intervals(value: Any, what: str = "DISTCRAWL_REVISIT") -> dict[str, float]:
    """``{page kind: seconds}`` from ``product:6h,listing:1h,category:1d`` (or a mapping);
    ``*`` names every other kind, ``gone`` the pages that answered 404/410."""
    if not value:
        return {}
    items: Iterable[tuple[Any, Any]]
    if isinstance(value, Mapping):
        items = value.items()
    else:
        pairs = []
        for part in str(value).split(","):
            if not part.strip():
                continue
            kind, sep, duration = part.partition(":")
            if not sep or not kind.strip():
                raise ValueError(f"{what}: {part.strip()!r} is not kind:interval (e.g. product:6h)")
            pairs.append((kind, duration))
        items = pairs
    out: dict[str, float] = {}
    for kind, duration in items:
        name = str(kind).strip()
        out[name] = parse_duration(duration, f"{what} {name}")
    return out
