"""The docs' own modules (block scanner, reference sources and renderers) for the docs tests."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "docs" / "_ext"))
