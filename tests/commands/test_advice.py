"""Every command line a message suggests runs: each is built from the command's arguments in
their order (:data:`distcrawl.base.names.commands.ARGUMENTS`), parses with the command's own
parser, and its ``--help`` form runs; no message of distcrawl/ spells a command line by hand."""

from __future__ import annotations

import argparse
import ast
import importlib
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from fixtures_cli import ROOT
from scrapy.settings import Settings

from distcrawl.base.names import commands as words
from distcrawl.cli import SUBCOMMANDS, command_parser

#: a value for each placeholder an advice may name
SAMPLES = {
    "spider": "catalog",
    "home": "/tmp/a home",
    "directory": ".distcrawl/journal/catalog.products",
    "profile": "my-shop.toml",
}


def _positionals(parser: argparse.ArgumentParser) -> list[str]:
    return [a.dest for a in parser._actions if not a.option_strings]


def _scrapy_parser(name: str) -> argparse.ArgumentParser:
    """The parser ``scrapy NAME`` uses, made as Scrapy's command line makes it."""
    module = "distcrawl.web.command" if name == words.WEB else f"distcrawl.commands.{name}"
    command = importlib.import_module(module).Command()
    command.settings = Settings()
    parser = argparse.ArgumentParser(prog=f"scrapy {name}", conflict_handler="resolve")
    command.add_options(parser)
    return parser


@pytest.mark.parametrize("name", sorted(words.ARGUMENTS))
def test_each_command_takes_its_positional_arguments_in_the_registered_order(name: str) -> None:
    _, parser = command_parser(name)
    assert _positionals(parser) == list(words.ARGUMENTS[name]), name
    if name in words.SCRAPY_COMMANDS:
        assert _positionals(_scrapy_parser(name)) == list(words.ARGUMENTS[name]), name


def test_every_command_has_its_arguments_registered() -> None:
    assert set(words.ARGUMENTS) == set(SUBCOMMANDS)


@pytest.mark.parametrize("advice", words.ADVICE, ids=str)
def test_each_suggested_command_parses_and_its_help_runs(advice: words.Advice) -> None:
    line = advice.line(**{name: SAMPLES[name] for name in advice.placeholders})
    prog, name, *rest = shlex.split(line)
    if prog == "distcrawl":
        _, parser = command_parser(name)
        args = parser.parse_intermixed_args(rest)
        command = [sys.executable, "-m", "distcrawl.cli", name, *rest, "--help"]
    else:
        args, unknown = _scrapy_parser(name).parse_known_args(rest)
        assert not [u for u in unknown if u.startswith("-")], (line, unknown)
        command = [sys.executable, "-m", "scrapy", name, *rest, "--help"]
    for dest in words.ARGUMENTS[name]:
        if dest in advice.placeholders:
            value = getattr(args, dest)
            assert str(value) == SAMPLES[dest], (line, dest, value)
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, (line, done.stdout, done.stderr)
    assert f"{prog} {name}" in done.stdout, (line, done.stdout)


def test_advice_is_built_in_the_commands_order() -> None:
    assert words.RESET_CRAWL.line(spider="catalog") == (
        "distcrawl control catalog reset --yes-really"
    )
    assert words.STOP_SERVICES.line(home="/tmp/a home") == (
        "distcrawl services stop --home '/tmp/a home'"
    )
    with pytest.raises(ValueError, match="positional"):
        words.advice(words.CONTROL, action=words.RESET)  # the spider comes first
    with pytest.raises(TypeError, match="spider"):
        words.RESET_CRAWL.line()


#: a command line spelled in a message: `distcrawl control ...`, `scrapy status ...`, or an
#: operator command on its own (`control resume`)
_ANY = "|".join(sorted(words.ARGUMENTS))
_OPERATOR = "|".join((*words.SCRAPY_COMMANDS, words.SERVICES))
_SPELLED = re.compile(
    rf"`(?:(?:distcrawl|scrapy) )?(?:{_ANY})\b[^`]*`|\b(?:distcrawl|scrapy) (?:{_OPERATOR}) \w"
)


def _message_strings(path: Path) -> list[tuple[int, str]]:
    """The string literals of a module (f-strings' fixed parts too), docstrings left out."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                docstrings.add(id(body[0].value))
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docstrings
    ]


def test_no_message_spells_a_command_line_by_hand() -> None:
    """Every suggested command comes from an :class:`~distcrawl.base.names.commands.Advice`
    (the grep of the issue, over string literals instead of lines)."""
    spelled = [
        f"{path.relative_to(ROOT)}:{line}: {match.group(0)}"
        for path in sorted((ROOT / "distcrawl").rglob("*.py"))
        for line, text in _message_strings(path)
        for match in _SPELLED.finditer(text)
    ]
    assert not spelled, "\n".join(spelled)
