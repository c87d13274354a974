"""Sphinx configuration of distcrawl's documentation (``python3 dev.py docs``)."""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "_ext"))

project = "distcrawl"
author = "the distcrawl developers"
copyright = "the distcrawl developers"  # noqa: A001 (Sphinx's name)

extensions = ["myst_parser", "distcrawl_docs"]
source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "_generated", "_ext", "Thumbs.db", ".DS_Store"]

# MyST: heading anchors for [links](page.md#a-heading), ::: fences, definition lists
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3
# code blocks are shown as typed; a language Pygments does not know is not an error
highlight_language = "text"
suppress_warnings = ["misc.highlighting_failure"]

html_theme = "furo"
html_title = "distcrawl"
html_static_path: list[str] = []
