"""A round trip on one Redis server without redis-py's pipeline object.

redis-py's asyncio pipeline encodes each argument in Python (``Encoder.encode``, some five
calls an argument) and walks a command stack, timing and metrics hooks around it: for a
node's ``sync`` of a hundred arguments that is most of the client's cost of a round trip.
:class:`DirectPipe` packs the commands with ``hiredis.pack_command`` (in C) and reads the
replies on a connection of the client's own pool, with the same connection handling as the
pipeline: the client's retry policy (a connection error disconnects the connection; the round
trip is sent again only where that policy retries), a reply that is an error kept in its
place, each reply through the client's response callback.

It serves a ``redis.asyncio.Redis`` of one server that answers RESP2 bytes and encodes text as
strict UTF-8 (as hiredis does); a Redis Cluster client, or any other, keeps redis-py's pipeline.
"""

from __future__ import annotations

from typing import Any

from redis.asyncio import Redis
from redis.exceptions import ResponseError

try:
    from hiredis import pack_command
except ImportError:  # pragma: no cover - hiredis is a dependency; without it, the pipeline
    pack_command = None  # type: ignore[assignment]

__all__ = ["DirectPipe"]


class DirectPipe:
    """Round trips of ``client`` (see the module), or None from :meth:`of` where it does not
    serve that client."""

    def __init__(self, client: Redis) -> None:
        self.pool: Any = client.connection_pool
        self.callbacks = client.response_callbacks

    @classmethod
    def of(cls, client: Any) -> DirectPipe | None:
        if pack_command is None or type(client) is not Redis or client.connection is not None:
            return None
        kwargs = client.connection_pool.connection_kwargs
        encoding = str(kwargs.get("encoding", "utf-8")).lower().replace("_", "-")
        if (
            kwargs.get("protocol") not in (None, 2, "2")
            or kwargs.get("decode_responses")
            or encoding not in ("utf-8", "utf8")
            or kwargs.get("encoding_errors", "strict") != "strict"
        ):
            return None
        return cls(client)

    async def execute(self, commands: list[tuple[Any, ...]]) -> list[Any] | None:
        """The replies of ``commands`` (an error reply in its place, as an exception), or None
        where the connection the pool gave falls back from RESP3 (the pipeline then runs
        them: its callbacks differ there)."""
        pool = self.pool
        conn = await pool.get_connection()
        try:
            if getattr(conn, "_resp2_fallback", False):
                return None
            packed = [pack_command(command) for command in commands]

            async def send() -> list[Any]:
                await conn.send_packed_command(packed)
                replies: list[Any] = []
                try:
                    for _ in packed:
                        try:
                            replies.append(await conn.read_response())
                        except ResponseError as exc:
                            replies.append(exc)
                except BaseException:
                    # replies of the round trip may still be on the socket: never hand them to
                    # the connection's next user
                    await conn.disconnect(nowait=True)
                    raise
                return replies

            async def failed(error: Exception) -> None:
                await conn.disconnect(error=error)

            replies: list[Any] = await conn.retry.call_with_retry(send, failed)
        finally:
            await pool.release(conn)
        callbacks = self.callbacks
        for i, command in enumerate(commands):
            reply = replies[i]
            if not isinstance(reply, Exception):
                callback = callbacks.get(command[0])
                if callback is not None:
                    replies[i] = callback(reply)
        return replies
