"""A fault-injecting Redis proxy: a real TCP server that speaks RESP between clients and one
Redis server (or, through :class:`ClusterFaultProxy`, one per master of a Redis Cluster), and
answers, drops, cuts, delays or stalls commands as its faults say. The benches' fault searches
and the tests put it between the nodes and Redis and change its faults while the crawl runs.

    proxy = FaultProxy("redis://127.0.0.1:6379/0").start()    # proxy.url: where clients go
    misconf = proxy.add(Fault("error", error="MISCONF"))       # every write refused
    proxy.remove(misconf)
    proxy.add(Fault("drop", match=("FCALL *_sync",), count=1)) # ran, but the client never hears
    proxy.stall(); proxy.resume()                              # nothing moves, sockets stay open
    proxy.stop()

A :class:`Fault` picks commands by ``match`` (shell patterns on ``"NAME"`` and ``"NAME ARG1"``,
e.g. ``"FCALL distcrawl_*_heartbeat"``) or by ``scope`` (``all`` commands; ``data``: all but
those of the connection and the server; ``writes``: all but the reads Redis serves under
``MISCONF`` or ``OOM``), and does one thing to each:

- ``error``: answers an error reply of the class ``error`` (see :data:`ERRORS`; several
  classes: one of them each time) instead of running the command; inside ``MULTI`` the
  transaction's ``EXEC`` then fails as Redis' would;
- ``drop``: runs the command and closes the client's connection instead of answering (the
  write happened, the client never heard);
- ``cut``: runs it and closes the connection half way through the reply;
- ``delay``: holds the reply ``seconds`` (and, as a slow server would, those behind it);
- ``stall``: holds the reply until the fault is removed (or ``seconds`` pass, if given).

It is a plain asyncio server on a thread of its own, so a bench or a test drives it from its
own thread. A connection that subscribes (pub/sub) is passed through as it is from then on.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import threading
import time
from collections.abc import Coroutine, Iterable
from typing import Any, NamedTuple, Self, TypeVar
from urllib.parse import urlsplit

from distcrawl.servers.faults import (
    ALL,
    DATA,
    ERRORS,
    KINDS,
    READ_COMMANDS,
    SERVER_COMMANDS,
    WRITES,
    Fault,
)
from distcrawl.servers.resp import (
    command_words,
    error_reply,
    message_end,
    rewrite_addresses,
    rewrite_redirect,
)

__all__ = [
    "ALL",
    "DATA",
    "ERRORS",
    "KINDS",
    "READ_COMMANDS",
    "SERVER_COMMANDS",
    "WRITES",
    "ClusterFaultProxy",
    "Fault",
    "FaultProxy",
]

T = TypeVar("T")

#: after one of these, a connection carries messages, not replies: passed through from then on
_SUBSCRIBE = frozenset({"SUBSCRIBE", "PSUBSCRIBE", "SSUBSCRIBE"})
_EXECABORT = error_reply("EXECABORT Transaction discarded because of previous errors.")
_DISCARD = b"*1\r\n$7\r\nDISCARD\r\n"
#: seconds between two looks at whether a stalled reply may go
_POLL = 0.02
#: seconds to wait for Redis to accept a proxied connection
_CONNECT_TIMEOUT = 5.0


class _Loop:
    """An asyncio event loop on a daemon thread of its own."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="faultproxy", daemon=True)
        self.thread.start()

    def call(self, coro: Coroutine[Any, Any, T], timeout: float = 30.0) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def soon(self, fn: Any, *args: Any) -> None:
        self.loop.call_soon_threadsafe(fn, *args)

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        if not self.thread.is_alive():
            self.loop.close()


class _Slot(NamedTuple):
    """What the client gets for one command, in the order it sent them: the server's reply
    (``forward``, after its fault), ``data`` made here (``reply``), or from now on whatever
    the server sends (``passthrough``)."""

    action: str
    fault: Fault | None = None
    data: bytes = b""
    #: "NAME ARG1" of the command, for the replies whose addresses are rewritten
    call: str = ""


