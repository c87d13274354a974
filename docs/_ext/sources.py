"""Where the generated references take their facts from: the code as it is today.

Each reference is rendered from a list of plain records (``render.py``); this module makes
those lists; the stats and metrics come from the vocabulary (distcrawl.base.names). When the
project's settings registry and key builder land, re-point the ``*_SOURCE`` names at the
bottom: each is one line.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import pkgutil
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "distcrawl"


# --------------------------------------------------------------------------- records


@dataclass(frozen=True)
class Setting:
    name: str
    type: str  # bool, int, float, str, list, dict
    default: str  # as shown to a user
    help: str
    scope: str  # "crawl": every node and command must agree; "node": each its own
    env: str | None  # the environment variable a node reads it from, if any


@dataclass(frozen=True)
class Option:
    flags: str  # "-s, --set" or "spider"
    metavar: str
    help: str
    default: str


@dataclass(frozen=True)
class Command:
    name: str
    invocations: tuple[str, ...]  # "distcrawl status", "scrapy status"
    summary: str
    usage: str
    description: str
    options: tuple[Option, ...]


@dataclass(frozen=True)
class Stat:
    key: str
    help: str
    counted_in: tuple[str, ...] = ()


@dataclass(frozen=True)
class Metric:
    name: str  # as exposed (counters end in _total)
    type: str
    labels: tuple[str, ...]
    help: str


@dataclass(frozen=True)
class Key:
    slot: str  # "control", "shard" or "seeds"
    pattern: str
    type: str
    help: str
    tags: tuple[str, ...] = field(default=())


# --------------------------------------------------------------------------- settings


def _shown_default(record: Any) -> str:
    """A registry record's default as the reference shows it."""
    if record.type == "bool" and record.default in ("0", "1"):
        return "on" if record.default == "1" else "off"
    if record.default in ("unset",) or " " in record.default:
        return record.default  # unset, or how a derived default is computed
    return f"`{record.default}`"


def settings_from_registry() -> list[Setting]:
    """Every public setting of distcrawl, as the settings registry defines it."""
    from distcrawl.base.config import SETTINGS

    return [
        Setting(r.name, r.type, _shown_default(r), r.help, r.scope, r.env)
        for r in SETTINGS.reference(scrapy=False)
    ]


#: the settings of what goes wrong and who is told (error groups, snapshots, data quality, the
#: crawl report, notices): tuning beyond the main reference, rendered on a page of their own
OBSERVE_PREFIXES = (
    "DISTCRAWL_ERROR_",
    "DISTCRAWL_SNAPSHOT",
    "DISTCRAWL_EXPECTED_",
    "DISTCRAWL_QUALITY_",
    "DISTCRAWL_REPORT_",
    "DISTCRAWL_ALERT_",
)


def observe_settings_from_registry() -> list[Setting]:
    """The settings of error groups, data quality, reports and notices, from the registry."""
    from distcrawl.base.config import SETTINGS

    return [
        Setting(r.name, r.type, _shown_default(r), r.help, r.scope, r.env)
        for r in SETTINGS.reference(hidden=True, scrapy=False)
        if r.name.startswith(OBSERVE_PREFIXES)
    ]


def settings_rule() -> str:
    """The registry module's docstring: where a setting's value comes from, the environment
    rule, unknown names (reST roles and literals as Markdown)."""
    import distcrawl.base.config as config

    doc = config.__doc__ or ""
    doc = doc[doc.index("Where a value comes from") :]
    text = re.sub(r":[a-z]+:`~?([^`]+)`", r"`\1`", doc)
    return re.sub(r"``([^`]+)``", r"`\1`", text).strip() + "\n"


def scrapy_changes() -> list[tuple[str, str, str, str]]:
    """(setting, distcrawl's value, Scrapy's default, why) for each Scrapy setting the
    registry gives another default than Scrapy's."""
    from scrapy.settings import default_settings

    from distcrawl.base.config import SETTINGS

    rows = []
    for record in SETTINGS.reference(scrapy=True):
        ours = SETTINGS.default(record.name)
        theirs = getattr(default_settings, record.name)
        if ours != theirs:
            rows.append((record.name, _short(ours), _short(theirs), record.help))
    return rows


def _short(value: Any) -> str:
    text = repr(value)
    return f"`{text}`" if len(text) <= 60 else f"`{text[:57]}...`"


