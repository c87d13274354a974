"""Contradictions between the docs and the code, found by ``python3 dev.py docs`` (each a
warning, so an error) and by tests/docs/test_docs_contradictions.py:

- a setting the docs say is *not read from the environment*, though the registry's one rule
  reads every registered setting from it;
- a ``distcrawl ...`` or ``scrapy <operator command> ...`` line of the docs (in any code block
  or inline) that the command's own parser refuses: a wrong argument order, a missing
  argument, an option it does not have;
- a row of the status page's table of figures whose ``--json`` key the status does not have,
  or whose screen label the status screen does not show;
- an exit status of ``scrapy crawl`` said in a sentence that names the status (``EXIT_...``) or
  a finish reason it exits with, unlike the registry's (``distcrawl/base/names/exits.py``).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import re
import shlex
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docblocks

ROOT = docblocks.ROOT
STATUS_PAGE = ROOT / "docs" / "operations" / "status.md"

__all__ = [
    "Contradiction",
    "command_lines",
    "environment_claims",
    "exit_statuses",
    "find_all",
    "pages",
    "status_figures",
]


@dataclass(frozen=True)
class Contradiction:
    path: Path
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}: {self.message}"


def pages() -> list[tuple[Path, str]]:
    """README.md and every page of docs/, with its text."""
    return [(p, p.read_text(encoding="utf-8")) for p in docblocks.doc_files()]


def _line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


# --------------------------------------------------------------------------- the environment

_NOT_FROM_ENV = re.compile(r"\b(?:not|never)\b[^.;:]{0,80}\benvironment\b", re.I)
_SETTING = re.compile(r"\b([A-Z][A-Z0-9]*_[A-Z0-9_]*[A-Z0-9])\b")
#: a sentence: up to a full stop (or ! ?) that ends a line or comes before a space
_SENTENCE = re.compile(r"(?:[^.!?]|[.!?](?![\s]|$))+(?:[.!?]|$)")


def environment_claims(docs: Iterable[tuple[Path, str]]) -> list[Contradiction]:
    """Registered settings the docs say are not read from the environment: the registry reads
    every registered setting from its environment variable. The setting a claim is about is
    the one named before it in its sentence, or, for a sentence about "it", the first one its
    paragraph names."""
    from distcrawl.base.config import SETTINGS

    found = []
    for path, text in docs:
        for paragraph in re.finditer(r"(?:[^\n]+\n?)+", text):
            names_in = [n for n in _SETTING.findall(paragraph.group(0)) if n in SETTINGS]
            for sentence in re.finditer(_SENTENCE, paragraph.group(0)):
                claim = _NOT_FROM_ENV.search(sentence.group(0))
                if not claim:
                    continue
                before = sentence.group(0)[: claim.start()]
                subjects = [n for n in _SETTING.findall(before) if n in SETTINGS]
                if not subjects and re.match(r"\s*(?:It|This setting)\b", before) and names_in:
                    subjects = names_in[:1]
                for name in dict.fromkeys(subjects):
                    where = paragraph.start() + sentence.start()
                    found.append(
                        Contradiction(
                            path,
                            _line_of(text, where) + (sentence.group(0)[:1] == "\n"),
                            f"{name} is said not to be read from the environment; every "
                            "registered setting is (the settings rule)",
                        )
                    )
    return found


# --------------------------------------------------------------------------- exit statuses

_EXIT_CLAIM = re.compile(r"\bexit(?:s|ed)?(?: with)?(?: status)?\s+(\d{1,3})\b", re.I)
_NAMED = re.compile(r"\b(EXIT_[A-Z_]+)\b|`([a-z_]+)`")


def _known_exits() -> dict[str, int]:
    """The exit status of each name that has one: the registry's ``EXIT_...`` names, and the
    finish reasons whose meaning says ``scrapy crawl`` exits with a status."""
    from distcrawl.base.names import vocabulary
    from distcrawl.base.names.exits import EXIT_STATUSES

    known = {s.name: s.code for s in EXIT_STATUSES}
    for term in vocabulary():
        said = re.search(r"scrapy crawl exits with status (\d+)", term.meaning)
        if said:
            known[term.name] = int(said.group(1))
    return known


def exit_statuses(docs: Iterable[tuple[Path, str]]) -> list[Contradiction]:
    """Sentences that say an exit status and name an exit status or a finish reason with
    one of its own (``exits with status 5 (finish reason `redis_unreachable`)``), with a
    number the registry does not give it."""
    known = _known_exits()
    found = []
    for path, text in docs:
        for paragraph in re.finditer(r"(?:[^\n]+\n?)+", text):
            for sentence in re.finditer(_SENTENCE, paragraph.group(0)):
                said = {int(n) for n in _EXIT_CLAIM.findall(sentence.group(0))}
                if not said:
                    continue
                named = {a or b for a, b in _NAMED.findall(sentence.group(0))} & set(known)
                for name in sorted(named):
                    if known[name] not in said:
                        where = paragraph.start() + sentence.start()
                        found.append(
                            Contradiction(
                                path,
                                _line_of(text, where) + (sentence.group(0)[:1] == "\n"),
                                f"exit status {', '.join(map(str, sorted(said)))} said with "
                                f"{name}, whose exit status is {known[name]}",
                            )
                        )
    return found


# --------------------------------------------------------------------------- command lines

_OPERATORS = {"|", "||", "&", "&&", ";", ">", ">>", "<", "(", ")", "2>", "2>&1"}


def _command_candidates(path: Path, text: str) -> Iterator[tuple[int, str, bool]]:
    """(line, text, inline) of each command line of a page: the lines of its code blocks
    (joined at a trailing backslash) and its inline code spans."""
    in_block = False
    fence = ""
    pending: list[str] = []
    start = 0
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        opening = re.match(r"^(`{3,}|~{3,})", stripped)
        if opening and (not in_block or stripped.startswith(fence)):
            in_block, fence = not in_block, opening.group(1)
            continue
        if in_block:
            if not pending:
                start = number
            pending.append(stripped.removesuffix("\\"))
            if not stripped.endswith("\\"):
                yield start, " ".join(pending), False
                pending = []
            continue
        for span in re.finditer(r"(?<!`)`([^`\n]+)`(?!`)", line):
            yield number, span.group(1), True


def _argv(candidate: str) -> list[str] | None:
    """The words of a ``distcrawl``/``scrapy`` command line up to its first shell operator,
    with the reader's placeholders made plain (``<spider>``: SPIDER; ``[...]``: left out)."""
    text = candidate.strip()
    if not re.match(r"(?:distcrawl|scrapy) [a-z]", text):
        return None
    text = re.sub(r"\[[^\]]*\]", " ", text)
    text = re.sub(r"<([a-z_-]+)>", lambda m: m.group(1).upper(), text)
    text = text.replace("...", "").replace("…", "")
    lexer = shlex.shlex(text, posix=True, punctuation_chars="|&;<>()")
    lexer.whitespace_split = True
    lexer.commenters = "#"
    words: list[str] = []
    try:
        for word in lexer:
            if word in _OPERATORS or set(word) <= set("|&;<>()"):
                break
            words.append(word)
    except ValueError:  # an unclosed quote: a fragment of prose, not a command line
        return None
    return words


