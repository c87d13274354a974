"""The generated references agree with the code, and the pages name only settings, commands,
options, stats, metrics, keys and tests that exist."""

from __future__ import annotations

import ast
import os
import re
from pathlib import Path

import distcrawl_docs
import docblocks
import pytest
import render
import sources
from scrapy.settings import default_settings

from distcrawl.base.config import SETTINGS
from distcrawl.node import compat

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "distcrawl"

_GETTERS = {"get", "getint", "getfloat", "getbool", "getlist", "getdict", "getpriority"}
#: the registry's readers: ``SETTINGS.value(settings, NAME)``, ``SETTINGS.default(NAME)``, ...
_REGISTRY = {"value", "shown", "default", "from_environment"}
#: scrapy-redis' settings a moved project keeps: honoured or translated (docs/guides/scrapy-redis)
_SCRAPY_REDIS = {*compat.HONOURED, *compat.TRANSLATED}
#: read by the code but not settings a user sets
_NOT_SETTINGS = {"COLUMNS", "COMMANDS_MODULE", "SCHEDULER", "REQUEST_FINGERPRINTER_CLASS"}


def settings_read_in_code() -> dict[str, str]:
    """Upper-case names the code reads from Scrapy settings or the registry -> a module that
    reads it."""
    found: dict[str, str] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            attr, args = node.func.attr, node.args
            if attr in _GETTERS and ast.unparse(node.func.value) != "os.environ":
                name = args[0] if args else None
            elif attr in _REGISTRY and ast.unparse(node.func.value) == "SETTINGS":
                name = args[-1] if args else None
            else:
                continue
            if (
                isinstance(name, ast.Constant)
                and isinstance(name.value, str)
                and re.fullmatch(r"[A-Z][A-Z0-9_]{2,}", name.value)
            ):
                found.setdefault(name.value, str(path.relative_to(ROOT)))
    return found


@pytest.fixture(scope="module")
def settings() -> dict[str, sources.Setting]:
    return {s.name: s for s in sources.SETTINGS_SOURCE()}


def test_every_setting_the_code_reads_is_in_the_reference(settings) -> None:
    """Or it is one of the registry's hidden settings (internal constants tests may set)."""
    missing = {
        name: where
        for name, where in settings_read_in_code().items()
        if name not in settings
        and name not in _NOT_SETTINGS
        and not hasattr(default_settings, name)
        and not (name in SETTINGS and not SETTINGS[name].public)
        and name not in _SCRAPY_REDIS
    }
    assert not missing, f"settings read by the code but not documented: {missing}"


def test_the_reference_is_the_registry(settings) -> None:
    """Each public setting once, with the registry's kind, help, scope and environment name;
    its default shown as the registry has it (reads back to the same value)."""
    assert list(settings) == [r.name for r in SETTINGS.reference(scrapy=False)]
    for record in SETTINGS.reference(scrapy=False):
        shown = settings[record.name]
        assert (shown.type, shown.help, shown.scope, shown.env) == (
            record.type,
            record.help,
            record.scope,
            record.name,
        )
        default = SETTINGS.default(record.name)
        if shown.default in ("on", "off"):
            assert default is (shown.default == "on"), record.name
        elif shown.default.startswith("`"):
            text = shown.default.strip("`")
            assert SETTINGS.value({record.name: text}, record.name) == default, record.name
        else:
            assert shown.default == record.default, record.name  # unset, or derived


def test_the_generated_settings_page_renders_the_registry(tmp_path: Path) -> None:
    pages = distcrawl_docs.write_generated(tmp_path)
    assert pages["settings.md"] == render.settings(sources.settings_from_registry())
    for record in SETTINGS.reference(scrapy=False):
        assert f"`{record.name}`\n: " in pages["settings.md"]
    for record in SETTINGS.reference(hidden=True):
        if not SETTINGS[record.name].public:
            assert f"`{record.name}`" not in pages["settings.md"]
    rule = pages["settings-rule.md"]
    assert "an environment variable with the setting's exact name supplies it" in rule


def test_every_documented_setting_exists(settings) -> None:
    assert not [n for n in settings if n not in SETTINGS]


def test_settings_py_holds_the_defaults_of_the_reference() -> None:
    from distcrawl import settings as module

    for record in SETTINGS.reference(hidden=True):
        setting = SETTINGS[record.name]
        if setting.derive is None and record.name not in os.environ:
            assert getattr(module, record.name) == setting.default, record.name


def test_every_scrapy_setting_distcrawl_changes_says_why() -> None:
    assert all(why for _, _, _, why in sources.scrapy_changes()), sources.scrapy_changes()


def test_every_command_and_option_is_in_the_reference() -> None:
    from distcrawl.cli import SUBCOMMANDS

    records = {c.name: c for c in sources.COMMANDS_SOURCE()}
    assert set(SUBCOMMANDS) <= set(records)
    scrapy_modules = {
        p.stem for p in (PACKAGE / "commands").glob("*.py") if not p.stem.startswith("_")
    }
    assert scrapy_modules <= set(records)
    for record in records.values():
        assert record.summary and record.usage, record.name
        for option in record.options:
            assert option.help.strip(), f"{record.name} {option.flags} has no help text"


