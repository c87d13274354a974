"""Extraction scores on the two halves of the real product pages, to tell a rule that holds
from one fitted to the pages it was written on.

The split: a page belongs to half ``a`` when the SHA-256 of its page id (the file name in
``extraction-dev/html/`` without ``.html.gz``), read as a number, is even, else to half ``b``
(36 and 37 of the 73 pages). Tune on ``a``; ``b`` says whether it carries over.

Runs ``score.py --show-errors`` once (so the figures are score.py's own) and scores each half
from its per-page lines; the whole set's figures are checked against score.py's summary line.

    python3 bench/extract_split.py                        # from the project's root
    python3 bench/extract_split.py --dataset DIR --json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATASET = ROOT.parent / "shared" / "extraction-dev"
ATTRS = ("price", "sku", "availability")


def half(page_id: str) -> str:
    """``a`` or ``b``: the parity of the SHA-256 of the page id."""
    return "a" if int(hashlib.sha256(page_id.encode()).hexdigest(), 16) % 2 == 0 else "b"


def f1(tp: int, fp: int, fn: int) -> float:
    """score.py's F1: 1.0 when nothing is wrong or missing."""
    if fp == fn == 0:
        return 1.0
    p = 0.0 if tp == fp == 0 else tp / (tp + fp)
    r = 0.0 if tp == fn == 0 else tp / (tp + fn)
    return 2 * p * r / (p + r) if p + r else 0.0


def counts(
    truth: dict[str, Any], errors: dict[tuple[str, str], str], attr: str, keys: list[str]
) -> tuple[int, int, int]:
    """(tp, fp, fn) of *attr* over *keys*, given score.py's error lines.

    A page with no error line predicted a true value (a tp when it has one); an error line
    with ``pred=None`` is a miss, any other a wrong value (a fp, and a fn when a true value
    exists).
    """
    tp = fp = fn = 0
    for key in keys:
        has_true = bool(truth[key].get(attr))
        pred = errors.get((attr, key[:12]))
        if pred is None:
            tp += has_true
        elif pred == "None":
            fn += has_true
        else:
            fp += 1
            fn += has_true
    return tp, fp, fn


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", type=Path, default=DEFAULT_DATASET)
    parser.add_argument("--json", action="store_true", help="one JSON line only")
    args = parser.parse_args(argv)
    truth = json.loads((args.dataset / "ground-truth.json").read_text())
    run = subprocess.run(
        [sys.executable, str(args.dataset / "score.py"), str(args.dataset), "--show-errors"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    errors: dict[tuple[str, str], str] = {}
    summary: dict[str, Any] = {}
    for line in run.stdout.splitlines():
        if line.startswith("{"):
            summary = json.loads(line)
            continue
        parts = line.split("\t")
        if len(parts) == 4 and parts[0] in ATTRS and parts[3].startswith("pred="):
            errors[(parts[0], parts[1])] = parts[3][len("pred=") :]
    keys = sorted(truth)
    groups = {
        "a": [k for k in keys if half(k) == "a"],
        "b": [k for k in keys if half(k) == "b"],
        "all": keys,
    }
    result: dict[str, Any] = {}
    for name, members in groups.items():
        scores: dict[str, Any] = {"pages": len(members)}
        for attr in ATTRS:
            scores[attr] = round(f1(*counts(truth, errors, attr, members)), 3)
        result[name] = scores
    result["gap"] = {attr: round(abs(result["a"][attr] - result["b"][attr]), 3) for attr in ATTRS}
    mismatch = [a for a in ATTRS if summary.get(a) != result["all"][a]]
    if mismatch:
        print(f"whole-set scores differ from score.py's on {mismatch}: {summary}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(result, sort_keys=True))
        return 0
    print(f"{'':6s}{'pages':>6s}" + "".join(f"{a:>14s}" for a in ATTRS))
    for name in ("a", "b", "all"):
        row = result[name]
        print(f"{name:6s}{row['pages']:6d}" + "".join(f"{row[a]:14.3f}" for a in ATTRS))
    print(f"{'|a-b|':12s}" + "".join(f"{result['gap'][a]:14.3f}" for a in ATTRS))
    print(json.dumps(result, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
