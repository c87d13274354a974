"""The checks ``python3 dev.py docs`` runs for contradictions between the docs and the code
find none today, and each finds the kind it is for (the ones the docs had)."""

from __future__ import annotations

from pathlib import Path

import contradictions
from docshell import ROOT

from distcrawl.base.names import exits

PAGE = ROOT / "docs" / "guides" / "page.md"


def test_the_docs_contradict_the_code_nowhere() -> None:
    found = contradictions.find_all()
    assert not found, "\n".join(map(str, found))


def test_a_setting_said_not_to_be_read_from_the_environment_is_found() -> None:
    said = (
        "`DISTCRAWL_REVISIT` is `kind:interval,...`. It is a *crawl-wide* setting. It is read\n"
        "from `-s` (or `settings.py`, or scrapyd's `setting=`), **not** from the environment.\n"
        "\n"
        "`DISTCRAWL_SITE_RATE` is never taken from the environment.\n"
        "\n"
        "A job gets its settings from `setting=` parameters, **not** from the environment of\n"
        "the machine that schedules it: pass `REDIS_URL` that way.\n"
    )
    found = contradictions.environment_claims([(PAGE, said)])
    assert [(c.line, c.message.split()[0]) for c in found] == [
        (1, "DISTCRAWL_REVISIT"),
        (4, "DISTCRAWL_SITE_RATE"),
    ], found


def test_a_command_line_its_command_refuses_is_found() -> None:
    said = (
        "Start afresh with `distcrawl control reset catalog`, see `distcrawl seed` and\n"
        "`distcrawl extract --profile FILE`, any `distcrawl demo --variant V`.\n"
        "```bash\n"
        "distcrawl status catalog --watch | head -3\n"
        "distcrawl deadletters catalog list \\\n"
        "    --no-such-option\n"
        "scrapy control catalog pause   # a comment\n"
        "scrapy crawl catalog -s DISTCRAWL_SITE_RATE=2\n"
        "distcrawl journal catalog show\n"
        "```\n"
    )
    found = contradictions.command_lines([(PAGE, said)])
    assert [(c.line, c.message.split("`")[1]) for c in found] == [
        (1, "distcrawl control reset catalog"),
        (5, "distcrawl deadletters catalog list --no-such-option"),
        (9, "distcrawl journal catalog show"),
    ], [str(c) for c in found]


def test_a_status_figure_the_status_lacks_is_found(tmp_path: Path) -> None:
    page = tmp_path / "status.md"
    text = (ROOT / "docs" / "operations" / "status.md").read_text(encoding="utf-8")
    assert "| `queued` | `frontier.queued`, `frontier.queued_by_kind` |" in text
    page.write_text(
        text.replace("`frontier.queued`, `frontier.queued_by_kind`", "`frontier.queue`")
        .replace("| `parked retries` |", "| `parked requests` |")
        .replace("`nodes[].responses`", "`nodes[].pages`")
    )
    found = sorted(c.message for c in contradictions.status_figures(page))
    assert found == [
        "status --json has no 'frontier.queue'",
        "status --json has no 'nodes[].pages'",
        "the screen shows no 'parked requests'",
    ], found


def test_an_exit_status_unlike_the_registrys_is_found() -> None:
    said = (
        "A node whose Redis is away exits with status 5 (finish reason `redis_unreachable`).\n"
        "A node exits with status 4 (finish reason `redis_evicts`), and\n"
        "with exit status 9 (`EXIT_JOURNAL_HELD`) when its journal holds products.\n"
        "\n"
        "`EXIT_SETTINGS` is said nowhere with a number. It exits 2 (`EXIT_SETTINGS`).\n"
        "Exit status 1 is Scrapy's own (`node_id_in_use` aside).\n"
        "The nodes exit with status\n3 (`EXIT_FINDINGS`), a crawl with findings.\n"
    )
    found = contradictions.exit_statuses([(PAGE, said)])
    assert [(c.line, c.message) for c in found] == [
        (2, "exit status 4, 9 said with EXIT_JOURNAL_HELD, whose exit status is 3"),
        (2, "exit status 4, 9 said with redis_evicts, whose exit status is 5"),
        (6, "exit status 1 said with node_id_in_use, whose exit status is 5"),
        (7, f"exit status 3 said with EXIT_FINDINGS, whose exit status is {exits.FINDINGS}"),
    ], [str(c) for c in found]