def test_every_counted_stat_is_documented_and_every_documented_one_is_counted() -> None:
    documented = [s.key for s in sources.STATS_SOURCE()]
    families = {sources._family(k) for k in documented}
    counted = sources.counted_stats()
    undocumented = [
        key
        for key in counted
        if sources._family(key) not in families
        and not any("<*>" in f and sources._matches(f, key) for f in families)
        and not any(sources._matches(sources._family(key), k) for k in documented)
    ]
    assert not undocumented, f"stats counted by the code but not documented: {undocumented}"
    uncounted = [s.key for s in sources.STATS_SOURCE() if not s.counted_in]
    assert not uncounted, f"documented stats the code never counts: {uncounted}"


def test_every_metric_is_in_the_reference_with_its_type() -> None:
    from distcrawl.web.metrics import METRICS

    records = {m.name.removesuffix("_total"): m for m in sources.METRICS_SOURCE()}
    assert set(records) == set(METRICS)
    assert {m.type for m in records.values()} <= {"gauge", "counter"}


def test_every_key_the_code_builds_is_in_the_key_layout() -> None:
    layout = {sources.key_family(k.pattern) for k in sources.KEYS_SOURCE()}
    missing = sorted(k for k in sources.keys_in_code() if sources.key_family(k) not in layout)
    assert not missing, f"keys built in frontier/keys.py but missing from the layout: {missing}"


def test_the_generated_pages_render(tmp_path: Path) -> None:
    pages = distcrawl_docs.write_generated(tmp_path)
    assert all(text.strip() for text in pages.values())
    assert "DISTCRAWL_SHARDS" in pages["settings.md"]
    assert "{catalog:k}:queue" in pages["redis-keys.md"]
    assert "distcrawl_up" in pages["metrics.md"]


# --------------------------------------------------------------------------- the pages' words


def _pages() -> str:
    return "\n".join(p.read_text(encoding="utf-8") for p in docblocks.doc_files())


def _bench_words() -> set[str]:
    """Names the benches use (their options' environment, their JSON keys)."""
    text = "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "bench").glob("*.py"))
    return set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text))


def test_the_pages_name_only_settings_that_exist(settings) -> None:
    envs = {s.env for s in settings.values() if s.env}
    # hidden settings exist too (internal constants the design pages and benches name)
    known = set(settings) | set(SETTINGS) | envs | set(settings_read_in_code()) | _bench_words()
    named = set(re.findall(r"\b((?:DISTCRAWL|MONGO)_[A-Z][A-Z0-9_]*[A-Z0-9])\b", _pages()))
    unknown = sorted(n for n in named if n not in known and not n.endswith("_"))
    assert not unknown, f"the docs name settings that do not exist: {unknown}"


def test_the_pages_name_only_metrics_that_exist() -> None:
    names = {m.name for m in sources.METRICS_SOURCE()} | {
        m.name.removesuffix("_total") for m in sources.METRICS_SOURCE()
    }
    named = set(re.findall(r"\b(distcrawl_[a-z_]+)\b", _pages()))
    named = {n for n in named if not n.endswith("_")}  # distcrawl_frontier_<hash>: a library
    unknown = sorted(n for n in named if n not in names and n not in _bench_words())
    assert not unknown, f"the docs name metrics that do not exist: {unknown}"


def test_the_pages_name_only_stats_that_exist() -> None:
    documented = [s.key for s in sources.STATS_SOURCE()]
    families = {sources._family(k) for k in documented}
    named = set(
        re.findall(
            r"`((?:frontier|pipeline|revisit|freshness|catalog|safety|retry)/[a-z_/<>]+)`",
            _pages(),
        )
    )
    unknown = [
        key
        for key in named
        if key not in documented
        and sources._family(key) not in families
        and not any("<*>" in f and sources._matches(f, key) for f in families)
        and not key.endswith("/*")
    ]
    assert not unknown, f"the docs name stats keys that do not exist: {sorted(unknown)}"


def test_the_pages_name_only_options_that_exist() -> None:
    options = {
        c.name: {f for o in c.options for f in o.flags.split(", ")}
        for c in sources.COMMANDS_SOURCE()
    }
    wrong = []
    for path in docblocks.doc_files():
        for line in path.read_text(encoding="utf-8").splitlines():
            for match in re.finditer(r"\b(?:distcrawl|scrapy) ([a-z]+)((?: +[^\s`|;&#)]+)*)", line):
                name, rest = match.group(1), match.group(2)
                if name not in options:
                    continue
                for flag in re.findall(r"(?<![\w-])(--?[a-z][a-z-]*)", rest):
                    if flag not in options[name] and flag not in ("-h", "--help", "-s", "--set"):
                        wrong.append(f"{path.relative_to(ROOT)}: {name} {flag}")
    assert not wrong, f"options the commands do not have: {wrong}"


def test_the_tests_the_guarantees_name_exist() -> None:
    text = (ROOT / "docs" / "design" / "guarantees.md").read_text(encoding="utf-8")
    text += (ROOT / "docs" / "design" / "hostile-input.md").read_text(encoding="utf-8")
    named = set(re.findall(r"`(test_[a-z0-9_]+)`", text))
    defined = set()
    for path in (ROOT / "tests").rglob("test_*.py"):
        defined |= set(re.findall(r"^(?:async )?def (test_[a-z0-9_]+)", path.read_text(), re.M))
    missing = sorted(named - defined)
    assert not missing, f"the guarantees name tests that do not exist: {missing}"
