"""The site parser (sites.py) and its twin in the Lua library (include/sites.lua) agree on every
input: the site of a payload, and the site and payload of a stored value. A node leaves a
request's site out where its payload names it, and the library reads it back from the payload:
a disagreement would count a site's requests under another site."""

from __future__ import annotations

import string
from collections.abc import Iterator

import pytest
import redis
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from distcrawl.frontier.protocol.loader import script
from distcrawl.frontier.sites import _site_bytes, payload_site, record_site, split_value

SITE_OF = script(
    "sites",
    body="""
local out = {}
for i = 1, #ARGV do out[i] = site_of_payload(ARGV[i]) or false end
return out
""",
)
SPLIT = script(
    "sites",
    body="""
local out = {}
for i = 1, #ARGV do
  local site, payload = split_req(ARGV[i])
  out[#out + 1] = site
  out[#out + 1] = payload
end
return out
""",
)

_odd = "".join(chr(c) for c in range(32, 127)) + "\u00e9\u4e2d\n\t\x00"
schemes = st.sampled_from(["http", "https", "HTTP", "h2c", "a+b.c-d", "1http", "h_t", "", "x"])
hosts = st.one_of(
    st.text(string.ascii_letters + string.digits + ".-", max_size=20),
    st.text(_odd, max_size=20),
    st.builds(lambda h: f"[{h}]", st.text("0123456789abcdefABCDEF:.", max_size=12)),
    st.just("[::1"),
)
ports = st.one_of(
    st.just(""), st.integers(0, 70000).map(lambda p: f":{p}"), st.text(":ab1", max_size=4)
)
users = st.one_of(
    st.just(""), st.text(string.ascii_letters + ":@%", max_size=8).map(lambda u: u + "@")
)
ends = st.one_of(st.just(""), st.sampled_from(list('/?#"\\')), st.text(_odd, max_size=1))
rests = st.text(_odd, max_size=20)
urls = st.builds(
    lambda s, sep, u, h, p, e, r: f"{s}{sep}{u}{h}{p}{e}{r}",
    schemes,
    st.sampled_from(["://", ":/", "//", "://"]),
    users,
    hosts,
    ports,
    ends,
    rests,
)
payloads = st.one_of(
    urls.map(lambda u: '{"u":"' + u),
    urls.map(lambda u: '{"u":"' + u + '","p":5}'),
    st.text(_odd, max_size=40),
    st.builds(
        lambda p, u: p + u, st.sampled_from(['{"u":', '{"u": "', '{"url":"', '{"u":"']), urls
    ),
).map(lambda s: s.encode("utf-8"))
values = st.one_of(
    payloads,
    st.builds(lambda site, p: site + b"\n" + p, st.binary(max_size=12), payloads),
    st.binary(max_size=40),
)


@pytest.fixture
def client(redis_url: str) -> Iterator[redis.Redis]:
    c = redis.Redis.from_url(redis_url)
    yield c
    c.close()


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(payloads, min_size=1, max_size=40))
@example(
    [b'{"u":"http://User@A.Test:8080/x"}', b'{"u":"http://[::1]:80/"}', b'{"u":"http://:80/"}']
)
@example([b'{"u":"http://a.test', b'{"u":"h_t://a.test/"}', b'{"u":"http://a.test\\/x"}'])
@example([b'{"u":"http://a.test:/"}', b'{"u":"http://a.test:8x/"}', b'{"u":"http://a.test:1\n"}'])
def test_the_library_and_python_name_the_same_site_for_every_payload(
    client: redis.Redis, batch: list[bytes]
) -> None:
    lua = client.eval(SITE_OF, 0, *batch)
    assert lua == [_site_bytes(p) for p in batch]


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(values.filter(len), min_size=1, max_size=40))
@example([b'a.test\n{"u":"http://b.test/"}', b"a.test\nnot a payload", b"\n{}", b"{x"])
def test_the_library_and_python_split_every_stored_value_alike(
    client: redis.Redis, batch: list[bytes]
) -> None:
    flat = client.eval(SPLIT, 0, *batch)
    lua = list(zip(flat[::2], flat[1::2], strict=True))
    python = []
    for value in batch:
        site, payload = split_value(value)
        python.append(
            (site if isinstance(site, bytes) else site.encode("utf-8", "surrogateescape"), payload)
        )
    assert lua == python


@settings(max_examples=2000, deadline=None)
@given(payloads.map(lambda p: p.decode("utf-8")))
@example('{"u":"http://A.Test/x"}')
@example('{"u":"http://\u00e9.test/x"}')
@example('{"u":"http://a.test:8x/"}')
@example('{"u":"http://a.test:/"}')
@example('{"u":"http://u@a.test:80/"}')
@example('{"u":"http://a.test:80')
def test_a_payload_as_text_names_the_site_its_bytes_name(payload: str) -> None:
    """payload_site reads a node's payloads (text) without encoding them where it can: the
    same site as the bytes the library reads."""
    site = _site_bytes(payload.encode("utf-8", "surrogateescape"))
    assert payload_site(payload) == (None if site is None else site.decode("utf-8"))


def test_common_urls_name_their_host() -> None:
    assert payload_site('{"u":"https://Shop.Example.com:8443/p?q=1"}') == "shop.example.com"
    assert payload_site('{"u":"http://user:pw@a.test/"}') == "a.test"
    assert payload_site('{"u":"http://[2001:DB8::1]:80/"}') == "2001:db8::1"
    assert payload_site('{"url":"http://a.test/"}') is None  # no payload of the library's
    assert record_site('{"url": "http://B.test/x", "reason": "r"}') == "b.test"
    assert record_site('{"url": "http://b.test/x", "site": "c.test"}') == "c.test"
    assert record_site("not json") == ""