class _Connection:
    """One client connection and its own connection to the server."""

    def __init__(
        self,
        proxy: FaultProxy,
        client: tuple[asyncio.StreamReader, asyncio.StreamWriter],
        server: tuple[asyncio.StreamReader, asyncio.StreamWriter],
    ) -> None:
        self.proxy = proxy
        self.creader, self.cwriter = client
        self.sreader, self.swriter = server
        self.slots: asyncio.Queue[_Slot] = asyncio.Queue()
        self.replies: asyncio.Queue[bytes | None] = asyncio.Queue()
        self.passthrough = False
        self.in_multi = False
        self.multi_failed = False

    async def run(self) -> None:
        tasks = [
            asyncio.create_task(self._from_client()),
            asyncio.create_task(self._to_client()),
            asyncio.create_task(self._from_server()),
        ]
        try:
            await asyncio.wait(tasks[:2], return_when=asyncio.FIRST_COMPLETED)
        finally:
            self.close()
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    def close(self) -> None:
        for writer in (self.cwriter, self.swriter):
            with contextlib.suppress(Exception):
                writer.close()

    def _decide(self, message: bytes) -> tuple[_Slot, bytes]:
        """The slot of one command and the bytes that go to the server for it."""
        words = command_words(message)
        name = words[0].decode("latin-1").upper() if words else ""
        arg = words[1].decode("latin-1") if len(words) > 1 else ""
        self.proxy.count("commands")
        if name in _SUBSCRIBE:
            self.passthrough = True
            return _Slot("passthrough"), message
        fault, error = self.proxy.pick(name, arg)
        if name == "MULTI":
            self.in_multi, self.multi_failed = True, False
        if fault is not None and error:
            self.multi_failed = self.in_multi
            return _Slot("reply", data=fault.reply(name, error)), b""
        if name in ("EXEC", "DISCARD"):
            failed = self.in_multi and self.multi_failed and name == "EXEC"
            self.in_multi = False
            if failed:
                return _Slot("forward", fault, data=_EXECABORT), _DISCARD
        return _Slot("forward", fault, call=f"{name} {arg.upper()}"), message

    async def _from_client(self) -> None:
        buf = bytearray()
        while True:
            data = await self.creader.read(65536)
            if not data:
                return
            buf += data
            out = bytearray()
            pos = 0
            while (end := message_end(buf, pos)) is not None:
                message = bytes(buf[pos:end])
                pos = end
                if self.passthrough:
                    out += message
                    continue
                slot, send = self._decide(message)
                self.slots.put_nowait(slot)
                out += send
            del buf[:pos]
            if out:
                await self.proxy.flowing()
                self.swriter.write(out)
                await self.swriter.drain()

    async def _from_server(self) -> None:
        buf = bytearray()
        try:
            while True:
                data = await self.sreader.read(65536)
                if not data:
                    return
                buf += data
                pos = 0
                while (end := message_end(buf, pos)) is not None:
                    self.replies.put_nowait(bytes(buf[pos:end]))
                    pos = end
                del buf[:pos]
        finally:
            self.replies.put_nowait(None)

    async def _send(self, data: bytes) -> None:
        await self.proxy.flowing()
        self.cwriter.write(data)
        await self.cwriter.drain()

    async def _reply(self) -> bytes | None:
        """The server's next reply to a command (a RESP3 push on the way is passed on)."""
        while True:
            reply = await self.replies.get()
            if reply is None or not reply.startswith(b">"):
                return reply
            await self._send(reply)

    async def _to_client(self) -> None:
        while True:
            slot = await self.slots.get()
            if slot.action == "reply":
                await self._send(slot.data)
                continue
            if slot.action == "passthrough":
                while (reply := await self.replies.get()) is not None:
                    await self._send(reply)
                return
            reply = await self._reply()
            if reply is None:
                return
            if slot.data:
                reply = slot.data
            reply = self.proxy.rewrite(slot.call, reply)
            fault = slot.fault
            if fault is not None:
                if fault.kind == "delay":
                    await asyncio.sleep(fault.seconds)
                elif fault.kind == "stall":
                    deadline = time.monotonic() + fault.seconds if fault.seconds else None
                    while not fault.removed and (deadline is None or time.monotonic() < deadline):
                        await asyncio.sleep(_POLL)
                elif fault.kind == "drop":
                    return
                elif fault.kind == "cut":
                    await self._send(reply[: max(1, len(reply) // 2)])
                    return
            await self._send(reply)


class FaultProxy:
    """The proxy in front of the Redis server at ``target`` (a URL or ``(host, port)``).

    ``seed`` draws the commands a fault of ``probability`` < 1 picks. ``loop``: share another
    proxy's thread (a cluster's proxies do)."""

    def __init__(
        self,
        target: str | tuple[str, int],
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        seed: int | None = None,
        loop: _Loop | None = None,
    ) -> None:
        if isinstance(target, str):
            parts = urlsplit(target)
            self.target = (parts.hostname or "127.0.0.1", parts.port or 6379)
            self._path = parts.path or "/0"
        else:
            self.target, self._path = (str(target[0]), int(target[1])), "/0"
        self.host = host
        self.port = port
        self._own_loop = loop is None
        self._loop = loop
        self._lock = threading.Lock()
        self._faults: list[Fault] = []
        self._rng = random.Random(seed)
        self._refusing = False
        self._flowing: asyncio.Event | None = None
        self._server: asyncio.Server | None = None
        self._connections: set[_Connection] = set()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._counts: dict[str, int] = {}
        #: (host, port) of a cluster's master -> the proxy in front of it
        self.addresses: dict[tuple[str, int], tuple[str, int]] = {}

    # -- life --------------------------------------------------------------------------------

    def start(self) -> Self:
        if self._loop is None:
            self._loop = _Loop()
        self._loop.call(self._open())
        return self

    async def _open(self) -> None:
        self._flowing = asyncio.Event()
        self._flowing.set()
        self._server = await asyncio.start_server(self._serve, self.host, self.port)
        self.port = int(self._server.sockets[0].getsockname()[1])

    def stop(self) -> None:
        """Close the listening socket and every connection; release every stalled reply."""
        self.clear()
        if self._loop is None:
            return
        with contextlib.suppress(Exception):
            self._loop.call(self._close())
        if self._own_loop:
            self._loop.stop()
        self._loop = None

    async def _close(self) -> None:
        if self._flowing is not None:
            self._flowing.set()
        if self._server is not None:
            self._server.close()
        for conn in list(self._connections):
            conn.close()
        # closed connections end their tasks; one stuck anyway is cancelled
        tasks = [t for t in self._tasks if t is not asyncio.current_task()]
        if tasks:
            _, stuck = await asyncio.wait(tasks, timeout=5)
            for task in stuck:
                task.cancel()
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 5)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def address(self) -> tuple[str, int]:
        return self.host, self.port

    @property
    def url(self) -> str:
        """Where a client goes instead of the server (its database as the target's URL)."""
        return f"redis://{self.host}:{self.port}{self._path}"

    # -- faults ------------------------------------------------------------------------------

    def add(self, fault: Fault) -> Fault:
        """Apply ``fault`` from now on (after those added before it, which pick first)."""
        with self._lock:
            fault.removed = False
            self._faults.append(fault)
        return fault

    def remove(self, fault: Fault) -> None:
        """Stop applying ``fault``; replies it stalls go on."""
        with self._lock:
            fault.removed = True
            with contextlib.suppress(ValueError):
                self._faults.remove(fault)

    def clear(self) -> None:
        """Remove every fault, resume a stall and accept connections again."""
        with self._lock:
            for fault in self._faults:
                fault.removed = True
            self._faults.clear()
        self.resume()
        self._refusing = False

    @property
    def faults(self) -> list[Fault]:
        with self._lock:
            return list(self._faults)

    def pick(self, name: str, arg: str) -> tuple[Fault | None, str]:
        """The fault that picks this command, if one does (counted; a spent one removed), and
        the error class it answers with ("" for a fault of another kind)."""
        with self._lock:
            for fault in self._faults:
                error = self._rng.choice(fault.classes) if fault.classes else ""
                if not fault.matches(name, arg, error):
                    continue
                if fault.probability < 1 and self._rng.random() >= fault.probability:
                    continue
                fault.hits += 1
                if fault.count is not None:
                    fault.count -= 1
                    if fault.count <= 0:
                        self._faults.remove(fault)
                key = f"faults/{error or fault.kind}"
                self._counts[key] = self._counts.get(key, 0) + 1
                return fault, error
        return None, ""

    # -- the whole proxy ---------------------------------------------------------------------

    def stall(self) -> None:
        """Nothing goes through either way until :meth:`resume`; connections stay open."""
        if self._loop is not None and self._flowing is not None:
            self._loop.soon(self._flowing.clear)

    def resume(self) -> None:
        if self._loop is not None and self._flowing is not None:
            self._loop.soon(self._flowing.set)

    def disconnect(self) -> None:
        """Close every client connection now (clients reconnect through the proxy)."""
        if self._loop is not None:
            for conn in list(self._connections):
                self._loop.soon(conn.close)

    def refuse(self, refusing: bool = True) -> None:
        """Close every new connection at once (a server out of reach), or accept them again."""
        self._refusing = refusing

    def stats(self) -> dict[str, int]:
        """Connections accepted, commands seen, and commands each fault class picked."""
        with self._lock:
            return dict(self._counts)

    def count(self, key: str) -> None:
        with self._lock:
            self._counts[key] = self._counts.get(key, 0) + 1

    # -- inside the loop ---------------------------------------------------------------------

    async def flowing(self) -> None:
        assert self._flowing is not None
        await self._flowing.wait()

    def rewrite(self, call: str, reply: bytes) -> bytes:
        """A reply with the cluster's addresses replaced by their proxies' (redirects and the
        cluster's shape), so clients keep going through the proxies."""
        if not self.addresses:
            return reply
        if reply.startswith((b"-MOVED", b"-ASK")):
            return rewrite_redirect(reply, self._map)
        if call.startswith(("CLUSTER SLOTS", "CLUSTER SHARDS", "CLUSTER NODES")):
            return rewrite_addresses(reply, self._map)
        return reply

    def _map(self, host: str, port: int) -> tuple[str, int] | None:
        return self.addresses.get((host or self.target[0], port))

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            await self._proxy(reader, writer)
        except asyncio.CancelledError:
            pass  # the proxy stops (asyncio's stream callback must not see a cancelled task)
        finally:
            self._tasks.discard(task)

    async def _proxy(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.count("connections")
        if self._refusing:
            writer.close()
            return
        try:
            server = await asyncio.wait_for(asyncio.open_connection(*self.target), _CONNECT_TIMEOUT)
        except (TimeoutError, OSError):
            self.count("connections/server_unreachable")
            writer.close()
            return
        conn = _Connection(self, (reader, writer), server)
        self._connections.add(conn)
        try:
            await conn.run()
        except (OSError, ValueError):
            pass  # a connection reset, or bytes that are not RESP: this connection ends
        finally:
            self._connections.discard(conn)


class ClusterFaultProxy:
    """One :class:`FaultProxy` per master of a Redis Cluster, on one thread. Each rewrites the
    masters' addresses in ``MOVED`` / ``ASK`` redirects and in ``CLUSTER SLOTS`` / ``SHARDS``
    / ``NODES`` answers to their proxies' addresses, so a cluster client that starts at
    :attr:`url` keeps going through the proxies. Faults are added to every proxy, or to one
    (``proxies[i]``)."""

    def __init__(self, masters: Iterable[tuple[str, int]], *, seed: int | None = None) -> None:
        self._loop: _Loop | None = None
        self.masters = [(str(h), int(p)) for h, p in masters]
        self.seed = seed
        self.proxies: list[FaultProxy] = []

    def start(self) -> Self:
        self._loop = _Loop()
        rng = random.Random(self.seed)
        self.proxies = [
            FaultProxy(m, seed=rng.randrange(1 << 30), loop=self._loop).start()
            for m in self.masters
        ]
        addresses = {m: p.address for m, p in zip(self.masters, self.proxies, strict=True)}
        for proxy in self.proxies:
            proxy.addresses = addresses
        return self

    def stop(self) -> None:
        for proxy in self.proxies:
            proxy.stop()
        if self._loop is not None:
            self._loop.stop()
            self._loop = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        """``redis+cluster://`` with every proxy as a seed node."""
        return "redis+cluster://" + ",".join(f"{p.host}:{p.port}" for p in self.proxies) + "/0"

    def add(self, fault: Fault) -> list[Fault]:
        """``fault`` on every proxy (a copy each, so each counts its own)."""
        copies = []
        for proxy in self.proxies:
            copy = Fault(
                fault.kind,
                error=fault.error,
                match=fault.match,
                scope=fault.scope,
                seconds=fault.seconds,
                count=fault.count,
                probability=fault.probability,
            )
            copies.append(proxy.add(copy))
        return copies

    def remove(self, faults: Iterable[Fault]) -> None:
        for fault in faults:
            for proxy in self.proxies:
                proxy.remove(fault)

    def clear(self) -> None:
        for proxy in self.proxies:
            proxy.clear()

    def stall(self) -> None:
        for proxy in self.proxies:
            proxy.stall()

    def resume(self) -> None:
        for proxy in self.proxies:
            proxy.resume()

    def disconnect(self) -> None:
        for proxy in self.proxies:
            proxy.disconnect()

    def stats(self) -> dict[str, int]:
        total: dict[str, int] = {}
        for proxy in self.proxies:
            for key, n in proxy.stats().items():
                total[key] = total.get(key, 0) + n
        return total
