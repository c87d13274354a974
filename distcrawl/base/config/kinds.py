"""The kinds of value a setting holds: how a value given as text (``-s``, the environment) or
as Python (settings.py, ``custom_settings``) is read, and how it is shown."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from distcrawl.base.durations import parse_duration, parse_intervals
from distcrawl.base.urls import parse_allow_private

__all__ = [
    "BOOL",
    "DICT",
    "DURATION",
    "FLOAT",
    "HOSTS",
    "INT",
    "INTERVALS",
    "LIST",
    "PATHS",
    "STR",
    "Kind",
    "show_duration",
]

_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off", ""})


@dataclass(frozen=True)
class Kind:
    """A kind of value: its name in the settings reference, how a value is read (raising
    ValueError with the reason), and how a read value is shown."""

    name: str
    read: Callable[[Any], Any]
    show: Callable[[Any], str]

    def __repr__(self) -> str:
        return f"<Kind {self.name}>"


def _bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValueError(f"{value!r} is not a boolean (1/0, true/false, yes/no, on/off)")


def _int(value: Any) -> int:
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not an integer")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    text = str(value).strip().replace("_", "")
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"{value!r} is not an integer") from None


def _float(value: Any) -> float:
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a number")
    try:
        return float(str(value).strip()) if isinstance(value, str) else float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{value!r} is not a number") from None


def _str(value: Any) -> str:
    return "" if value is None else str(value)


def _list(value: Any) -> list[Any]:
    """A list, or text: a JSON list, else comma-separated entries."""
    if isinstance(value, (list, tuple, set, frozenset)):
        return list(value)
    text = str(value or "").strip()
    if text.startswith("["):
        try:
            parsed = json.loads(text)
        except ValueError as exc:
            raise ValueError(f"{value!r} is not a JSON list: {exc}") from None
        if isinstance(parsed, list):
            return parsed
    return [part.strip() for part in text.split(",") if part.strip()]


def _plain(value: Any) -> Any:
    """Mappings (Scrapy's BaseSettings too) as plain dicts, all the way down."""
    if isinstance(value, Mapping):
        return {str(k): _plain(value[k]) for k in value}
    return value


def _dict(value: Any) -> dict[str, Any]:
    """A mapping, or text holding a JSON object (empty text: an empty mapping)."""
    if isinstance(value, Mapping):
        plain: dict[str, Any] = _plain(value)
        return plain
    text = str(value or "").strip()
    if not text:
        return {}
    try:
        parsed = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"{value!r} is not a JSON object: {exc}") from None
    if not isinstance(parsed, dict):
        raise ValueError(f"{value!r} is not a JSON object")
    return parsed


def _duration(value: Any) -> float:
    """Seconds: a number, or ``90s``, ``15m``, ``6h``, ``1d``, ``2w``; 0 is allowed."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value == 0:
        return 0.0
    if isinstance(value, str) and value.strip() in ("0", "0s", ""):
        return 0.0
    return parse_duration(value, "")


def _intervals(value: Any) -> dict[str, float]:
    return parse_intervals(value, "")


def _hosts(value: Any) -> bool | frozenset[str]:
    return parse_allow_private(value)


def _paths(value: Any) -> list[str]:
    """Paths: a list, or one string whose entries are separated by ``,`` or ``:``."""
    items = value if isinstance(value, (list, tuple)) else [value or ""]
    return [p.strip() for item in items for p in re.split(r"[,:]", str(item)) if p.strip()]


_UNITS = (("w", 604800), ("d", 86400), ("h", 3600), ("m", 60))


def show_duration(seconds: float) -> str:
    """``21600.0`` as ``6h``: the largest unit that divides it, else seconds."""
    for unit, size in _UNITS:
        if seconds >= size and float(seconds) % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"


def _show_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def _show_hosts(value: bool | frozenset[str]) -> str:
    if isinstance(value, bool):
        return "1" if value else ""
    return ",".join(sorted(value))


BOOL = Kind("bool", _bool, lambda v: "1" if v else "0")
INT = Kind("int", _int, str)
FLOAT = Kind("float", _float, lambda v: f"{v:g}")
STR = Kind("str", _str, str)
LIST = Kind("list", _list, lambda v: ",".join(str(x) for x in v))
DICT = Kind("dict", _dict, _show_json)
DURATION = Kind("duration", _duration, show_duration)
INTERVALS = Kind(
    "intervals",
    _intervals,
    lambda v: ",".join(f"{k}:{show_duration(s)}" for k, s in sorted(v.items())),
)
HOSTS = Kind("hosts", _hosts, _show_hosts)
PATHS = Kind("paths", _paths, lambda v: ",".join(v))
