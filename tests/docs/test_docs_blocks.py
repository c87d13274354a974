"""Every example of the README and the docs is accounted for: each shell block is run by the
docs walk (tests/docs/test_walk.py, which also checks it is on the walk) or says why it cannot
run on one machine; no page carries history; the README is short."""

from __future__ import annotations

import re
import subprocess

import docblocks
from docshell import ROOT


def test_every_shell_block_is_run_or_says_why_not() -> None:
    unmarked = [b.where for b in docblocks.shell_blocks() if b.kind is None]
    assert not unmarked, (
        f"shell blocks without <!-- run: ID --> or <!-- norun: REASON -->: {unmarked}"
    )
    for block in docblocks.shell_blocks():
        assert block.arg, f"{block.where}: a mark needs an id or a reason"


def test_every_code_block_names_its_language() -> None:
    bare = [b.where for p in docblocks.doc_files() for b in docblocks.blocks(p) if not b.lang]
    assert not bare, f"code blocks without a language (```bash, ```text, ...): {bare}"


def test_each_run_id_marks_one_block() -> None:
    ids = [b.arg for b in docblocks.shell_blocks() if b.kind == "run"]
    assert len(ids) == len(set(ids)), (
        f"run ids used twice: {sorted(i for i in ids if ids.count(i) > 1)}"
    )


def test_the_readme_is_short() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 220, len(lines)


def test_no_history_in_the_docs_or_the_code() -> None:
    """No issue numbers, commit hashes or branch names in README.md, docs/ or distcrawl/.

    The check is the grep that says so; a decimal number of seven digits or more (a constant
    in the code, like 86400000) is not a commit hash, so hits of digits only are let through.
    """
    done = subprocess.run(
        ["grep", "-rnoE", r"issue [0-9]+|[0-9a-f]{7} |branch `", "README.md", "docs/", "distcrawl/",
         "--exclude-dir=_build", "--exclude-dir=_generated", "--exclude-dir=__pycache__"],
        cwd=ROOT, capture_output=True, text=True,
    )  # fmt: skip
    hits = [h for h in done.stdout.splitlines() if not re.fullmatch(r".*:[0-9]+ ", h)]
    assert not hits, "history found:\n" + "\n".join(hits)


def test_links_between_pages_lead_to_pages() -> None:
    broken = []
    for path in docblocks.doc_files():
        text = path.read_text(encoding="utf-8")
        for target in re.findall(r"\]\(([^)#\s]+\.md)(?:#[^)]*)?\)", text):
            if not (path.parent / target).resolve().exists():
                broken.append(f"{path.relative_to(ROOT)}: {target}")
    assert not broken, broken
