"""distcrawl/settings.py is made from the settings registry: every registered default, the
environment variable of a setting's name over it, so ``scrapy settings --get NAME`` shows
what a node runs with; and no component keeps a default of its own."""

from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from distcrawl import settings
from distcrawl.base.config import SETTINGS

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "distcrawl"


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in SETTINGS}
    env.update(extra)
    return env


def test_settings_py_holds_every_registered_default_but_the_derived() -> None:
    fresh = SETTINGS.project_settings({})
    for name, setting in SETTINGS.items():
        if setting.derive is not None:
            assert not hasattr(settings, name) or name in os.environ, name
        elif name not in os.environ:
            assert getattr(settings, name) == fresh[name], name


def test_the_environment_supplies_settings_py_as_text(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DISTCRAWL_REVISIT", "product:6h,listing:1h")
    monkeypatch.setenv("MONGO_COLLECTION", "items")
    monkeypatch.setenv("DISTCRAWL_CLOSE_WHEN_DRAINED", "1")
    try:
        module = importlib.reload(settings)
        assert module.DISTCRAWL_REVISIT == "product:6h,listing:1h"
        assert module.MONGO_COLLECTION == "items"
        assert module.DISTCRAWL_CLOSE_WHEN_DRAINED == "1"
    finally:
        monkeypatch.undo()
        importlib.reload(settings)


def test_no_registry_object_leaks_into_the_settings() -> None:
    # Scrapy takes every upper-case name of the module as a setting
    names = {n for n in dir(settings) if n.isupper()}
    components = {
        "BOT_NAME",
        "SPIDER_MODULES",
        "NEWSPIDER_MODULE",
        "COMMANDS_MODULE",
        "SCHEDULER",
        "ADDONS",
        "ITEM_PIPELINES",
        "SPIDER_MIDDLEWARES",
        "DOWNLOADER_MIDDLEWARES",
        "DOWNLOAD_HANDLERS",
        "EXTENSIONS",
    }
    assert names - components <= set(SETTINGS), names - components - set(SETTINGS)


@pytest.mark.parametrize(
    ("name", "env", "arg", "shown"),
    [
        ("DISTCRAWL_SITE_RATE", {}, [], "0.0"),
        ("RETRY_TIMES", {}, [], "3"),
        ("DISTCRAWL_REVISIT", {"DISTCRAWL_REVISIT": "product:6h"}, [], "product:6h"),
        ("DISTCRAWL_REVISIT", {}, ["-s", "DISTCRAWL_REVISIT=product:6h"], "product:6h"),
        # -s wins over the environment
        ("DISTCRAWL_SHARDS", {"DISTCRAWL_SHARDS": "4"}, ["-s", "DISTCRAWL_SHARDS=8"], "8"),
    ],
)
def test_scrapy_settings_get_shows_what_a_node_runs_with(
    name: str, env: dict[str, str], arg: list[str], shown: str
) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "scrapy", "settings", "--get", name, *arg],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=_clean_env(**env),
        timeout=120,
    )
    assert done.stdout.strip() == shown, done.stderr


#: a module-level DEFAULT_* constant holding a literal: a second definition of a default
_LITERAL_DEFAULT = re.compile(r"^(DEFAULT_[A-Z_]+)\s*(?::[^=]+)?=\s*([-\d\"'({\[].*)$", re.M)


def _copies_in(module: str, text: str) -> list[tuple[str, str, str]]:
    """(module, constant, setting) for each ``DEFAULT_<X>`` literal of *text* equal to the
    default of a setting named ``<X>`` or ``<PREFIX>_<X>``: a copy of that default."""
    found = []
    for constant, literal in _LITERAL_DEFAULT.findall(text):
        try:
            value = eval(literal.split("#")[0], {})  # a literal: numbers, strings, dicts
        except Exception:
            continue
        stem = constant.removeprefix("DEFAULT_")
        for name, setting in SETTINGS.items():
            named = name == stem or name.endswith("_" + stem)
            if named and setting.default is not None and setting.default == value:
                found.append((module, constant, name))
    return found


def _copies() -> list[tuple[str, str, str]]:
    """The copies of setting defaults in distcrawl's modules (the registry's own aside)."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name != "entries.py":
            module = str(path.relative_to(ROOT))
            found += _copies_in(module, path.read_text(encoding="utf-8"))
    return found


def test_no_component_keeps_its_own_copy_of_a_setting_default() -> None:
    """A derived ``DEFAULT_X = SETTINGS.default(...)`` is no copy; a literal is."""
    assert not _copies()
    # the check finds a copy where there is one
    copy = "#: URLs the Bloom filter is sized for\nDEFAULT_BLOOM_CAPACITY = 10_000_000\n"
    found = [("m.py", "DEFAULT_BLOOM_CAPACITY", "DISTCRAWL_BLOOM_CAPACITY")]
    assert _copies_in("m.py", copy) == found
    derived = 'DEFAULT_BLOOM_CAPACITY: int = SETTINGS.default("DISTCRAWL_BLOOM_CAPACITY")\n'
    assert _copies_in("m.py", derived) == []


def test_the_freshness_middleware_sees_answers_before_httperror_drops_them() -> None:
    from scrapy.settings import default_settings

    httperror = default_settings.SPIDER_MIDDLEWARES_BASE[
        "scrapy.spidermiddlewares.httperror.HttpErrorMiddleware"
    ]
    freshness = "distcrawl.node.revisit.freshness.FreshnessMiddleware"
    assert settings.SPIDER_MIDDLEWARES[freshness] < httperror
