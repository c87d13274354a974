"""Seed parsing: plain URLs, JSON seeds, and a reason for every refusal."""

from __future__ import annotations

import pytest

from distcrawl.node.seeds.parse import BadSeed, Seed, parse_seed


def test_plain_url_seed() -> None:
    assert parse_seed(b"  https://shop.example.com/  \n") == Seed("https://shop.example.com/")


def test_json_seed_with_priority_and_meta() -> None:
    seed = parse_seed('{"url": "https://shop.example.com/c/", "priority": 7, "meta": {"tag": "x"}}')
    assert seed == Seed("https://shop.example.com/c/", 7, {"tag": "x"})


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b"", "empty_seed"),
        (b"{not json", "bad_json"),
        (b'["https://a.test/"]', "not_an_object"),
        (b'{"priority": 1}', "missing_url"),
        (b'{"url": 5}', "missing_url"),
        (b'{"url": "https://a.test/", "priority": "high"}', "bad_priority"),
        (b'{"url": "https://a.test/", "meta": []}', "bad_meta"),
        (b'{"url": "https://a.test/", "evil": 1}', "unknown_keys"),
        (b"file:///etc/passwd", "bad_scheme"),
        (b"javascript:alert(1)", "bad_scheme"),
        (b"http://", "missing_host"),
        (b"https://a.test/" + b"x" * 5000, "url_too_long"),
        (b"x" * 20000, "seed_too_large"),
        (b"\x80\x04\x95garbage", "not_utf8"),
        (b"http://127.0.0.1:6379/", "private_address"),
        (b"http://localhost/", "private_address"),
    ],
)
def test_refused_seeds_say_why(raw: bytes, reason: str) -> None:
    with pytest.raises(BadSeed) as info:
        parse_seed(raw)
    assert info.value.reason == reason


def test_allowed_private_hosts() -> None:
    allow = frozenset({"127.0.0.1"})
    assert (
        parse_seed(b"http://127.0.0.1:8000/", allow_private=allow).url == "http://127.0.0.1:8000/"
    )
    with pytest.raises(BadSeed):
        parse_seed(b"http://10.0.0.1/", allow_private=allow)
