"""The faults of :mod:`distcrawl.servers.faultproxy`: what a fault does (:data:`KINDS`), the
classes of error replies it answers with (:data:`ERRORS`), and which commands it picks
(:class:`Fault`: by pattern, or by scope: :data:`ALL`, :data:`DATA`, :data:`WRITES`)."""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field

from distcrawl.servers.resp import error_reply

__all__ = ["ALL", "DATA", "ERRORS", "KINDS", "READ_COMMANDS", "SERVER_COMMANDS", "WRITES", "Fault"]

#: a fault's scope: every command
ALL = "all"
#: a fault's scope: every command but those of the connection and the server
#: (:data:`SERVER_COMMANDS`), which a loading, busy or cut-off server still serves
DATA = "data"
#: a fault's scope: every command but :data:`READ_COMMANDS`
WRITES = "writes"
#: what a fault does to a command it picks
KINDS = ("error", "drop", "cut", "delay", "stall")

#: error replies by class: the text Redis (or valkey) answers, and the commands it refuses
#: with it. ``UNKNOWN`` is a class no client knows.
ERRORS: dict[str, tuple[str, str]] = {
    "LOADING": ("LOADING Redis is loading the dataset in memory", DATA),
    "BUSY": (
        "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.",
        DATA,
    ),
    "OOM": ("OOM command not allowed when used memory > 'maxmemory'.", WRITES),
    "MISCONF": (
        "MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist "
        "to disk. Commands that may modify the data set are disabled, because this instance is "
        "configured to report errors during writes if RDB snapshotting fails "
        "(stop-writes-on-bgsave-error option). Please check the Redis logs for details about "
        "the RDB error.",
        WRITES,
    ),
    "READONLY": ("READONLY You can't write against a read only replica.", WRITES),
    "NOAUTH": ("NOAUTH Authentication required.", ALL),
    "WRONGPASS": ("WRONGPASS invalid username-password pair or user is disabled.", ALL),
    "NOPERM": ("NOPERM User default has no permissions to run the '{command}' command", WRITES),
    "MASTERDOWN": (
        "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.",
        DATA,
    ),
    "CLUSTERDOWN": ("CLUSTERDOWN The cluster is down", DATA),
    "TRYAGAIN": ("TRYAGAIN Multiple keys request during rehashing of slot", WRITES),
    "UNKNOWN": ("FAULTPROXY an error reply of a class no client knows", DATA),
}

#: commands that neither write nor run a script that may write: what Redis still serves when
#: it refuses writes (``MISCONF`` refuses PING too, as Redis does)
READ_COMMANDS = frozenset(
    str.split("""
    GET MGET STRLEN GETRANGE EXISTS TYPE TTL PTTL EXPIRETIME PEXPIRETIME DBSIZE KEYS SCAN RANDOMKEY
    HGET HMGET HGETALL HKEYS HVALS HLEN HEXISTS HSCAN HSTRLEN HRANDFIELD
    LLEN LRANGE LINDEX LPOS SCARD SISMEMBER SMISMEMBER SMEMBERS SSCAN SRANDMEMBER SINTER SUNION
    SDIFF ZCARD ZCOUNT ZRANGE ZRANGEBYSCORE ZREVRANGE ZREVRANGEBYSCORE ZRANK ZREVRANK ZSCORE
    ZMSCORE ZSCAN ZLEXCOUNT ZRANGEBYLEX ZRANDMEMBER BITCOUNT GETBIT BITPOS PFCOUNT XLEN XRANGE
    INFO TIME MEMORY CLIENT CONFIG COMMAND HELLO AUTH SELECT ECHO PING LASTSAVE ROLE SLOWLOG
    LATENCY OBJECT DEBUG WAIT WAITAOF EVAL_RO EVALSHA_RO FCALL_RO SCRIPT FUNCTION CLUSTER
    READONLY READWRITE ASKING SUBSCRIBE PSUBSCRIBE SSUBSCRIBE UNSUBSCRIBE PUNSUBSCRIBE
    SUNSUBSCRIBE PUBSUB PUBLISH SPUBLISH WATCH UNWATCH MULTI EXEC DISCARD QUIT RESET
    """)
)
#: commands of the connection and the server, served whatever the data's state
SERVER_COMMANDS = frozenset(
    str.split("HELLO AUTH CLIENT SELECT INFO CLUSTER COMMAND CONFIG READONLY READWRITE ASKING QUIT")
)
#: commands refused with MISCONF although they write nothing
_MISCONF_TOO = frozenset({"PING"})
#: commands no error fault answers: a transaction's frame and the connection's end (the
#: commands inside a transaction are answered, and its EXEC fails as Redis' would)
_EXEMPT = frozenset({"MULTI", "EXEC", "DISCARD", "QUIT", "RESET"})


