"""Failures grouped by what they have in common: a site, a kind and a message template.

A message's template replaces what varies from one occurrence to the next (URLs, quoted
values, ids and numbers) by placeholders, so that ``Timeout after 3012 ms on
https://shop.example/p/1`` and ``Timeout after 30 ms on https://shop.example/p/2`` are one
template, ``Timeout after <n> ms on <url>``. An exception's template starts with its class name
and says where it was raised (file, function and line): two exceptions of different classes,
or raised in different places, are never one group.
"""

from __future__ import annotations

import hashlib
import re
import traceback
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from types import TracebackType

__all__ = [
    "MAX_TEMPLATE",
    "OTHER_TEMPLATE",
    "Failure",
    "exception_template",
    "group_id",
    "template",
]

#: characters of a template kept (a longer message is cut, after its variable parts went)
MAX_TEMPLATE = 200
#: the template a failure is counted under once a crawl holds its most groups
OTHER_TEMPLATE = "other failures (the crawl's error groups are full)"

#: what varies in messages, replaced in this order (a URL holds numbers; a quoted value may
#: hold a URL)
_PATTERNS = (
    (re.compile(r"\b[a-z][a-z0-9+.-]*://[^\s'\"<>()]+", re.I), "<url>"),
    (re.compile(r"'[^'\n]{0,200}'|\"[^\"\n]{0,200}\"|`[^`\n]{0,200}`"), "<value>"),
    (re.compile(r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b"), "<email>"),
    (
        re.compile(
            r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"
            r"|\b(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{8,}\b"
            r"|\b0x[0-9a-f]+\b",
            re.I,
        ),
        "<id>",
    ),
    (re.compile(r"\d+(?:[.,]\d+)*"), "<n>"),
)
_SPACES = re.compile(r"\s+")


def template(message: str) -> str:
    """*message* with its URLs, quoted values, e-mail addresses, ids (hex of 8 digits or more,
    UUIDs, 0x...) and numbers replaced by ``<url>``, ``<value>``, ``<email>``, ``<id>`` and
    ``<n>``, its white space folded, cut to :data:`MAX_TEMPLATE` characters."""
    text = message[: MAX_TEMPLATE * 20]
    for pattern, placeholder in _PATTERNS:
        text = pattern.sub(placeholder, text)
    text = _SPACES.sub(" ", text).strip()
    if len(text) > MAX_TEMPLATE:
        text = text[: MAX_TEMPLATE - 1] + "…"
    return text or "(no message)"


def _location(tb: TracebackType | None) -> str:
    """Where an exception was raised: the innermost frame's file (its name), function and
    line; "" without a traceback."""
    frames = traceback.extract_tb(tb) if tb is not None else []
    if not frames:
        return ""
    frame = frames[-1]
    name = frame.filename.replace("\\", "/").rpartition("/")[2]
    return f"{name}:{frame.lineno} in {frame.name}"


def exception_template(exc: BaseException, *, where: bool = True) -> str:
    """The template of an exception: ``ClassName: <its message's template>``, and with
    *where*, `` at file.py:LINE in function`` (its innermost frame)."""
    text = f"{type(exc).__name__}: {template(str(exc))}"
    location = _location(exc.__traceback__) if where else ""
    return f"{text} at {location}" if location else text


def group_id(site: str, kind: str, text: str) -> str:
    """The id of the group of (*site*, *kind*, *text*): 16 hex digits, the same on every
    node."""
    key = "\x1f".join((site, kind, text)).encode("utf-8", "surrogateescape")
    return hashlib.blake2b(key, digest_size=8, person=b"distcrawl-error").hexdigest()


@dataclass(frozen=True, slots=True)
class Failure:
    """One failure as it is grouped: its site, kind and template, and its group's id."""

    site: str
    kind: str
    template: str

    @property
    def group(self) -> str:
        return group_id(self.site, self.kind, self.template)