# --------------------------------------------------------------------------- commands


def _options(parser: argparse.ArgumentParser, skip: set[str]) -> tuple[Option, ...]:
    out = []
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction) or action.help == argparse.SUPPRESS:
            continue
        flags = ", ".join(action.option_strings) or action.dest
        if flags in skip:
            continue
        metavar = action.metavar or ("" if action.option_strings else action.dest)
        if action.option_strings and action.nargs != 0 and not action.metavar:
            metavar = action.dest.upper()
        if isinstance(metavar, tuple):
            metavar = " ".join(metavar)
        default = action.default
        shown = (
            ""
            if default in (None, False, [], argparse.SUPPRESS) or action.nargs == 0
            else f"{default:,}"
            if isinstance(default, int) and not isinstance(default, bool)
            else str(default)
        )
        help_text = (action.help or "") % {"default": default, "prog": parser.prog}
        if action.choices and not action.option_strings and "|" not in help_text:
            help_text = f"{help_text} ({', '.join(map(str, action.choices))})".strip()
        out.append(Option(flags, str(metavar or ""), help_text, shown))
    return tuple(out)


def _scrapy_commands() -> dict[str, Any]:
    """The ``scrapy`` sub-commands distcrawl adds or replaces (distcrawl/commands/*, and the
    dashboard's, distcrawl/web/command.py)."""
    from scrapy.commands import ScrapyCommand

    import distcrawl.commands as package

    found = {}
    for info in pkgutil.iter_modules(package.__path__):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"distcrawl.commands.{info.name}")
        cls = getattr(module, "Command", None)
        if isinstance(cls, type) and issubclass(cls, ScrapyCommand):
            found[info.name] = cls
    # and those registered for Scrapy through the scrapy.commands entry points (scrapy web)
    for entry in entry_points(group="scrapy.commands"):
        if entry.value.startswith("distcrawl."):
            found[entry.name] = entry.load()
    return found


def commands_from_code() -> list[Command]:
    """``distcrawl`` sub-commands (cli.SUBCOMMANDS and each module's ``add_arguments``) and
    the ``scrapy`` sub-commands of distcrawl/commands/."""
    from scrapy.commands import ScrapyCommand

    from distcrawl.cli import SUBCOMMANDS, plain_text

    scrapy_cmds = _scrapy_commands()

    class _Bare(ScrapyCommand):
        def short_desc(self) -> str:
            return ""

        def run(self, args: list[str], opts: argparse.Namespace) -> None:
            pass

    from scrapy.settings import Settings

    bare = _Bare()
    bare.settings = Settings()
    base = argparse.ArgumentParser()
    bare.add_options(base)
    scrapy_common = {", ".join(a.option_strings) for a in base._actions}
    records = []
    for name in sorted(set(SUBCOMMANDS) | set(scrapy_cmds)):
        invocations = []
        if name in SUBCOMMANDS:
            module = importlib.import_module(SUBCOMMANDS[name][0])
            parser = argparse.ArgumentParser(
                prog=f"distcrawl {name}", description=plain_text(module.__doc__ or "")
            )
            module.add_arguments(parser)
            invocations.append(f"distcrawl {name}")
            summary = SUBCOMMANDS[name][1]
            usage = parser.format_usage().removeprefix("usage: ").strip()
            description = parser.description or ""
            options = _options(parser, set())
        if name in scrapy_cmds:
            cmd = scrapy_cmds[name]()
            cmd.settings = Settings()
            invocations.append(f"scrapy {name}")
            if name not in SUBCOMMANDS:
                parser = argparse.ArgumentParser(prog=f"scrapy {name}")
                cmd.add_options(parser)
                summary = cmd.short_desc()
                usage = f"scrapy {name} {cmd.syntax()}".strip()
                module = importlib.import_module(type(cmd).__module__)
                description = plain_text(module.__doc__ or "")
                options = _options(parser, scrapy_common)
        records.append(
            Command(name, tuple(invocations), summary, " ".join(usage.split()), description,
                    options)
        )  # fmt: skip
    return records


# --------------------------------------------------------------------------- stats and metrics


