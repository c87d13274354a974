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


def test_no_component_keeps_its_own_copy_of_a_setting_default() -> None:
    """A ``DEFAULT_*`` literal whose value is a registered setting's default is a copy of it
    (a derived ``DEFAULT_X = SETTINGS.default(...)`` is no copy)."""
    defaults = {
        repr(SETTINGS.default(n)) for n, s in SETTINGS.items() if s.default not in (None, "", [])
    }
    copies = []
    for path in PACKAGE.rglob("*.py"):
        if "demo" in path.parts or path.name == "entries.py":
            continue
        for constant, literal in _LITERAL_DEFAULT.findall(path.read_text(encoding="utf-8")):
            try:
                value = eval(literal.split("#")[0], {})  # a literal: numbers, strings, dicts
            except Exception:
                continue
            if repr(value) in defaults and _names_a_setting(constant):
                copies.append(f"{path.relative_to(ROOT)}: {constant} = {literal}")
    assert not copies


def _names_a_setting(constant: str) -> bool:
    """Whether DEFAULT_<X> is named after a setting (DISTCRAWL_<X>, MONGO_<X>, <X>, ...)."""
    stem = constant.removeprefix("DEFAULT_")
    return any(name.endswith(stem) for name in SETTINGS)


def test_the_freshness_middleware_sees_answers_before_httperror_drops_them() -> None:
    from scrapy.settings import default_settings

    httperror = default_settings.SPIDER_MIDDLEWARES_BASE[
        "scrapy.spidermiddlewares.httperror.HttpErrorMiddleware"
    ]
    freshness = "distcrawl.node.revisit.freshness.FreshnessMiddleware"
    assert settings.SPIDER_MIDDLEWARES[freshness] < httperror
