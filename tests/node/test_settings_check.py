"""A node's settings at start (distcrawl.node.settings_check): unknown DISTCRAWL_* names
reported with the nearest name, values checked, and the environment rule in a project of
one's own (the distcrawl.Frontier add-on)."""

from __future__ import annotations

import logging

import pytest
from scrapy.settings import Settings

from distcrawl import Frontier
from distcrawl.base.config import SettingError
from distcrawl.node.settings_check import SettingsCheck, apply_environment, unknown_names


def _settings(**values: object) -> Settings:
    settings = Settings()
    settings.setdict(values, priority="project")
    return settings


def test_unknown_names_from_the_environment_and_the_settings() -> None:
    settings = _settings(DISTCRAWL_SHARDS=4)
    settings.set("DISTCRAWL_SITE_RATEE", "2", priority="cmdline")
    settings.set("DISTCRAWL_REVISIT_GRAZE", "1m", priority="spider")
    environ = {"DISTCRAWL_REVISTI": "product:6h", "DISTCRAWL_TEST_WORKERS": "3", "HOME": "/"}
    found = {u.name: (u.where, u.nearest) for u in unknown_names(settings, environ)}
    assert found == {
        "DISTCRAWL_REVISTI": ("environment", "DISTCRAWL_REVISIT"),
        "DISTCRAWL_SITE_RATEE": ("-s", "DISTCRAWL_SITE_RATE"),
        "DISTCRAWL_REVISIT_GRAZE": ("the spider's custom_settings", "DISTCRAWL_REVISIT_GRACE"),
    }


def test_the_check_warns_once_per_unknown_name_and_refuses_a_bad_value(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DISTCRAWL_SHARDZ", "4")
    settings = _settings()
    settings.set("DISTCRAWL_SITE_RATEE", "2", priority="cmdline")
    with caplog.at_level(logging.WARNING, logger="distcrawl.node.settings_check"):
        SettingsCheck().update_settings(settings)
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warned == [
        "Unknown setting DISTCRAWL_SHARDZ (environment) is ignored; did you mean DISTCRAWL_SHARDS?",
        "Unknown setting DISTCRAWL_SITE_RATEE (-s) is ignored; did you mean DISTCRAWL_SITE_RATE?",
    ]
    settings.set("DISTCRAWL_SITE_RATE", "fast", priority="cmdline")
    with pytest.raises(SettingError, match="DISTCRAWL_SITE_RATE: 'fast' is not a number"):
        SettingsCheck().update_settings(settings)


def test_the_environment_rule_in_a_project_of_ones_own() -> None:
    """Over the project's settings module, under -s and a spider's custom_settings."""
    settings = _settings(DISTCRAWL_SHARDS=4, DISTCRAWL_SITE_RATE=1.0)
    settings.set("DISTCRAWL_SITE_CONCURRENCY", 3, priority="cmdline")
    settings.set("DISTCRAWL_REVISIT", "product:1h", priority="spider")
    environ = {
        "DISTCRAWL_SHARDS": "8",
        "DISTCRAWL_SITE_CONCURRENCY": "9",
        "DISTCRAWL_REVISIT": "product:6h",
        "MONGO_URI": "mongodb://store.test/db",
    }
    done = apply_environment(settings, environ)
    assert sorted(done) == ["DISTCRAWL_SHARDS", "MONGO_URI"]
    assert settings["DISTCRAWL_SHARDS"] == "8"
    assert settings["MONGO_URI"] == "mongodb://store.test/db"
    assert settings["DISTCRAWL_SITE_RATE"] == 1.0
    assert settings["DISTCRAWL_SITE_CONCURRENCY"] == 3
    assert settings["DISTCRAWL_REVISIT"] == "product:1h"


def test_the_frontier_add_on_applies_the_rule_and_the_check(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DISTCRAWL_REVISIT", "product:6h")
    settings = _settings(DISTCRAWL_REVISIT="product:1h")
    Frontier().update_settings(settings)
    assert settings["DISTCRAWL_REVISIT"] == "product:6h"
    monkeypatch.setenv("DISTCRAWL_REVISIT", "product:6x")
    with pytest.raises(SettingError, match="DISTCRAWL_REVISIT"):
        Frontier().update_settings(_settings())