def _vocabulary_keys() -> dict[str, str]:
    """The stats keys of the vocabulary by the name of their constant (a family: its name with
    the variable part, ``frontier/refused/<reason>``)."""
    from distcrawl.base.names import stats, vocabulary
    from distcrawl.base.names.terms import Family

    named = {t.name for t in vocabulary(stats.STATS)}
    out: dict[str, str] = {}
    for name, value in vars(stats).items():
        if isinstance(value, Family):
            out[name] = value.name
        elif isinstance(value, str) and value in named:
            out[name] = value
    return out


def _fmt_key(node: ast.AST) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    # a key the code takes from the vocabulary: stat_keys.ACKED, stat_keys.REFUSED(reason)
    called = node.func if isinstance(node, ast.Call) else node
    if isinstance(called, (ast.Name, ast.Attribute)):
        name = called.id if isinstance(called, ast.Name) else called.attr
        key = _vocabulary_keys().get(name)
        if key is not None and ("<" in key) == isinstance(node, ast.Call):
            return key
    if isinstance(node, ast.JoinedStr):
        out = ""
        for part in node.values:
            if isinstance(part, ast.Constant):
                out += str(part.value)
            elif isinstance(part, ast.FormattedValue):
                out += "<" + ast.unparse(part.value).rsplit(".", 1)[-1] + ">"
        return out
    return None


