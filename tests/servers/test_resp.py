"""RESP framing as the fault proxy reads it: a message ends where Redis' parser says, however
the stream is cut into chunks; decoded and encoded again, a reply is the same bytes; a
cluster's addresses are rewritten where they appear and nowhere else."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from distcrawl.servers.resp import (
    command_words,
    decode,
    encode,
    message_end,
    rewrite_addresses,
    rewrite_redirect,
)

_LINE = st.binary(max_size=20).filter(lambda b: b"\r" not in b and b"\n" not in b)


def _scalar() -> st.SearchStrategy[bytes]:
    return st.one_of(
        _LINE.map(lambda b: b"+" + b + b"\r\n"),
        _LINE.map(lambda b: b"-ERR " + b + b"\r\n"),
        st.integers(-(2**63), 2**63 - 1).map(lambda i: b":%d\r\n" % i),
        st.binary(max_size=40).map(lambda b: b"$%d\r\n%s\r\n" % (len(b), b)),
        st.just(b"$-1\r\n"),
        st.just(b"_\r\n"),
        st.sampled_from([b"#t\r\n", b"#f\r\n", b",3.25\r\n", b",inf\r\n", b"(123456789012345\r\n"]),
        st.binary(max_size=20).map(lambda b: b"=%d\r\ntxt:%s\r\n" % (len(b) + 4, b)),
        st.binary(max_size=20).map(lambda b: b"!%d\r\n%s\r\n" % (len(b), b)),
    )


def _aggregate(children: st.SearchStrategy[bytes]) -> st.SearchStrategy[bytes]:
    lists = st.lists(children, max_size=5)
    return st.one_of(
        st.tuples(st.sampled_from(b"*~>"), lists).map(
            lambda t: bytes([t[0]]) + b"%d\r\n" % len(t[1]) + b"".join(t[1])
        ),
        st.lists(st.tuples(children, children), max_size=3).map(
            lambda pairs: b"%%%d\r\n" % len(pairs) + b"".join(k + v for k, v in pairs)
        ),
        st.tuples(st.lists(st.tuples(children, children), max_size=2), children).map(
            lambda t: b"|%d\r\n" % len(t[0]) + b"".join(k + v for k, v in t[0]) + t[1]
        ),
        st.just(b"*-1\r\n"),
    )


REPLY = st.recursive(_scalar(), _aggregate, max_leaves=20)


@given(st.lists(REPLY, min_size=1, max_size=6), st.data())
def test_a_stream_of_replies_splits_into_the_same_messages_however_it_is_chunked(
    replies: list[bytes], data: st.DataObject
) -> None:
    stream = b"".join(replies)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=8)))
    buf = bytearray()
    found: list[bytes] = []
    for start, end in zip([0, *cuts], [*cuts, len(stream)], strict=True):
        buf += stream[start:end]
        pos = 0
        while (stop := message_end(buf, pos)) is not None:
            found.append(bytes(buf[pos:stop]))
            pos = stop
        del buf[:pos]
    assert found == replies
    assert not buf


@given(REPLY)
def test_a_decoded_reply_encodes_to_its_own_bytes(reply: bytes) -> None:
    message, end = decode(reply)
    assert end == len(reply)
    assert encode(message) == reply


def test_command_words_of_arrays_and_inline_commands() -> None:
    assert command_words(b"*3\r\n$5\r\nFCALL\r\n$4\r\nsync\r\n$1\r\n1\r\n") == [b"FCALL", b"sync"]
    assert command_words(b"*1\r\n$4\r\nPING\r\n") == [b"PING"]
    assert command_words(b"set a b\r\n") == [b"set", b"a"]
    assert message_end(b"PING\r\n") == 6


MAP = {("127.0.0.1", 7000): ("127.0.0.1", 9000), ("127.0.0.1", 7001): ("127.0.0.1", 9001)}


def mapping(host: str, port: int) -> tuple[str, int] | None:
    return MAP.get((host, port))


def test_cluster_slots_nodes_and_redirects_name_the_proxies() -> None:
    slots = (
        b"*1\r\n*4\r\n:0\r\n:16383\r\n"
        b"*3\r\n$9\r\n127.0.0.1\r\n:7000\r\n$2\r\nid\r\n"
        b"*3\r\n$9\r\n127.0.0.1\r\n:7005\r\n$2\r\nr1\r\n"  # a replica no proxy fronts: kept
    )
    out, _ = decode(rewrite_addresses(slots, mapping))
    master, replica = out.value[0].value[2], out.value[0].value[3]
    assert (master.value[0].value, master.value[1].value) == (b"127.0.0.1", b"9000")
    assert replica.value[1].value == b"7005"
    nodes = (
        b"a1 127.0.0.1:7000@17000 myself,master - 0 0 1 connected 0-8191\n"
        b"b2 127.0.0.1:7001@17001 master - 0 0 2 connected 8192-16383\n"
    )
    reply = b"$%d\r\n%s\r\n" % (len(nodes), nodes)
    rewritten, _ = decode(rewrite_addresses(reply, mapping))
    assert rewritten.value == nodes.replace(b":7000@", b":9000@").replace(b":7001@", b":9001@")
    shard = (
        b"*1\r\n%2\r\n$5\r\nslots\r\n*2\r\n:0\r\n:16383\r\n$5\r\nnodes\r\n*1\r\n"
        b"%3\r\n$4\r\nport\r\n:7001\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n"
        b"$8\r\nendpoint\r\n$9\r\n127.0.0.1\r\n"
    )
    assert b":9001\r\n" in rewrite_addresses(shard, mapping)
    assert rewrite_redirect(b"-MOVED 42 127.0.0.1:7001\r\n", mapping) == (
        b"-MOVED 42 127.0.0.1:9001\r\n"
    )
    assert rewrite_redirect(b"-ASK 42 127.0.0.1:7999\r\n", mapping) == b"-ASK 42 127.0.0.1:7999\r\n"
    # an ordinary reply goes as it came
    assert rewrite_addresses(b":7000\r\n", mapping) == b":7000\r\n"
