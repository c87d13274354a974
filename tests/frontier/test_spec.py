"""The commands' arguments (protocol/spec.py): written by name in the order the spec declares,
header fields at their default left out, sections column by column; the library's reader
(include/args.lua) hands each command the same names and records back."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
import redis

from distcrawl.frontier.batch import Child, DeadLetter, Feedback, Lease
from distcrawl.frontier.protocol.calls import ShardBatch
from distcrawl.frontier.protocol.loader import script
from distcrawl.frontier.protocol.spec import COMMANDS

#: sync's arguments as the library reads them: its named ones, its header with the defaults
#: behind it, and each section's columns, as JSON
READ = script(
    "args",
    body="""
local a, at = named_args(ARGV, ARGS.sync)
local h = read_header(a.header, HEADERS.sync)
local sec = read_sections(ARGV, at, h, SECTIONS.sync)
local out = {node = a.node, lease = h.lease, live = h.live, burst = h.burst, rv = h.rv or false}
for _, section in ipairs(SECTIONS.sync) do
  local cols = {n = sec[section.name].n}
  for _, field in ipairs(section.fields) do cols[field] = sec[section.name][field] end
  out[section.name] = cols
end
return cjson.encode(out)
""",
)


@pytest.fixture
def client(redis_url: str) -> Iterator[redis.Redis]:
    c = redis.Redis.from_url(redis_url)
    yield c
    c.close()


def test_arguments_go_in_the_declared_order_and_only_by_their_names() -> None:
    release = COMMANDS["release"]
    assert release.encode(node="n", wake="w", shard=3, mark="", rids=["1", "2"]) == [
        "n",
        "w",
        3,
        "",
        "1",
        "2",
    ]
    with pytest.raises(TypeError, match="release takes node, wake, shard, mark, \\*rids"):
        release.encode(node="n", wake="w", mark="", rids=[])
    with pytest.raises(TypeError):
        release.encode(node="n", wake="w", shard=1, mark="", rids=[], extra=1)


def test_a_header_leaves_out_what_the_library_reads_as_its_default() -> None:
    sync = COMMANDS["sync"]
    assert (
        sync.encode_header({"lease": 0, "live": 1, "burst": 1.0, "rate": 0.0, "rv": None}) == "{}"
    )
    assert json.loads(sync.encode_header({"lease": 5, "live": 3, "bloom": [8, 2]})) == {
        "lease": 5,
        "live": 3,
        "bloom": [8, 2],
    }
    with pytest.raises(TypeError, match="no field c"):
        sync.encode_header({"c": 1})


def test_the_library_reads_a_batch_as_the_node_wrote_it(client: redis.Redis) -> None:
    batch = ShardBatch(
        children=[
            Child("a" * 40, 100, False, 0, "a.test", '{"u":"http://a.test/"}'),
            Child(b"", 7, True, 250, "b.test", '{"u":"http://x.test/"}'),
        ],
        acks=[Lease(0, "1.t", "a.test"), Lease(0, "2.t", "")],
        dead=[DeadLetter("d", "{}", "c.test", Lease(0, "3.t", "c.test"))],
        feedback=[Feedback("a.test", 1, 2, 3, 40, 5000)],
        lease=5,
    )
    args = batch.args("n1", {"live": 4, "burst": 1.0})
    got = json.loads(client.eval(READ, 0, *args))
    assert (got["node"], got["lease"], got["live"], got["burst"], got["rv"]) == (
        "n1",
        5,
        4,
        1,
        False,
    )
    children = got["children"]
    assert children["n"] == 2
    assert children["spec"] == ["100", "d7 250 b.test"]  # "=": the payload names a.test
    assert children["payload"] == ['{"u":"http://a.test/"}', '{"u":"http://x.test/"}']
    assert children["h"][1] == "" and children["fp"][1] == ""  # no fingerprint: unfiltered
    assert got["acks"] == {"n": 2, "rid": ["1.t", "2.t"], "site": ["a.test", ""]}
    assert got["dead"] == {
        "n": 1,
        "id": ["d"],
        "record": ["{}"],
        "site": ["c.test"],
        "rid": ["3.t"],
    }
    assert got["feedback"] == {
        "n": 1,
        "site": ["a.test"],
        "ok": ["1"],
        "throttled": ["2"],
        "slow": ["3"],
        "newest": ["40"],
        "hold": ["5000"],
    }
    assert got["revisits"]["n"] == 0
