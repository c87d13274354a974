"""A bench's result: printed (``--json``: one object) and written to ``bench/results/``, with
the command, the machine and its load."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from _settings import BENCH_DIR

#: where each run writes its result file (a folder; empty: nowhere), default bench/results/
RESULTS_ENV = "DISTCRAWL_BENCH_RESULTS"
#: when this process started (the result file's started_at) and the load then
_STARTED_AT = time.time()
_LOAD_BEFORE = [round(x, 2) for x in os.getloadavg()]


def _cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return "unknown"


def write_result(report: dict[str, Any], argv: list[str] | None = None) -> Path | None:
    """Write this run's result to ``bench/results/<tool>[--<options>].json`` (one file per
    command, the latest run of it): the command, when it ran, the machine and the report that
    ``--json`` prints. The documentation's benchmarks page is built from these files."""
    folder = os.environ.get(RESULTS_ENV, str(BENCH_DIR / "results"))
    if not folder:
        return None
    argv = list(sys.argv if argv is None else argv)
    tool = Path(argv[0]).stem
    args = [a for a in argv[1:] if a != "--json"]
    slug = re.sub(r"[^A-Za-z0-9.,=_-]+", "_", "_".join(a.lstrip("-") for a in args)).strip("_")
    name = f"{tool}--{slug[:120]}.json" if slug else f"{tool}.json"
    result = {
        "tool": tool,
        "command": shlex.join([".venv/bin/python", f"bench/{tool}.py", *args, "--json"]),
        "argv": args,
        "started_at": round(_STARTED_AT, 3),
        "finished_at": round(time.time(), 3),
        "machine": {
            "cpus": os.cpu_count(),
            "cpu_model": _cpu_model(),
            "load_before": _LOAD_BEFORE,
            "load_after": [round(x, 2) for x in os.getloadavg()],
            "python": sys.version.split()[0],
        },
        "report": report,
    }
    path = Path(folder) / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, sort_keys=True, indent=1, default=str) + "\n")
    print(f"result written to {path}", file=sys.stderr)
    return path


def print_report(report: dict[str, Any], keys: Iterable[str], *, as_json: bool) -> None:
    """A tool's result: one JSON object with ``--json``, else the headline keys, one a line;
    and its result file (:func:`write_result`)."""
    write_result(report)
    if as_json:
        print(json.dumps(report, sort_keys=True))
        return
    for key in keys:
        print(f"{key:>22}: {report.get(key)}")
