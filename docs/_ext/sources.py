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
import types
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


def _settings_module() -> tuple[dict[str, Any], dict[str, str], dict[str, str]]:
    """distcrawl/settings.py's values as they are with an empty environment, its ``#:`` help
    lines, and the environment variable each reads (setting -> env name)."""
    path = PACKAGE / "settings.py"
    tree = ast.parse(path.read_text(encoding="utf-8"))
    lines = path.read_text(encoding="utf-8").splitlines()
    blank_os = types.SimpleNamespace(environ={})
    values: dict[str, Any] = {}
    helps: dict[str, str] = {}
    envs: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target, value = node.target, node.value
        else:
            continue
        if not (isinstance(target, ast.Name) and target.id.isupper()):
            continue
        name = target.id
        code = compile(ast.Expression(value), str(path), "eval")
        values[name] = eval(code, {"os": blank_os})
        for call in ast.walk(value):
            if (
                isinstance(call, ast.Call)
                and ast.unparse(call.func) == "os.environ.get"
                and isinstance(call.args[0], ast.Constant)
            ):
                envs[name] = str(call.args[0].value)
        comment: list[str] = []
        k = node.lineno - 2
        while k >= 0 and lines[k].startswith("#:"):
            comment.insert(0, lines[k][2:].strip())
            k -= 1
        if comment:
            helps[name] = " ".join(comment)
    return values, helps, envs


def _env_reads() -> dict[str, str]:
    """Environment variables read outside settings.py: ``os.environ.get(NAME)`` with a string
    or a module constant naming it (env name -> module)."""
    found: dict[str, str] = {}
    trees = {
        path: ast.parse(path.read_text(encoding="utf-8"))
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.name != "settings.py" and "demo" not in path.parts
    }
    # module constants of every module: a name may be imported from another one
    consts = {
        t.id: n.value.value
        for tree in trees.values()
        for n in tree.body
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant)
        for t in n.targets
        if isinstance(t, ast.Name) and isinstance(n.value.value, str)
    }
    for path, tree in trees.items():
        for call in ast.walk(tree):
            if isinstance(call, ast.Call) and ast.unparse(call.func) == "os.environ.get":
                arg = call.args[0]
                name = arg.value if isinstance(arg, ast.Constant) else consts.get(ast.unparse(arg))
                if isinstance(name, str) and name.startswith(("DISTCRAWL_", "REDIS_", "MONGO_")):
                    found[name] = str(path.relative_to(ROOT))
    return found


def _show(value: Any) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    if value == "" or value is None:
        return "empty"
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return f"`{value!r}`" if isinstance(value, str) else f"`{value}`"


def _type(value: Any) -> str:
    return type(value).__name__ if value is not None else "str"


def settings_from_code() -> list[Setting]:
    """Every setting a user may set: distcrawl/settings.py (defaults, env) with the notes'
    help and scope; the notes' default only where settings.py does not define one."""
    from settings_notes import NOTES

    values, helps, envs = _settings_module()
    env_names = {env: name for name, env in envs.items()}
    for env in _env_reads():
        env_names.setdefault(env, env)
    records = []
    for name, default, help_text, scope in NOTES:
        env = next((e for e, n in env_names.items() if n == name), None)
        if name in values:
            shown, kind = _show(values[name]), _type(values[name])
        else:
            shown, kind = default, "str"
        records.append(Setting(name, kind, shown, help_text or helps.get(name, ""), scope, env))
    return records


def scrapy_changes() -> list[tuple[str, str, str, str]]:
    """(setting, distcrawl's value, Scrapy's default, why) for each Scrapy setting that
    distcrawl/settings.py sets to another value than Scrapy's."""
    from scrapy.settings import default_settings
    from settings_notes import NOTES, SCRAPY_CHANGES

    values, _, _ = _settings_module()
    why = {name: text for name, _, text, _ in NOTES} | SCRAPY_CHANGES
    rows = []
    for name, value in values.items():
        if not hasattr(default_settings, name) or name in _PROJECT_PLUMBING:
            continue
        scrapy_value = getattr(default_settings, name)
        if (isinstance(scrapy_value, dict) or value == scrapy_value) and name not in SCRAPY_CHANGES:
            continue
        rows.append((name, _short(value), _short(scrapy_value), why.get(name, "")))
    return rows


#: settings.py names that make it a Scrapy project, not choices a user weighs
_PROJECT_PLUMBING = ("BOT_NAME", "SPIDER_MODULES", "NEWSPIDER_MODULE", "COMMANDS_MODULE")


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
    shard, the seed list as ``catalog:start_urls``; a ``[tag]`` in front of a meaning is the
    record's tag."""
    from distcrawl.frontier.keys import layout

    records = []
    for record in layout():
        tags = tuple(re.findall(r"^\[([a-z ]+)\]\s*", record.meaning))
        help_text = re.sub(r"^\[([a-z ]+)\]\s*", "", record.meaning)
        pattern = record.pattern.replace("{S:k.ddddd}", "{catalog:k}").replace("{S}", "{catalog}")
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
    for key in SCHEMA:
        obj, tag = (crawl, "{catalog}") if key.slot == "control" else (shard, "{catalog:k}")
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


# --------------------------------------------------------------------------- the sources
# Re-point these when the settings registry, the vocabulary and the key builder exist.

SETTINGS_SOURCE: Callable[[], list[Setting]] = settings_from_code
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