def _parse(prog: str, name: str, args: list[str]) -> str | None:
    """What the command's parser says of *args* (None: it takes them)."""
    from scrapy.settings import Settings

    from distcrawl.base.names import commands as words
    from distcrawl.cli import SUBCOMMANDS, command_parser

    parser: argparse.ArgumentParser
    if prog == "distcrawl":
        if name not in SUBCOMMANDS:
            return f"distcrawl has no command {name!r}"
        parser = command_parser(name)[1]
    elif name in words.SCRAPY_COMMANDS:
        module = "distcrawl.web.command" if name == words.WEB else f"distcrawl.commands.{name}"
        command = importlib.import_module(module).Command()
        command.settings = Settings()
        parser = argparse.ArgumentParser(prog=f"scrapy {name}", conflict_handler="resolve")
        command.add_options(parser)
    else:
        return None  # Scrapy's own commands (crawl, list, ...) are Scrapy's to check
    errors = io.StringIO()
    try:
        with contextlib.redirect_stderr(errors), contextlib.redirect_stdout(io.StringIO()):
            if prog == "distcrawl":
                parser.parse_intermixed_args(args)
            else:
                parser.parse_known_args(args)
    except SystemExit as exc:
        if exc.code:
            return errors.getvalue().strip().splitlines()[-1]
    return None


def command_lines(docs: Iterable[tuple[Path, str]]) -> list[Contradiction]:
    """Every ``distcrawl`` / ``scrapy`` operator command line the docs show, refused by the
    command's own parser. Prose may show part of a command (`distcrawl seed`, `distcrawl
    extract --profile FILE`): an inline span may leave out arguments, and a placeholder may
    stand for a choice (`--variant V`); a wrong order or an unknown option is refused."""
    found = []
    for path, text in docs:
        for line, candidate, inline in _command_candidates(path, text):
            argv = _argv(candidate)
            if not argv or len(argv) < 2:
                continue
            refused = _parse(argv[0], argv[1], argv[2:])
            if refused and inline and "arguments are required" in refused:
                continue
            placeholder = re.search(r"invalid choice: '([A-Z][A-Z_]*)'", refused or "")
            if placeholder and placeholder.group(1) in argv:
                continue  # a template (`--variant V`): the reader puts one of the choices
            if refused:
                found.append(Contradiction(path, line, f"`{' '.join(argv)}`: {refused}"))
    return found


