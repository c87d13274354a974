"""Revisit mode's rules: intervals, the backoff rule, conditional requests, profile overrides."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from scrapy.http import HtmlResponse, Request, Response
from scrapy.settings import Settings

from distcrawl.base.durations import parse_intervals
from distcrawl.extract import load_profiles
from distcrawl.extract.profile import ProfileError
from distcrawl.node.requests import codec
from distcrawl.node.revisit.schedule import (
    Outcome,
    RevisitPolicy,
    conditional_headers,
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


T0 = 1_800_000_000.0  # a unix time the tests' visits start at


def test_fixed_rate_schedule_from_the_previous_due_time_not_from_the_visit() -> None:
    p = policy()  # product:10s, early 0.1: one visit every 9 s at most 10 s apart
    first = p.next_visit(URL, "product", None, answer(ETag='"v1"'), now=T0)
    assert first is not None
    seconds, state, verdict = first
    assert (seconds, verdict, state["e"], state["d"]) == (9.0, "first", '"v1"', 1_800_000_009_000)
    # the crawl ran 2 s behind: the next visit is due 9 s after the previous *due* time
    late = p.next_visit(URL, "product", state, answer(304, b""), now=T0 + 11)
    assert late is not None
    assert late[0] == 7.0 and late[1]["d"] == 1_800_000_018_000 and late[2] == "unchanged"
    assert "x" not in late[1] and late[1]["e"] == '"v1"'  # no backoff by default
    # more than most of a period behind: a new phase starts a quarter period from now
    behind = p.next_visit(URL, "product", late[1], answer(304, b""), now=T0 + 26)
    assert behind is not None and behind[0] == 2.25
    assert behind[1]["d"] == 1_800_000_028_250
    # no early margin: the plain interval
    exact = policy(DISTCRAWL_REVISIT_EARLY="0").next_visit(URL, "product", None, answer(), now=T0)
    assert exact is not None and exact[0] == 10.0
    with pytest.raises(ValueError, match="DISTCRAWL_REVISIT_EARLY"):
        policy(DISTCRAWL_REVISIT_EARLY="1")


def test_unchanged_pages_back_off_up_to_the_cap_when_asked_and_a_change_resets() -> None:
    p = policy(DISTCRAWL_REVISIT_MAX_BACKOFF="4", DISTCRAWL_REVISIT_EARLY="0")
    first = p.next_visit(URL, "product", None, answer(ETag='"v1"'), now=T0)
    assert first is not None
    seconds, state, verdict = first
    now, waits = T0, []
    for _ in range(6):  # a 304 each time, each visit on time
        now += seconds
        plan = p.next_visit(URL, "product", state, answer(304, b""), now=now)
        assert plan is not None
        seconds, state, verdict = plan
        assert verdict == "unchanged" and state["e"] == '"v1"'  # validators kept
        waits.append(round(seconds, 6))
    assert waits == [15.0, 22.5, 33.75, 40.0, 40.0, 40.0]
    # the same body again is unchanged too; a new one resets the interval
    same = p.next_visit(URL, "product", {**state, "h": answer().digest}, answer(), now=now)
    assert same is not None and same[2] == "unchanged"
    changed = p.next_visit(URL, "product", state, answer(body=b"<html>b</html>"), now=now + seconds)
    assert changed is not None and changed[0] == 10.0 and changed[2] == "changed"
    assert "x" not in changed[1]


def test_gone_pages_come_back_slowly_and_other_kinds_not_at_all() -> None:
    p = policy()
    gone = p.next_visit(URL, "product", {"h": "ab"}, answer(404, b"no"), now=T0)
    assert gone is not None and gone[0] == 40.0 and gone[2] == "gone"
    assert policy(DISTCRAWL_REVISIT="product:10s,gone:1d").next_visit(
        URL, "product", None, answer(410, b""), now=T0
    ) == (86400.0, {"x": 4.0, "d": round((T0 + 86400) * 1000)}, "gone")
    # a product in no listing is gone whatever its page answered
    unlisted = p.next_visit(URL, "product", {"h": "ab"}, answer(), now=T0, gone=True)
    assert unlisted is not None and unlisted[0] == 40.0 and unlisted[2] == "gone"
    assert p.next_visit(URL, "listing", None, answer()) is None
    assert policy(DISTCRAWL_REVISIT="*:1m").next_visit(URL, "listing", None, answer()) is not None


def test_the_forget_horizon_covers_the_longest_wait() -> None:
    # twice the longest wait (a gone page's: 4 intervals) plus 600 s
    assert policy(DISTCRAWL_REVISIT="product:10s,listing:1m").forget_ms == 1_080_000
    assert policy(DISTCRAWL_REVISIT="listing:1m", DISTCRAWL_REVISIT_MAX_BACKOFF="8").forget_ms == (
        1_560_000
    )
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
    # the longest interval of a kind anywhere (what the unlisted grace is counted from)
    assert (p.longest("listing"), p.longest("product"), p.longest("category")) == (30, 120, None)
    # a profile alone turns revisit mode on for its sites
    only = RevisitPolicy.from_settings(Settings({}), profiles)
    assert only is not None and only.base_interval(URL, "listing") == 30.0
    (tmp_path / "bad.toml").write_text('[site]\ndomains = ["x.test"]\n[revisit]\nproduct = "x"\n')
    with pytest.raises(ProfileError, match=r"revisit\.product"):
        load_profiles([tmp_path / "bad.toml"])
