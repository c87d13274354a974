"""RESP (the Redis protocol, versions 2 and 3) as a proxy needs it: where one message ends in a
stream, a command's name and first argument, and a reply decoded and encoded again, so that a
Redis Cluster's addresses in it can be rewritten (:func:`rewrite_addresses`)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = [
    "Message",
    "command_words",
    "decode",
    "encode",
    "error_reply",
    "message_end",
    "rewrite_addresses",
    "rewrite_redirect",
]

#: types whose value is the rest of the line
_LINE = frozenset(b"+-:,#_(")
#: types whose line is a length, then that many bytes and CRLF
_BULK = frozenset(b"$!=")
#: types whose line is a count of values that follow (a map and attributes: pairs)
_AGGREGATE = frozenset(b"*~>")
_PAIRS = frozenset(b"%|")
_TYPES = _LINE | _BULK | _AGGREGATE | _PAIRS


def message_end(buf: bytes | bytearray, pos: int = 0) -> int | None:
    """The index just past the one RESP message that starts at ``pos`` in ``buf``, or None while
    it is incomplete. An inline command (a line not starting with ``*``) ends with its line."""
    if pos >= len(buf):
        return None
    if buf[pos] not in _TYPES:
        nl = buf.find(b"\n", pos)
        return None if nl < 0 else nl + 1
    pending = 1
    n = len(buf)
    while pending:
        if pos >= n:
            return None
        kind = buf[pos]
        nl = buf.find(b"\r\n", pos)
        if nl < 0:
            return None
        pending -= 1
        if kind in _BULK:
            length = int(buf[pos + 1 : nl])
            pos = nl + 2 if length < 0 else nl + 2 + length + 2
            if pos > n:
                return None
        elif kind in _AGGREGATE:
            pending += max(0, int(buf[pos + 1 : nl]))
            pos = nl + 2
        elif kind in _PAIRS:
            count = max(0, int(buf[pos + 1 : nl]))
            # an attribute map comes before the value it describes
            pending += 2 * count + (1 if kind == ord("|") else 0)
            pos = nl + 2
        elif kind in _LINE:
            pos = nl + 2
        else:
            raise ValueError(f"not RESP: type byte {bytes([kind])!r} at {pos}")
    return pos


def command_words(message: bytes) -> list[bytes]:
    """The first two words of a command (its name and first argument, as sent), from the
    array of bulk strings a client sends or from an inline command."""
    if not message.startswith(b"*"):
        return message.strip().split()[:2]
    words = []
    nl = message.find(b"\r\n")
    count = int(message[1:nl])
    pos = nl + 2
    for _ in range(min(count, 2)):
        nl = message.find(b"\r\n", pos)
        length = int(message[pos + 1 : nl])
        words.append(message[nl + 2 : nl + 2 + length])
        pos = nl + 2 + length + 2
    return words


def error_reply(text: str) -> bytes:
    """An error reply carrying ``text`` (its first word is the class: ``MISCONF ...``)."""
    return b"-" + text.replace("\r", " ").replace("\n", " ").encode() + b"\r\n"


@dataclass
class Message:
    """One decoded RESP value with its type byte, so it can be encoded as it came."""

    kind: int
    #: bytes for line and bulk types, a list of messages for aggregates, None for a null
    value: Any
    null: bool = False


def decode(buf: bytes, pos: int = 0) -> tuple[Message, int]:
    """The RESP value at ``pos`` and the index past it (the message must be complete)."""
    kind = buf[pos]
    nl = buf.index(b"\r\n", pos)
    head = buf[pos + 1 : nl]
    if kind in _LINE:
        return Message(kind, head), nl + 2
    if kind in _BULK:
        length = int(head)
        if length < 0:
            return Message(kind, None, null=True), nl + 2
        return Message(kind, buf[nl + 2 : nl + 2 + length]), nl + 2 + length + 2
    count = int(head)
    if count < 0:
        return Message(kind, None, null=True), nl + 2
    total = 2 * count + (1 if kind == ord("|") else 0) if kind in _PAIRS else count
    items = []
    pos = nl + 2
    for _ in range(total):
        item, pos = decode(buf, pos)
        items.append(item)
    return Message(kind, items), pos


def encode(message: Message) -> bytes:
    kind = bytes([message.kind])
    if message.null:
        return kind + b"-1\r\n"
    if message.kind in _LINE:
        return kind + bytes(message.value) + b"\r\n"
    if message.kind in _BULK:
        data = bytes(message.value)
        return kind + str(len(data)).encode() + b"\r\n" + data + b"\r\n"
    items: list[Message] = message.value
    count = len(items)
    if message.kind in _PAIRS:
        count = (count - (1 if message.kind == ord("|") else 0)) // 2
    return kind + str(count).encode() + b"\r\n" + b"".join(encode(i) for i in items)


#: maps a server's (host, port) to the one a client should use instead, or None to keep it
AddressMap = Callable[[str, int], "tuple[str, int] | None"]

_NODES_LINE_ADDRESS = re.compile(rb"(?m)^(\S+ )([^\s:@]*):(\d+)(@\d+)")
_REDIRECT = re.compile(rb"^-(MOVED|ASK) (\d+) ([^\s:]*):(\d+)")


def _text(m: Message) -> str | None:
    if m.kind in _BULK or m.kind == ord("+"):
        return bytes(m.value).decode("utf-8", "replace") if m.value is not None else None
    return None


def _integer(m: Message) -> int | None:
    if m.kind == ord(":"):
        return int(m.value)
    text = _text(m)
    return int(text) if text is not None and text.isdigit() else None


def _set_text(m: Message, text: str) -> None:
    m.value = text.encode()


def _rewrite_tree(m: Message, mapping: AddressMap) -> None:
    if not isinstance(m.value, list):
        return
    items: list[Message] = m.value
    # CLUSTER SLOTS: a node is [host, port, id, ...]
    if len(items) >= 2 and items[0].kind in _BULK and items[1].kind == ord(":"):
        host, port = _text(items[0]), _integer(items[1])
        if host is not None and port is not None:
            new = mapping(host, port)
            if new is not None:
                _set_text(items[0], new[0])
                items[1].value = str(new[1]).encode()
    # CLUSTER SHARDS: a node is a map (or a flat key/value list) with ip, endpoint and port
    fields = {}
    for i in range(0, len(items) - 1, 2):
        key = _text(items[i])
        if key is not None:
            fields[key] = items[i + 1]
    if "port" in fields and ("ip" in fields or "endpoint" in fields):
        host = _text(fields.get("ip") or fields["endpoint"])
        port = _integer(fields["port"])
        new = mapping(host, port) if host is not None and port is not None else None
        if new is not None:
            for name in ("ip", "endpoint"):
                if name in fields and _text(fields[name]) == host:
                    _set_text(fields[name], new[0])
            fields["port"].value = str(new[1]).encode()
    for item in items:
        _rewrite_tree(item, mapping)


def rewrite_addresses(reply: bytes, mapping: AddressMap) -> bytes:
    """A reply of ``CLUSTER SLOTS``, ``SHARDS`` or ``NODES`` with every address ``mapping``
    knows replaced by its substitute."""
    if reply[:1] in (b"$", b"="):  # CLUSTER NODES: lines of "<id> <ip>:<port>@<bus> ..."
        message, _ = decode(reply)
        if message.value is None:
            return reply
        data = bytes(message.value)
        prefix = b""
        if message.kind == ord("="):  # a verbatim string starts with its format, "txt:"
            prefix, data = data[:4], data[4:]

        def sub(match: re.Match[bytes]) -> bytes:
            new = mapping(match[2].decode(), int(match[3]))
            if new is None:
                return match[0]
            return match[1] + f"{new[0]}:{new[1]}".encode() + match[4]

        message.value = prefix + _NODES_LINE_ADDRESS.sub(sub, data)
        return encode(message)
    if reply[:1] not in (b"*", b"%", b"~"):
        return reply
    message, _ = decode(reply)
    _rewrite_tree(message, mapping)
    return encode(message)


def rewrite_redirect(reply: bytes, mapping: AddressMap) -> bytes:
    """A ``MOVED`` or ``ASK`` error reply pointing at the address ``mapping`` substitutes."""
    match = _REDIRECT.match(reply)
    if match is None:
        return reply
    new = mapping(match[3].decode(), int(match[4]))
    if new is None:
        return reply
    head = f"-{match[1].decode()} {match[2].decode()} {new[0]}:{new[1]}".encode()
    return head + reply[match.end() :]
