"""What a failed Redis call means to a node: an outage it waits out, or an error waiting will not
mend (a bug, a reply it cannot read). Decided in one place, :func:`classify`, by the class of the
error: the first word of Redis' error reply (``MISCONF``, ``NOAUTH`` ...), else the client's
exception class (a server out of reach).

An outage is a Redis out of reach, and a Redis that answers but cannot serve the frontier's
writes now, whatever the cause: out of memory, a failed save, a read-only replica, a password
or an ACL that changed. :data:`OUTAGE_REPLIES` lists those reply classes; the docs' table of
them is rendered from it.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

import redis
from redis import exceptions as rex

from distcrawl.base.config import PLANTED_BUG

__all__ = ["OUTAGE_REPLIES", "UNREACHABLE", "Outage", "classify", "error_code"]


@dataclass(frozen=True)
class Outage:
    """Why Redis cannot serve the frontier now. ``code`` is the error reply's class (its first
    word), or ``unreachable`` for a server out of reach; ``reason`` what it means; ``advice``
    what an operator can do about it (empty: wait, it passes by itself)."""

    code: str
    reason: str
    advice: str = ""

    def __str__(self) -> str:
        return self.reason if self.code == self.reason else f"{self.code}, {self.reason}"


#: a server out of reach: refused, reset, timed out, closed under a command
UNREACHABLE = Outage("unreachable", "unreachable")

_AUTH_ADVICE = "check the user and password in REDIS_URL against the server's (ACL GETUSER)"

#: the error replies of a Redis that is there but cannot serve the frontier now, by their class
#: (the reply's first word): a node waits them out as it waits for a server out of reach
OUTAGE_REPLIES: dict[str, Outage] = {
    o.code: o
    for o in (
        Outage("OOM", "out of memory", "free memory or raise maxmemory"),
        Outage("BUSY", "busy running a script", "SCRIPT KILL ends a script that wrote nothing"),
        Outage("LOADING", "loading its data"),
        Outage(
            "READONLY",
            "a read-only replica",
            "REDIS_URL names a replica (a failover?): promote it, or name the master",
        ),
        Outage("MASTERDOWN", "its master is down"),
        Outage("CLUSTERDOWN", "the cluster is down"),
        Outage("TRYAGAIN", "a slot is moving"),
        Outage("NOREPLICAS", "not enough replicas (min-replicas-to-write)"),
        Outage(
            "MISCONF",
            "cannot save to disk and stops writes",
            "see the Redis server's log (a full disk?); writes resume once a save succeeds",
        ),
        Outage(
            "NOAUTH", "asks for a password the node does not give (a password set?)", _AUTH_ADVICE
        ),
        Outage(
            "WRONGPASS",
            "refuses the node's user or password (a password rotated, an ACL changed?)",
            _AUTH_ADVICE,
        ),
        Outage(
            "NOPERM",
            "refuses the node a command or key by its ACL (an ACL changed?)",
            "grant the node's user the frontier's commands and keys (ACL GETUSER)",
        ),
    )
}

#: redis-py's classes of error replies, for a client that does not keep the reply's first word
#: (``status_code``) and strips it from the message
_REPLY_CLASSES: tuple[tuple[type[Exception], str], ...] = (
    (rex.OutOfMemoryError, "OOM"),
    (rex.BusyLoadingError, "LOADING"),
    (rex.ReadOnlyError, "READONLY"),
    (rex.MasterDownError, "MASTERDOWN"),
    (rex.ClusterDownError, "CLUSTERDOWN"),
    (rex.SlotNotCoveredError, "CLUSTERDOWN"),
    (rex.TryAgainError, "TRYAGAIN"),
    (rex.NoPermissionError, "NOPERM"),
    (rex.AuthenticationError, "WRONGPASS"),
    (rex.NoScriptError, "NOSCRIPT"),
    (rex.ExecAbortError, "EXECABORT"),
    (rex.ClusterCrossSlotError, "CROSSSLOT"),
    (rex.MovedError, "MOVED"),
    (rex.AskError, "ASK"),
)
#: a pipeline's note in front of the reply ("Command # 2 (EVALSHA ...) of pipeline caused error: ")
_PIPELINE_NOTE = re.compile(r"^Command # \d+ \(.*?\) of pipeline caused error: ", re.DOTALL)
#: the class of an error a script met, inside the ERR of a Redis before 7 ("...: -OOM command")
_IN_SCRIPT = re.compile(r": -([A-Z][A-Z0-9_]*) ")
_CODE = re.compile(r"[A-Z][A-Z0-9_]*")


def error_code(exc: BaseException) -> str | None:
    """The class of the error reply *exc* carries (``MISCONF``, ``NOPERM``), or None for an
    exception that is no error reply of Redis."""
    code = getattr(exc, "status_code", None)
    if isinstance(code, str) and code and code != "ERR":
        return code.upper()
    for cls, word in _REPLY_CLASSES:
        if isinstance(exc, cls):
            return word
    if not isinstance(exc, rex.ResponseError):
        return code if isinstance(code, str) and code else None
    text = _PIPELINE_NOTE.sub("", str(exc), count=1)
    word = text.split(" ", 1)[0]
    if word == "ERR" or code == "ERR":
        inner = _IN_SCRIPT.search(text)
        return inner.group(1) if inner else "ERR"
    return word if _CODE.fullmatch(word) else None


#: the bug a test plants to show that the fault search finds one (see PLANTED_BUG): read once
_PLANTED_BUG = os.environ.get(PLANTED_BUG, "")


def classify(exc: BaseException) -> Outage | None:
    """The outage *exc* means, or None for an error that waiting will not mend (a bug, a reply
    the node cannot read, an error reply of another class)."""
    code = error_code(exc)
    if code == "MISCONF" and _PLANTED_BUG == "misconf":
        return None
    if code is not None and code in OUTAGE_REPLIES:
        return OUTAGE_REPLIES[code]
    if isinstance(exc, (redis.ConnectionError, redis.TimeoutError, OSError)):
        return UNREACHABLE
    if isinstance(exc, rex.RedisClusterUnreachableError):
        return UNREACHABLE
    return None
