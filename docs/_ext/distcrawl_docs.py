"""Sphinx extension of distcrawl's docs: writes the generated reference pages before the
build reads the sources, and accounts for every shell example.

- ``docs/_generated/*.md``: settings, commands, stats, metrics, Redis keys and the latest
  benchmark results, rendered (``render.py``) from the records ``sources.py`` reads from the
  code. Reference pages include them.
- Every shell block of README.md and docs/ must carry ``<!-- run: id -->`` or
  ``<!-- norun: reason -->`` (``docblocks.py``): an unmarked one is a warning (so an error,
  with ``-W``); the blocks no test runs are printed with their reasons at the end.
- What the docs say that the code contradicts (``contradictions.py``): a setting said not to
  be read from the environment, a command line its command refuses, a status figure whose key
  or label the status lacks; each a warning at its page and line.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import contradictions
import docblocks
import render
import sources

GENERATED = Path(__file__).resolve().parent.parent / "_generated"


def write_generated(folder: Path = GENERATED) -> dict[str, str]:
    """Render every generated page into *folder*; returns name -> text."""
    pages = {
        "settings.md": render.settings(sources.SETTINGS_SOURCE()),
        "settings-rule.md": render.settings_rule(sources.settings_rule()),
        "settings-observe.md": render.settings(sources.observe_settings_from_registry()),
        "scrapy-settings.md": render.scrapy_changes(sources.scrapy_changes()),
        "commands.md": render.commands(sources.COMMANDS_SOURCE()),
        "stats.md": render.stats(sources.STATS_SOURCE()),
        "metrics.md": render.metrics(sources.METRICS_SOURCE()),
        "redis-keys.md": render.keys(sources.KEYS_SOURCE()),
        "outage-replies.md": render.outage_replies(sources.outage_replies()),
        "bench-results.md": render.bench_results(sources.bench_results()),
    }
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in pages.items():
        path = folder / name
        # rewrite only what changed: Sphinx rebuilds the pages whose includes changed
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
    return pages


def _builder_inited(app: Any) -> None:
    write_generated()
    from sphinx.util import logging

    logger = logging.getLogger(__name__)
    for block in docblocks.shell_blocks():
        if block.kind is None:
            logger.warning(
                "shell block without <!-- run: ID --> or <!-- norun: REASON -->",
                location=(str(block.path), block.line),
            )
    for path in docblocks.doc_files():
        for block in docblocks.blocks(path):
            if not block.lang:
                logger.warning(
                    "code block without a language (```bash, ```text, ...)",
                    location=(str(block.path), block.line),
                )
    for found in contradictions.find_all():
        logger.warning(
            f"the docs contradict the code: {found.message}", location=(str(found.path), found.line)
        )


def _build_finished(app: Any, exception: BaseException | None) -> None:
    if exception is not None:
        return
    blocks = docblocks.shell_blocks()
    norun = [b for b in blocks if b.kind == "norun"]
    run = [b for b in blocks if b.kind == "run"]
    out = sys.stdout
    walk = "the docs walk (tests/docs/test_walk.py)"
    print(f"shell examples: {len(run)} run by {walk}, {len(norun)} not run:", file=out)
    for block in norun:
        first = block.text.strip().splitlines()[0] if block.text.strip() else ""
        print(f"  {block.where}: {block.arg}  [{first[:60]}]", file=out)


def setup(app: Any) -> dict[str, Any]:
    app.connect("builder-inited", _builder_inited)
    app.connect("build-finished", _build_finished)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