# --------------------------------------------------------------------------- status figures

_FIGURES = re.compile(r"<!-- status-figures -->\n(.*?)<!-- /status-figures -->", re.S)


def _known_status() -> tuple[dict[str, Any], str]:
    """A status with every figure filled (a live node, a busy site, revisit mode, the store),
    and its screen."""
    from rich.console import Console

    from distcrawl.commands.status import render
    from distcrawl.frontier.protocol.observe import ErrorGroup, Totals
    from distcrawl.ops.snapshot import NodeRecord, Revisits, Snapshot
    from distcrawl.ops.status import build_status, products_accounted

    at = 1_800_000_000_000
    info = {
        "stats": {"response_received_count": 12, "item_scraped_count": 9,
                  "catalog/pages/product": 9, "downloader/response_status_count/503": 1},
        "rates": {"pages": 60.0, "products": 45.0, "acked": 50.0},
        "site_defaults": {"rate": 2.0, "concurrency": 0},
        "sites": [["shop.test", 60.0]],
    }  # fmt: skip
    snapshot = Snapshot(
        spider="catalog",
        at_ms=at,
        started_ms=at - 60_000,
        queued=3,
        queued_by_kind={"product": 3},
        waiting={"shop.test": 1},
        waiting_total=1,
        site_budgets={"shop.test": {"active": "1", "factor": "1"}},
        site_rates={"shop.test": 60.0},
        start_list=1,
        rejected=1,
        nodes={"n1": NodeRecord(heartbeat_ms=at - 500, info=info, leases=1)},
        revisit=Revisits(scheduled=5, next_due_ms=at + 5_000),
        redis_memory={"used_bytes": 1, "maxmemory_bytes": 0, "policy": "noeviction"},
        error_groups=[ErrorGroup("0a1b2c3d4e5f", "shop.test", "http", "HTTP 503", 1, at - 9_000,
                                 at - 9_000, ["http://shop.test/p/1"], "n1")],
        error_totals=Totals(groups=1, snapshots=1, groups_by_kind={"http": 1},
                            events_by_kind={"http": 1}),
        findings=[{"message": "shop.test: price on 41% of the last 200 products (was 99%)"}],
        findings_total=1,
    )  # fmt: skip
    status = build_status(snapshot, heartbeat_timeout=30)
    status["store"] = {"collection": "catalog.products", "in_collection": 20, "this_crawl": 10,
                       "since_ms": at - 60_000, "error": None}  # fmt: skip
    status["products_accounted"] = products_accounted(status)
    console = Console(width=200, record=True, file=io.StringIO())
    console.print(render(status, 200))
    return status, console.export_text()


def _has(value: Any, path: str) -> bool:
    """Whether *value* has the key path ``a.b``, ``a[].b`` (in every item of list ``a``)."""
    head, _, rest = path.partition(".")
    listed = head.endswith("[]")
    head = head.removesuffix("[]")
    if not isinstance(value, dict) or head not in value:
        return False
    inner = value[head]
    if not rest:
        return True
    if listed:
        return isinstance(inner, list) and bool(inner) and all(_has(i, rest) for i in inner)
    return _has(inner, rest)


def status_figures(page: Path = STATUS_PAGE) -> list[Contradiction]:
    """Each row of the status page's table of figures: its ``--json`` keys are in the status,
    and its screen label (when the row gives it in backticks) is on the status screen."""
    text = page.read_text(encoding="utf-8")
    table = _FIGURES.search(text)
    if table is None:
        return [Contradiction(page, 1, "the table of figures (<!-- status-figures -->) is gone")]
    status, screen = _known_status()
    found = []
    first = _line_of(text, table.start(1))
    for offset, row in enumerate(table.group(1).splitlines()):
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        if len(cells) < 3 or set(cells[0]) <= set("- ") or cells[0] == "figure":
            continue
        line = first + offset
        for label in re.findall(r"`([^`]+)`", cells[0]):
            if label not in screen:
                found.append(Contradiction(page, line, f"the screen shows no {label!r}"))
        for key in re.findall(r"`([a-z_][a-z_.\[\]]*)`", cells[1]):
            if not _has(status, key):
                found.append(Contradiction(page, line, f"status --json has no {key!r}"))
    return found


def find_all() -> list[Contradiction]:
    docs = pages()
    return environment_claims(docs) + command_lines(docs) + exit_statuses(docs) + status_figures()
