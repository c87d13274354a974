"""Calls into the frontier's Lua library, pipelined, on a synchronous or an asyncio client.

A *step* is a generator that yields lists of :class:`Call` (one pipelined round trip each) and
receives their results; :meth:`Runner.drive` runs it on the client and returns its value (an
awaitable with ``redis.asyncio``). Library commands go out as FCALL where Redis has FUNCTION,
else as EVALSHA of the command's own script; a call that finds its function or script missing
(a fresh or restarted server) has it loaded and is sent again.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Generator
from typing import Any, NamedTuple, TypeVar

from redis.exceptions import NoScriptError, ResponseError

from distcrawl.frontier.connection import is_cluster_client
from distcrawl.frontier.keys import ControlKeys, FrontierKeys
from distcrawl.frontier.outages import classify, error_code
from distcrawl.frontier.protocol.loader import library
from distcrawl.frontier.protocol.spec import COMMANDS
from distcrawl.frontier.protocol.wire import DirectPipe

__all__ = [
    "Call",
    "Runner",
    "Step",
    "control_call",
    "redis_command",
    "seeds_call",
    "shard_call",
]

logger = logging.getLogger(__name__)

T = TypeVar("T")


class Call(NamedTuple):
    """One call of a round trip: a library command (``script``) with its keys, or a plain
    Redis command (``name`` in capitals) with its arguments."""

    name: str
    keys: tuple[str, ...]
    args: list[Any]
    script: bool = True


Step = Generator[list[Call], list[Any], T]


def redis_command(name: str, *args: Any) -> Call:
    return Call(name, (), list(args), script=False)


def shard_call(keys: FrontierKeys, index: int, command: str, /, **values: Any) -> Call:
    """A command of the library in shard ``index``, its arguments by name (see
    ``spec.COMMANDS``)."""
    return Call(command, (keys.shard(index).prefix,), COMMANDS[command].encode(**values))


def control_call(keys: ControlKeys, command: str, /, **values: Any) -> Call:
    """A control-slot command of the library."""
    return Call(command, (keys.prefix,), COMMANDS[command].encode(**values))


def seeds_call(keys: FrontierKeys, command: str, /, **values: Any) -> Call:
    """A command of the library in the seed list's slot (with the seed list as KEYS[2] where
    it takes one): wherever the list hashes, it and its neighbours share that slot."""
    spec = COMMANDS[command]
    names: tuple[str, ...] = (keys.seeds.prefix,)
    if spec.start_list:
        names += (keys.start_urls,)
    return Call(command, names, spec.encode(**values))


def _no_fcall(result: Any) -> bool:
    """Whether ``result`` is the error of a server that does not know FCALL (Redis before 7)
    or whose ACL refuses it."""
    if not isinstance(result, ResponseError):
        return False
    text = str(result).lower()
    return "fcall" in text and ("unknown command" in text or error_code(result) == "NOPERM")


def _missing(result: Any) -> bool:
    """Whether a call found no script or function (a fresh or restarted server), or its FCALL
    is unknown (Redis before 7) or refused (an ACL)."""
    return isinstance(result, NoScriptError) or (
        isinstance(result, ResponseError)
        and ("function not found" in str(result).lower() or _no_fcall(result))
    )


class Runner:
    """Runs steps on ``client``; ``functions=False``: EVALSHA even where Redis has FUNCTION."""

    def __init__(self, client: Any, *, functions: bool = True) -> None:
        self.client = client
        self.library = library()
        self.is_async = inspect.iscoroutinefunction(getattr(client, "execute_command", None))
        #: whether calls go to the function library (FCALL) or the scripts (EVALSHA): FCALL
        #: until Redis says it has no FUNCTION or refuses it
        self.functions = functions
        self._direct: DirectPipe | None = None
        self._direct_client: Any = None  # the client _direct was made for

    @property
    def direct(self) -> DirectPipe | None:
        """Round trips without redis-py's pipeline, where :class:`DirectPipe` serves the
        client (made again when the client is replaced)."""
        client = self.client
        if client is not self._direct_client:
            self._direct_client = client
            self._direct = DirectPipe.of(client) if self.is_async else None
        return self._direct

    # -- a round trip ----------------------------------------------------------------------------

    def _commands(self, calls: list[Call]) -> list[tuple[Any, ...]]:
        """Each call as the command and arguments Redis is sent."""
        lib = self.library
        out: list[tuple[Any, ...]] = []
        for call in calls:
            if not call.script:
                out.append((call.name, *call.args))
            elif self.functions:
                fn = lib.functions[call.name]
                out.append(("FCALL", fn, len(call.keys), *call.keys, *call.args))
            else:
                # by name: redis-py blocks the evalsha method in cluster pipelines, not the command
                sha = lib.shas[call.name]
                out.append(("EVALSHA", sha, len(call.keys), *call.keys, *call.args))
        return out

    def _pipe(self, calls: list[Call]) -> Any:
        pipe = self.client.pipeline(transaction=False)
        for command in self._commands(calls):
            pipe.execute_command(*command)
        return pipe

    async def _round_trip(self, calls: list[Call]) -> list[Any]:
        """One round trip of an asyncio client: without redis-py's pipeline where
        :class:`DirectPipe` serves the client."""
        direct = self.direct
        if direct is not None:
            replies = await direct.execute(self._commands(calls))
            if replies is not None:
                return replies
        return list(await self._pipe(calls).execute(raise_on_error=False))

    @staticmethod
    def _raise_first(results: list[Any]) -> list[Any]:
        for r in results:
            if isinstance(r, Exception):
                raise r
        return results

    def _refused(self, err: Exception) -> None:
        """FCALL or FUNCTION LOAD refused (``err``): the scripts run with EVALSHA from now on."""
        self.functions = False
        if "unknown command" not in str(err).lower():
            logger.warning("Redis refused the frontier's function library (%s); using EVALSHA", err)

    def _everywhere(self) -> dict[str, Any]:
        """Where a load goes: every master of a cluster, named (the asyncio cluster client
        routes neither FUNCTION LOAD nor the "primaries" flag), or the one server."""
        if is_cluster_client(self.client):
            return {"target_nodes": self.client.get_primaries()}
        return {}

    def _before_load(self, results: list[Any]) -> None:
        refused = next((r for r in results if _no_fcall(r)), None)
        if refused is not None:
            self._refused(refused)

    def _library_refused(self, err: ResponseError) -> None:
        """FUNCTION LOAD's error: EVALSHA from now on, unless the library was there already
        (on a master of a cluster that had it), or Redis cannot take writes now (an outage,
        raised: the load is tried again once it is over)."""
        outage = classify(err)
        if outage is not None and outage.code != "NOPERM":
            raise err
        if "already exists" not in str(err):
            self._refused(err)

    def _load(self, calls: list[Call], results: list[Any]) -> None:
        self._before_load(results)
        if self.functions:
            try:
                self.client.execute_command(
                    "FUNCTION", "LOAD", self.library.text, **self._everywhere()
                )
            except ResponseError as err:
                self._library_refused(err)
        if not self.functions:
            for name in dict.fromkeys(c.name for c in calls):
                self.client.script_load(self.library.scripts[name])

    async def _load_async(self, calls: list[Call], results: list[Any]) -> None:
        self._before_load(results)
        if self.functions:
            try:
                await self.client.execute_command(
                    "FUNCTION", "LOAD", self.library.text, **self._everywhere()
                )
            except ResponseError as err:
                self._library_refused(err)
        if not self.functions:
            for name in dict.fromkeys(c.name for c in calls):
                await self.client.script_load(self.library.scripts[name])

    def execute(self, calls: list[Call]) -> list[Any]:
        """One round trip (a blocking client)."""
        if not calls:
            return []
        results = list(self._pipe(calls).execute(raise_on_error=False))
        missing = [i for i, r in enumerate(results) if _missing(r)]
        if missing:  # a fresh server (restart, failover): load, then run those again
            again_calls = [calls[i] for i in missing]
            self._load(again_calls, [results[i] for i in missing])
            again = self._pipe(again_calls).execute(raise_on_error=False)
            for i, r in zip(missing, again, strict=True):
                results[i] = r
        return self._raise_first(results)

    async def execute_async(self, calls: list[Call]) -> list[Any]:
        if not calls:
            return []
        results = await self._round_trip(calls)
        missing = [i for i, r in enumerate(results) if _missing(r)]
        if missing:
            again_calls = [calls[i] for i in missing]
            await self._load_async(again_calls, [results[i] for i in missing])
            again = await self._round_trip(again_calls)
            for i, r in zip(missing, again, strict=True):
                results[i] = r
        return self._raise_first(results)

    # -- steps -----------------------------------------------------------------------------------

    def drive(self, step: Step[T]) -> Any:
        """Run a step: its value, or with an asyncio client an awaitable of it."""
        if self.is_async:
            return self._drive_async(step)
        try:
            calls = next(step)
            while True:
                calls = step.send(self.execute(calls))
        except StopIteration as stop:
            return stop.value

    async def _drive_async(self, step: Step[T]) -> T:
        try:
            calls = next(step)
            while True:
                calls = step.send(await self.execute_async(calls))
        except StopIteration as stop:
            value: T = stop.value
            return value


def one(call: Call) -> Step[Any]:
    """A step of one call: its result."""
    [value] = yield [call]
    return value


def many(calls: list[Call]) -> Step[list[Any]]:
    """A step of one round trip: its results."""
    results = yield calls
    return results
