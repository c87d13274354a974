"""The fenced code blocks of the README and the docs, with the mark that says who runs them.

Every shell block (```bash) is preceded by one of

    <!-- run: <id> -->             the docs walk (tests/docs/test_walk.py) runs it, in the
                                   order a reader meets it (the id names the block)
    <!-- norun: <reason> -->       it cannot run on one machine, and why

:func:`site_pages` and :func:`reading_order` give that order: the README, then the site's
pages as its toctrees list them, with the blocks a page includes from another file.

Other comment lines may stand between the mark and the fence. Every fenced block names its
language, so that a shell block cannot hide as an untagged one. No Sphinx and no distcrawl
import here: the Sphinx extension and the tests both use this module.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "SHELL",
    "Block",
    "blocks",
    "doc_files",
    "find",
    "reading_order",
    "shell_blocks",
    "site_pages",
]

#: languages of the blocks that are commands to type
SHELL = frozenset({"bash", "sh", "shell", "console"})

ROOT = Path(__file__).resolve().parents[2]

_FENCE = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,}|~{3,})(?P<info>[^`]*)$")
_COMMENT = re.compile(r"^\s*<!--\s*(?P<body>.*?)\s*-->\s*$")
_MARK = re.compile(r"^(?P<kind>run|norun):\s*(?P<arg>.+)$")
#: a MyST directive's fence: ```{toctree}, ```{include} path
_DIRECTIVE = re.compile(r"^ {0,3}(?P<fence>`{3,}|~{3,})\{(?P<name>[a-z]+)\}\s*(?P<arg>.*)$")


@dataclass(frozen=True)
class Block:
    """One fenced block: where it is, its language and text, and its mark (if any)."""

    path: Path
    line: int  # 1-based line of the opening fence
    lang: str
    text: str
    kind: str | None  # "run", "norun" or None
    arg: str  # the run id or the reason

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"

    @property
    def is_shell(self) -> bool:
        return self.lang in SHELL


def doc_files(root: Path = ROOT) -> list[Path]:
    """README.md and every Markdown page of docs/ (generated pages and the build left out)."""
    skip = ("_build", "_generated")
    pages = [
        p
        for p in sorted((root / "docs").rglob("*.md"))
        if not any(part in skip for part in p.relative_to(root / "docs").parts)
    ]
    return [root / "README.md", *pages]


def blocks(path: Path) -> Iterator[Block]:
    """The fenced blocks of one Markdown file, in order."""
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        opening = _FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        fence = opening.group("fence")
        info = opening.group("info").strip()
        # MyST directives ({include}, {toctree}, ...) are not code
        lang = "" if info.startswith("{") else info.split()[0] if info else ""
        body: list[str] = []
        j = i + 1
        while j < len(lines) and not lines[j].strip().startswith(fence):
            body.append(lines[j])
            j += 1
        kind, arg = _mark_above(lines, i)
        if not info.startswith("{"):
            yield Block(path, i + 1, lang, "\n".join(body) + "\n", kind, arg)
        i = j + 1


def _mark_above(lines: list[str], fence_index: int) -> tuple[str | None, str]:
    k = fence_index - 1
    while k >= 0:
        comment = _COMMENT.match(lines[k])
        if not comment:
            break
        mark = _MARK.match(comment.group("body"))
        if mark:
            return mark.group("kind"), mark.group("arg").strip()
        k -= 1
    return None, ""


def shell_blocks(root: Path = ROOT) -> list[Block]:
    return [b for path in doc_files(root) for b in blocks(path) if b.is_shell]


def find(run_id: str, root: Path = ROOT) -> Block:
    """The one shell block marked ``<!-- run: run_id -->``."""
    found = [b for b in shell_blocks(root) if b.kind == "run" and b.arg == run_id]
    if len(found) != 1:
        raise LookupError(f"{len(found)} blocks are marked run: {run_id} (expected one)")
    return found[0]


def _directives(path: Path) -> Iterator[tuple[int, str, str, dict[str, str], list[str]]]:
    """The MyST directives of a page: (line, name, argument, options, content lines)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        opening = _DIRECTIVE.match(lines[i])
        if not opening:
            i += 1
            continue
        fence = opening.group("fence")
        options: dict[str, str] = {}
        content: list[str] = []
        j = i + 1
        while j < len(lines) and not lines[j].strip().startswith(fence):
            option = re.match(r"^:(?P<key>[a-z-]+):\s*(?P<value>.*)$", lines[j].strip())
            if option and not content:
                options[option.group("key")] = option.group("value")
            elif lines[j].strip():
                content.append(lines[j].strip())
            j += 1
        yield i + 1, opening.group("name"), opening.group("arg").strip(), options, content
        i = j + 1


def site_pages(root: Path = ROOT) -> list[Path]:
    """The pages in the order a reader meets them: the README (the front page), then
    ``docs/index.md`` and the pages of its toctrees, depth first, as the site's navigation
    lists them."""
    order: list[Path] = [root / "README.md"]

    def visit(page: Path) -> None:
        if page in order:
            return
        order.append(page)
        for _, name, _, _, content in _directives(page):
            if name == "toctree":
                for entry in content:
                    target = entry.split("<")[-1].rstrip(">").strip()
                    visit((page.parent / f"{target}.md").resolve())

    visit((root / "docs" / "index.md").resolve())
    return order


def reading_order(root: Path = ROOT) -> list[tuple[Path, Block]]:
    """Every shell block as a reader meets it: (the page read, the block), page by page in
    :func:`site_pages` order; a page that includes part of another file (``{include}`` with
    ``:start-after:`` / ``:end-before:``) shows that file's blocks where it includes them."""
    found: list[tuple[Path, Block]] = []
    for page in site_pages(root):
        shown: list[tuple[int, Block]] = [(b.line, b) for b in blocks(page) if b.is_shell]
        for line, name, arg, options, _ in _directives(page):
            if name != "include":
                continue
            source = (page.parent / arg).resolve()
            if source.suffix != ".md" or "_generated" in source.parts:
                continue
            text = source.read_text(encoding="utf-8").splitlines()
            start, end = 0, len(text)
            if "start-after" in options:
                start = next(n for n, ln in enumerate(text) if options["start-after"] in ln) + 1
            if "end-before" in options:
                end = next(n for n, ln in enumerate(text) if options["end-before"] in ln and n >= start)
            shown += [
                (line, b) for b in blocks(source) if b.is_shell and start < b.line <= end
            ]
        found += [(page, b) for _, b in sorted(shown, key=lambda t: t[0])]
    return found