@dataclass(eq=False)
class Fault:
    """What to do to the commands a fault picks (see the module's docstring)."""

    kind: str
    #: the error class of an ``error`` fault (a key of :data:`ERRORS`), or several separated
    #: by commas: each command it picks gets one of them (at random) whose scope covers it
    error: str = ""
    #: shell patterns on "NAME" and "NAME ARG1" (names in capitals); empty: ``scope`` decides
    match: tuple[str, ...] = ()
    #: ``all``, ``data`` or ``writes``; empty: the error class's own, or ``all``
    scope: str = ""
    #: ``delay``: how long; ``stall``: how long at most (0: until the fault is removed)
    seconds: float = 0.0
    #: how many commands it picks before it is spent (None: until removed)
    count: int | None = None
    #: the chance that a command it matches is picked
    probability: float = 1.0
    #: commands it picked so far
    hits: int = field(default=0, init=False)
    removed: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"fault kind {self.kind!r}: one of {', '.join(KINDS)}")
        if self.kind == "error" and not all(c in ERRORS for c in self.classes):
            raise ValueError(f"error class {self.error!r}: one of {', '.join(ERRORS)}")
        if self.scope not in ("", ALL, DATA, WRITES):
            raise ValueError(f"fault scope {self.scope!r}: {ALL}, {DATA} or {WRITES}")

    @property
    def classes(self) -> tuple[str, ...]:
        """The error classes of an ``error`` fault."""
        return tuple(c.strip() for c in self.error.split(",")) if self.error else ()

    def scope_of(self, error: str = "") -> str:
        """The commands it picks: its own scope, else that of the error class ``error``."""
        if self.scope:
            return self.scope
        return ERRORS[error][1] if error else ALL

    def matches(self, name: str, arg: str, error: str = "") -> bool:
        """Whether it may pick this command (answering it with the class ``error``)."""
        if self.kind == "error" and name in _EXEMPT:
            return False
        if self.match:
            call = f"{name} {arg}"
            return any(fnmatch.fnmatchcase(w, p) for p in self.match for w in (name, call))
        scope = self.scope_of(error)
        if scope == ALL:
            return True
        if scope == DATA:
            return name not in SERVER_COMMANDS
        if error == "MISCONF" and name in _MISCONF_TOO:
            return True
        return name not in READ_COMMANDS

    def reply(self, name: str, error: str) -> bytes:
        """The error reply of the class ``error`` to the command ``name``."""
        return error_reply(ERRORS[error][0].format(command=name.lower()))

    def describe(self) -> str:
        what = self.error if self.kind == "error" else self.kind
        if self.kind in ("delay", "stall") and self.seconds:
            what += f" {self.seconds:g}s"
        classes = self.classes
        scopes = {self.scope_of(c) for c in classes} if classes else {self.scope_of()}
        scope = ",".join(self.match) if self.match else "/".join(sorted(scopes))
        count = f" x{self.count}" if self.count is not None else ""
        chance = f" p={self.probability:g}" if self.probability < 1 else ""
        return f"{what} on {scope}{count}{chance}"
