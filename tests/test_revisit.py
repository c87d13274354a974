"""Revisit mode's rules: intervals, the backoff rule, conditional requests, profile overrides."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from scrapy.http import HtmlResponse, Request, Response
from scrapy.settings import Settings

from distcrawl.extract import load_profiles
from distcrawl.extract.profile import ProfileError
from distcrawl.frontier import codec
from distcrawl.frontier.revisit import (
    Outcome,
    RevisitPolicy,
    conditional_headers,
    parse_intervals,
    revisit_payload,
)

URL = "http://shop.test/p/1"


def policy(**settings: object) -> RevisitPolicy:
    found = RevisitPolicy.from_settings(Settings({"DISTCRAWL_REVISIT": "product:10s", **settings}))
    assert found is not None
    return found


def answer(status: int = 200, body: bytes = b"<html>a</html>", **headers: str) -> Outcome:
    cls = HtmlResponse if status == 200 else Response
    return Outcome.of(cls(URL, status=status, body=body, headers=headers))


def test_intervals_parse_with_units_and_refuse_nonsense() -> None:
    assert parse_intervals("product:6h, listing:1h,category:1d,*:90") == {
        "product": 21600.0,
        "listing": 3600.0,
        "category": 86400.0,
        "*": 90.0,
    }
    for bad in ("product", "product:soon", "product:0", ":5m"):
        with pytest.raises(ValueError, match="DISTCRAWL_REVISIT"):
            parse_intervals(bad)


def test_off_without_the_setting() -> None:
    assert RevisitPolicy.from_settings(Settings({})) is None


def test_unchanged_pages_back_off_up_to_the_cap_and_a_change_resets() -> None:
    p = policy()
    first = p.next_visit(URL, "product", None, answer(ETag='"v1"'))
    assert first is not None
    seconds, state, verdict = first
    assert (seconds, verdict, state["e"]) == (10.0, "first", '"v1"')
    waits = []
    for _ in range(6):  # a 304 each time
        plan = p.next_visit(URL, "product", state, answer(304, b""))
        assert plan is not None
        seconds, state, verdict = plan
        assert verdict == "unchanged" and state["e"] == '"v1"'  # validators kept
        waits.append(seconds)
    assert waits == [15.0, 22.5, 33.75, 40.0, 40.0, 40.0]
    # the same body again is unchanged too; a new one resets the interval
    same = p.next_visit(URL, "product", {**state, "h": answer().digest}, answer())
    assert same is not None and same[2] == "unchanged"
    changed = p.next_visit(URL, "product", state, answer(body=b"<html>b</html>"))
    assert changed is not None and changed[0] == 10.0 and changed[2] == "changed"
    assert "x" not in changed[1]


def test_gone_pages_come_back_slowly_and_other_kinds_not_at_all() -> None:
    p = policy()
    gone = p.next_visit(URL, "product", {"h": "ab"}, answer(404, b"no"))
    assert gone is not None and gone[0] == 40.0 and gone[2] == "gone"
    assert policy(DISTCRAWL_REVISIT="product:10s,gone:1d").next_visit(
        URL, "product", None, answer(410, b"")
    ) == (86400.0, {"x": 4.0}, "gone")
    assert p.next_visit(URL, "listing", None, answer()) is None
    assert policy(DISTCRAWL_REVISIT="*:1m").next_visit(URL, "listing", None, answer()) is not None


def test_the_forget_horizon_covers_the_longest_wait() -> None:
    assert policy(DISTCRAWL_REVISIT="product:10s,listing:1m").forget_ms == 1_080_000
    assert policy(DISTCRAWL_REVISIT_FORGET="1h").forget_ms == 3_600_000


def test_next_payload_carries_the_validators_and_no_old_conditional_header() -> None:
    request = Request(URL, meta={"page_kind": "product"}, headers={"If-None-Match": '"old"'})
    payload = codec.encode(request, None, priority=False)
    state = {"e": '"v2"', "l": "Tue, 01 Dec 2026 10:00:00 GMT", "h": "ff"}
    again = codec.decode(revisit_payload(payload, state))
    assert again.meta["distcrawl_revisit"] == state
    assert again.meta["page_kind"] == "product"
    assert b"If-None-Match" not in again.headers
    assert conditional_headers(again.meta["distcrawl_revisit"]) == {
        "If-None-Match": '"v2"',
        "If-Modified-Since": "Tue, 01 Dec 2026 10:00:00 GMT",
    }
    assert len(json.loads(revisit_payload(payload, state))["mt"]) == 2  # ~k and ~v only


def test_site_profiles_override_intervals(tmp_path: Path) -> None:
    (tmp_path / "shop.toml").write_text(
        '[site]\ndomains = ["shop.test"]\n[revisit]\nproduct = "2m"\nlisting = 30\n'
    )
    profiles = load_profiles([tmp_path / "shop.toml"])
    p = RevisitPolicy.from_settings(Settings({"DISTCRAWL_REVISIT": "product:10s"}), profiles)
    assert p is not None
    assert p.base_interval(URL, "product") == 120.0
    assert p.base_interval(URL, "listing") == 30.0
    assert p.base_interval("http://other.test/p", "product") == 10.0
    assert p.base_interval("http://other.test/p", "listing") is None
    # a profile alone turns revisit mode on for its sites
    only = RevisitPolicy.from_settings(Settings({}), profiles)
    assert only is not None and only.base_interval(URL, "listing") == 30.0
    (tmp_path / "bad.toml").write_text('[site]\ndomains = ["x.test"]\n[revisit]\nproduct = "x"\n')
    with pytest.raises(ProfileError, match=r"revisit\.product"):
        load_profiles([tmp_path / "bad.toml"])