def counted_stats() -> dict[str, set[str]]:
    """Stats keys the code counts (``stats.inc_value("...")`` and the like; the pipeline's and
    the store's ``_count`` / ``_gauge`` under ``pipeline/``) -> the modules that count them.
    A key built at run time shows its variable part as ``<name>``."""
    found: dict[str, set[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = str(path.relative_to(ROOT))
        piped = "storage" in path.parts or path.name == "pipeline.py"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef) and node.name in ("_count", "_gauge"):
                continue
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            if not node.args or (key := _fmt_key(node.args[0])) is None:
                continue
            if node.func.attr in ("inc_value", "set_value", "max_value", "min_value"):
                if key == "pipeline/<name>":  # the pipeline's own helper
                    continue
                found.setdefault(key, set()).add(rel)
            elif node.func.attr in ("_count", "_gauge") and piped:
                found.setdefault(f"pipeline/{key}", set()).add(rel)
    # the I/O loop counts its flush results through one loop: frontier/{key}
    for key in _frontier_loop_keys():
        found.setdefault(f"frontier/{key}", set()).add("distcrawl/node/scheduler/loop.py")
    found.pop("frontier/<key>", None)
    # the revisit hooks' verdicts: revisit/{verdict}
    found.pop("revisit/<verdict>", None)
    for verdict in ("first", "changed", "unchanged", "gone"):
        found.setdefault(f"revisit/{verdict}", set()).add("distcrawl/node/scheduler/revisits.py")
    return found


def _frontier_loop_keys() -> list[str]:
    """The keys the scheduler's round trips count through one loop (``frontier/<key>``)."""
    text = (PACKAGE / "node" / "scheduler" / "loop.py").read_text(encoding="utf-8")
    loop = re.search(r"for key, value in \((.*?)\):\s*\n\s*if value:", text, re.S)
    names = re.findall(r"\(stat_keys\.([A-Z_]+), result\.", loop.group(1)) if loop else []
    keys = _vocabulary_keys()
    return [keys[name].removeprefix("frontier/") for name in names if name in keys]


def _family(key: str) -> str:
    return re.sub(r"<[^>]*>", "<*>", key)


def stats_from_vocabulary() -> list[Stat]:
    """The stats keys distcrawl counts, with their meaning, from the vocabulary
    (:func:`distcrawl.base.names.vocabulary`), and where the code counts each."""
    from distcrawl.base.names import vocabulary
    from distcrawl.base.names.stats import SCRAPY, STATS

    counted = counted_stats()
    records = []
    for term in vocabulary(STATS):
        if term.kind == SCRAPY:  # Scrapy counts it; distcrawl only reads it
            continue
        family = _family(term.name)
        where: set[str] = set()
        for key, modules in counted.items():
            member = "<*>" in family and _matches(family, key)
            if key == term.name or _family(key) == family or member:
                where |= modules
        records.append(Stat(term.name, term.meaning, tuple(sorted(where))))
    return records


def _matches(family: str, key: str) -> bool:
    pattern = re.escape(family).replace(re.escape("<*>"), "[a-z_/]+")
    return re.fullmatch(pattern, key) is not None


def metrics_from_vocabulary() -> list[Metric]:
    """/metrics: name, type, labels and help of each metric, from the vocabulary."""
    from distcrawl.base.names import vocabulary
    from distcrawl.base.names.metrics import METRIC

    return [
        Metric(f"{t.name}_total" if t.kind == "counter" else t.name, t.kind, t.labels, t.meaning)
        for t in vocabulary(METRIC)
    ]


# --------------------------------------------------------------------------- Redis keys


def keys_from_schema() -> list[Key]:
    """The key layout, from the key schema (``distcrawl.frontier.keys.layout()``), written for
    a crawl named ``catalog``: ``{catalog}:...`` in the control slot, ``{catalog:k}:...`` in a
    shard, the seed list as ``catalog:start_urls`` and its neighbours as
    ``{catalog:start_urls}:...``; a ``[tag]`` in front of a meaning is the record's tag."""
    from distcrawl.frontier.keys import layout

    records = []
    for record in layout():
        tags = tuple(re.findall(r"^\[([a-z ]+)\]\s*", record.meaning))
        help_text = re.sub(r"^\[([a-z ]+)\]\s*", "", record.meaning)
        pattern = record.pattern.replace("{S:k.ddddd}", "{catalog:k}").replace("{S}", "{catalog}")
        pattern = pattern.replace("{L}", "{catalog:start_urls}")
        slot = record.slot
        if pattern == "<start list>":
            pattern, slot = "catalog:start_urls", "seeds"
        records.append(Key(slot, pattern, record.type, help_text, tags))
    return records


def keys_in_code() -> set[str]:
    """Every key name the key schema's builders make for a crawl named ``catalog``, written as
    the layout writes them (a variable part as ``<...>``)."""
    from distcrawl.frontier.keys import SCHEMA, FrontierKeys

    crawl = FrontierKeys(spider="catalog", start_urls="catalog:start_urls", shards=2)
    shard = crawl.shard(1)
    found = {"catalog:start_urls"}
    slots = {"control": (crawl, "{catalog}"), "seeds": (crawl.seeds, crawl.seeds.prefix)}
    for key in SCHEMA:
        obj, tag = slots.get(key.slot, (shard, "{catalog:k}"))
        value = getattr(obj, key.name)
        if key.params:
            value = value(*(f"<{p}>" for p in key.params))
        found.add(tag + value[len(obj.prefix) :])
    return found


def key_family(pattern: str) -> str:
    """A key pattern with every variable part as ``<*>``."""
    return re.sub(r"<[^>]*>", "<*>", pattern)


# --------------------------------------------------------------------------- bench results


def bench_results(folder: Path | None = None) -> list[dict[str, Any]]:
    """The result files the benches write (bench/results/*.json), newest format only."""
    import json

    folder = folder or ROOT / "bench" / "results"
    out = []
    for path in sorted(folder.glob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        data["_file"] = str(path.relative_to(ROOT))
        out.append(data)
    return out


def outage_replies() -> list[tuple[str, str, str]]:
    """The error replies a node waits out as an outage: class, meaning, advice
    (:data:`distcrawl.frontier.outages.OUTAGE_REPLIES`)."""
    from distcrawl.frontier.outages import OUTAGE_REPLIES

    return [(o.code, o.reason, o.advice) for o in OUTAGE_REPLIES.values()]


# --------------------------------------------------------------------------- the sources
# Re-point these when the settings registry, the vocabulary and the key builder exist.

SETTINGS_SOURCE: Callable[[], list[Setting]] = settings_from_registry
COMMANDS_SOURCE: Callable[[], list[Command]] = commands_from_code
STATS_SOURCE: Callable[[], list[Stat]] = stats_from_vocabulary
METRICS_SOURCE: Callable[[], list[Metric]] = metrics_from_vocabulary
KEYS_SOURCE: Callable[[], list[Key]] = keys_from_schema


def iter_all() -> Iterator[tuple[str, list[Any]]]:
    yield "settings", SETTINGS_SOURCE()
    yield "commands", COMMANDS_SOURCE()
    yield "stats", STATS_SOURCE()
    yield "metrics", METRICS_SOURCE()
    yield "keys", KEYS_SOURCE()
