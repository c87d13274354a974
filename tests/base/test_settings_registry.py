"""The settings registry (distcrawl.base.config): each setting once, read alike from text and
Python, checked, derived, reported when unknown, and listed for the reference."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from distcrawl.base.config import SETTINGS, Registry, Setting, SettingError, SettingRecord
from distcrawl.base.config.kinds import DURATION, INT, INTERVALS, show_duration
from distcrawl.base.config.registry import PREFIX

PACKAGE = Path(__file__).resolve().parents[2] / "distcrawl"
#: a setting name in quotes, as code reads or names one
_QUOTED = re.compile(r"""["'](DISTCRAWL_[A-Z0-9_]*[A-Z0-9])["']""")


def test_a_setting_is_defined_once() -> None:
    one = Setting("DISTCRAWL_X", INT, 1, "x")
    with pytest.raises(ValueError, match="DISTCRAWL_X is defined twice"):
        Registry([one, one])


def test_at_most_29_public_distcrawl_settings() -> None:
    public = [s.name for s in SETTINGS.public() if s.name.startswith(PREFIX)]
    assert len(public) <= 29, public


def test_every_distcrawl_name_the_code_quotes_is_registered() -> None:
    """No component reads a DISTCRAWL_* setting the registry does not define."""
    quoted = {
        (path.relative_to(PACKAGE), name)
        for path in PACKAGE.rglob("*.py")
        for name in _QUOTED.findall(path.read_text(encoding="utf-8"))
    }
    stray = sorted(
        f"{path}: {name}"
        for path, name in quoted
        if name not in SETTINGS and name not in SETTINGS.not_settings
    )
    assert not stray


def test_every_default_reads_back_from_its_text() -> None:
    """The text a setting's value is shown as (-s, the environment, the crawl's record) reads
    back to the same value: one reading for text and Python alike."""
    for name, setting in SETTINGS.items():
        value = SETTINGS.default(name)
        if value is None:
            continue
        text = setting.show(value)
        assert SETTINGS.value({name: text}, name) == value, (name, text)


@pytest.mark.parametrize(
    ("name", "text", "python"),
    [
        ("DISTCRAWL_SHARDS", "4", 4),
        ("DISTCRAWL_CLOSE_WHEN_DRAINED", "1", True),
        ("DISTCRAWL_CLOSE_WHEN_DRAINED", "false", False),
        ("DISTCRAWL_REVISIT", "product:6h,listing:1h", {"product": 21600, "listing": 3600}),
        ("DISTCRAWL_SITE_LIMITS", '{"a.test": {"rate": 2}}', {"a.test": {"rate": 2}}),
        ("DISTCRAWL_ALLOW_PRIVATE", "127.0.0.1,localhost", ["127.0.0.1", "localhost"]),
        ("DISTCRAWL_GONE_STATUSES", "404,410,451", [404, 410, 451]),
        ("DISTCRAWL_SITE_PROFILES", "a.toml:b/", ["a.toml", "b/"]),
        ("PAGE_PRIORITIES", '{"product": 5}', {"product": 5}),
        ("MONGO_WRITE_CONCERN", "majority", {"w": "majority", "j": True}),
        ("DISTCRAWL_DUPEFILTER", " Bloom ", "bloom"),
    ],
)
def test_text_and_python_read_alike(name: str, text: str, python: object) -> None:
    assert SETTINGS.value({name: text}, name) == SETTINGS.value({name: python}, name)


def test_a_partial_page_priorities_changes_only_the_kinds_it_names() -> None:
    merged = SETTINGS.value({"PAGE_PRIORITIES": {"product": 5}}, "PAGE_PRIORITIES")
    assert merged == {**SETTINGS.default("PAGE_PRIORITIES"), "product": 5}


def test_a_caller_cannot_change_the_registry_default() -> None:
    SETTINGS.default("PAGE_PRIORITIES")["seed"] = -1
    SETTINGS.default("DISTCRAWL_GONE_STATUSES").append(200)
    assert SETTINGS.default("PAGE_PRIORITIES")["seed"] == 1000
    assert SETTINGS.default("DISTCRAWL_GONE_STATUSES") == [404, 410]


@pytest.mark.parametrize(
    ("name", "text", "reason"),
    [
        ("DISTCRAWL_SHARDS", "0", "DISTCRAWL_SHARDS must be within 1..1024, not 0"),
        ("DISTCRAWL_SHARDS", "many", "DISTCRAWL_SHARDS: 'many' is not an integer"),
        ("DISTCRAWL_DUPEFILTER", "cuckoo", "DISTCRAWL_DUPEFILTER must be exact or bloom"),
        ("DISTCRAWL_BLOOM_ERROR_RATE", "1", "must be between 0 and 1, not 1"),
        ("DISTCRAWL_REVISIT", "product:6x", "DISTCRAWL_REVISIT: product: '6x' is not a duration"),
        ("DISTCRAWL_REVISIT_EARLY", "1", "DISTCRAWL_REVISIT_EARLY must be within 0..1 (not 1)"),
        ("DISTCRAWL_CLOSE_WHEN_DRAINED", "maybe", "'maybe' is not a boolean"),
        ("MONGO_WRITE_CONCERN", "0", "MONGO_WRITE_CONCERN must be acknowledged"),
        ("DISTCRAWL_SITE_LIMITS", "{rate: 2}", "is not a JSON object"),
    ],
)
def test_a_bad_value_names_the_setting_and_the_reason(name: str, text: str, reason: str) -> None:
    with pytest.raises(SettingError, match=re.escape(reason)):
        SETTINGS.value({name: text}, name)
    (problem,) = SETTINGS.problems({name: text})
    assert reason in problem


def test_problems_say_where_a_value_came_from() -> None:
    from scrapy.settings import Settings

    settings = Settings()
    settings.set("DISTCRAWL_SHARDS", "0", priority="project")
    settings.set("DISTCRAWL_SITE_RATE", "fast", priority="cmdline")
    settings.set("DISTCRAWL_SITE_CONCURRENCY", "-1", priority="spider")
    found = SETTINGS.problems(settings, {"DISTCRAWL_SHARDS": "0"})
    assert any(p.endswith("(from the environment)") and "SHARDS" in p for p in found), found
    assert any(p.endswith("(from -s)") and "SITE_RATE" in p for p in found), found
    assert any(p.endswith("(from the spider's custom_settings)") for p in found), found


def test_derived_defaults_follow_what_they_derive_from() -> None:
    assert SETTINGS.default("DISTCRAWL_PREFETCH") == 64  # 4 x 16
    assert SETTINGS.value({"CONCURRENT_REQUESTS": "2"}, "DISTCRAWL_PREFETCH") == 8
    assert SETTINGS.value({"CONCURRENT_REQUESTS": 500}, "DISTCRAWL_PREFETCH") == 256
    assert SETTINGS.value({"CONCURRENT_REQUESTS": "2"}, "DISTCRAWL_SEED_BATCH") == 8
    assert SETTINGS.default("DISTCRAWL_HEARTBEAT_INTERVAL") == 2.0  # 30 / 15
    short = {"DISTCRAWL_HEARTBEAT_TIMEOUT": "6"}
    assert SETTINGS.value(short, "DISTCRAWL_HEARTBEAT_INTERVAL") == 0.4
    assert SETTINGS.value(short, "DISTCRAWL_DRAIN_GRACE") == pytest.approx(0.6)
    # a long timeout does not slow the beats the status reads its rates from
    long = {"DISTCRAWL_HEARTBEAT_TIMEOUT": "600"}
    assert SETTINGS.value(long, "DISTCRAWL_HEARTBEAT_INTERVAL") == 2.0
    # a value given wins over the derivation
    given = {"CONCURRENT_REQUESTS": "2", "DISTCRAWL_PREFETCH": "1"}
    assert SETTINGS.value(given, "DISTCRAWL_PREFETCH") == 1
    assert SETTINGS.value(given, "DISTCRAWL_SEED_BATCH") == 1


def test_the_environment_supplies_a_setting_of_its_name_as_text() -> None:
    environ = {
        "DISTCRAWL_REVISIT": "product:6h",
        "REDIS_URL": "redis://h:1/0",
        "LOG_LEVEL": "DEBUG",
        "DISTCRAWL_PREFETCH": "8",
        "HOME": "/root",
    }
    project = SETTINGS.project_settings(environ)
    assert project["DISTCRAWL_REVISIT"] == "product:6h"
    assert project["REDIS_URL"] == "redis://h:1/0"
    assert project["LOG_LEVEL"] == "DEBUG"
    assert project["DISTCRAWL_PREFETCH"] == "8"  # a derived setting, set: as given
    assert project["DISTCRAWL_SHARDS"] == 16
    assert "HOME" not in project
    # derived settings left unset keep following what they derive from
    assert "DISTCRAWL_SEED_BATCH" not in project
    assert SETTINGS.from_environment({"DISTCRAWL_SHARDS": "4"}, "DISTCRAWL_SHARDS") == 4
    assert SETTINGS.from_environment({}, "DISTCRAWL_SHARDS") == 16


def test_an_unknown_name_comes_with_the_nearest_setting_name() -> None:
    found = SETTINGS.unknown(
        ["DISTCRAWL_SITE_RATEE", "DISTCRAWL_REVISTI", "DISTCRAWL_SHARDS", "DISTCRAWL_QQQQ"], "-s"
    )
    near = {u.name: u.nearest for u in found}
    assert near == {
        "DISTCRAWL_SITE_RATEE": "DISTCRAWL_SITE_RATE",
        "DISTCRAWL_REVISTI": "DISTCRAWL_REVISIT",
        "DISTCRAWL_QQQQ": None,
    }
    message = next(u for u in found if u.name == "DISTCRAWL_SITE_RATEE").message()
    assert message == (
        "Unknown setting DISTCRAWL_SITE_RATEE (-s) is ignored; did you mean DISTCRAWL_SITE_RATE?"
    )


def test_the_tooling_environment_variables_are_not_reported() -> None:
    tooling = sorted(SETTINGS.not_settings)
    assert tooling and not SETTINGS.unknown(tooling, "environment")
    assert SETTINGS.unknown(tooling, "-s")  # as settings they are still no settings


def test_the_reference_lists_each_public_setting_once_as_the_registry_defines_it() -> None:
    records = SETTINGS.reference()
    assert [r.name for r in records] == [s.name for s in SETTINGS.public()]
    for record in records:
        assert isinstance(record, SettingRecord)
        setting = SETTINGS[record.name]
        assert record.type == setting.kind.name
        assert record.help == setting.help and record.help
        assert record.scope == setting.scope
        assert record.env == setting.name  # the one environment rule
        if setting.derived:
            assert record.default == setting.derived
        elif setting.default in (None, ""):
            assert record.default == "unset"
        else:
            assert SETTINGS.value({record.name: record.default}, record.name) == setting.default
    hidden = {r.name for r in SETTINGS.reference(hidden=True)} - {r.name for r in records}
    assert hidden == {s.name for s in SETTINGS.values() if not s.public}
    scrapy = SETTINGS.reference(scrapy=True)
    assert scrapy and all(SETTINGS[r.name].scrapy for r in scrapy)
    assert not any(SETTINGS[r.name].scrapy for r in SETTINGS.reference(scrapy=False))


def test_the_crawl_wide_settings_are_the_ones_every_node_must_share() -> None:
    assert {s.name for s in SETTINGS.crawl_wide()} == {
        "DISTCRAWL_SHARDS",
        "DISTCRAWL_DUPEFILTER",
        "DISTCRAWL_BLOOM_CAPACITY",
        "DISTCRAWL_BLOOM_ERROR_RATE",
        "DISTCRAWL_START_URLS_KEY",
        "DISTCRAWL_HEARTBEAT_TIMEOUT",
        "PAGE_PRIORITIES",
        "DISTCRAWL_REVISIT",
        "DISTCRAWL_REVISIT_MAX_BACKOFF",
        "DISTCRAWL_REVISIT_BACKOFF",
        "DISTCRAWL_REVISIT_EARLY",
        "DISTCRAWL_REVISIT_FORGET",
        "DISTCRAWL_ERROR_GROUPS_MAX",
        "DISTCRAWL_SNAPSHOTS_MAX",
        "DISTCRAWL_QUALITY_FIELDS",
        "DISTCRAWL_QUALITY_WINDOW",
        "DISTCRAWL_QUALITY_DROP",
    }


def test_durations_show_in_their_largest_whole_unit() -> None:
    assert show_duration(21600.0) == "6h"
    assert show_duration(90.0) == "90s"
    assert show_duration(0.5) == "0.5s"
    assert show_duration(1209600.0) == "2w"
    assert DURATION.read("0") == 0.0
    assert INTERVALS.show(INTERVALS.read("product:6h,listing:90m")) == "listing:90m,product:6h"
