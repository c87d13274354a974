"""Scrapy's own crawl tests, run on Scrapy's scheduler and again with the frontier switched on.

    .venv/bin/python bench/scrapy_suite.py [--json] [--modules test_crawl ...] [--frontier-only]

The tests are those of the Scrapy release installed in .venv (its sdist from the package
index, cached in ``.scrapy-suite/``, git-ignored; only ``tests/`` with the mock server and the
pytest configuration are extracted). Their extra dependencies are the ``scrapy-tests`` extra
of pyproject.toml, installed into .venv when missing. Each pass is one pytest process run by
``scrapy_suite_plugin``: with the frontier, every crawler gets ``ADDONS =
{"distcrawl.Frontier": 0}`` and the ``REDIS_URL`` of one real Redis for the session, emptied
before each test (a test that picks its own ``SCHEDULER`` keeps it). A test that does not end
within ``--timeout`` seconds counts as hung. Tests that differ from Scrapy by design are listed
with their reason in ``scrapy_suite_differences.py``: reported apart, neither passed nor
failed. ``--frontier-only`` compares with the last Scrapy pass recorded in the cache.

A full run (15 modules, both passes) took 15-16 minutes on the shared 2-core development
machine (load 3 to 6): Scrapy's pass about 2 minutes (40 s on a quiet machine), the frontier's
about 13, of which 8 are its 16 hangs at 30 s each; every hang fixed saves 30 s.
Progress goes to stderr; the table (or, with ``--json``, one object) to stdout. Exit status 0
when no test that passes on Scrapy fails with the frontier outside the expected differences.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import json
import os
import subprocess
import sys
import tarfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
CACHE = ROOT / ".scrapy-suite"
sys.path.insert(0, str(BENCH))

from _results import write_result  # noqa: E402
from scrapy_suite_differences import EXPECTED_DIFFERENCES  # noqa: E402

#: the modules of Scrapy's test suite that crawl through a scheduler
MODULES = (
    "test_crawl",
    "test_engine",
    "test_scheduler",
    "test_request_cb_kwargs",
    "test_spider_start",
    "test_engine_loop",
    "test_engine_close_spider",
    "test_request_left",
    "test_closespider",
    "test_request_attribute_binding",
    "test_signals",
    "test_pipeline_crawl",
    "test_spidermiddleware_start",
    "test_spidermiddleware_process_start",
    "test_spidermiddleware_output_chain",
)
#: what Scrapy's tests import beyond distcrawl's own dependencies (the ``scrapy-tests`` extra)
TEST_MODULES = ("pytest_twisted", "pytest_timeout", "pyftpdlib", "attr")
#: seconds a test may run before it counts as hung
DEFAULT_TIMEOUT = 30.0
OUTCOMES = ("passed", "failed", "hung", "skipped")


def log(message: str) -> None:
    print(f"scrapy-suite: {message}", file=sys.stderr, flush=True)


def ensure_test_dependencies() -> None:
    missing = [m for m in TEST_MODULES if importlib.util.find_spec(m) is None]
    if not missing:
        return
    log(f"installing the scrapy-tests extra (missing: {', '.join(missing)})")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "-e", f"{ROOT}[scrapy-tests]"],
        check=True,
        stdout=sys.stderr,
    )


def scrapy_tests() -> Path:
    """The folder holding the installed Scrapy release's tests, downloaded once."""
    version = importlib.metadata.version("scrapy")
    folder = CACHE / f"scrapy-{version}"
    if (folder / "scrapy.cfg").exists():
        return folder
    CACHE.mkdir(exist_ok=True)
    sdist = CACHE / f"scrapy-{version}.tar.gz"
    if not sdist.exists():
        log(f"downloading the sdist of scrapy {version} from the package index")
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "-q",
                "--no-deps",
                "--no-binary",
                ":all:",
                "-d",
                str(CACHE),
                f"scrapy=={version}",
            ],
            check=True,
            stdout=sys.stderr,
        )
    prefix = f"scrapy-{version}/"
    wanted = (f"{prefix}tests/", f"{prefix}conftest.py", f"{prefix}pyproject.toml")
    with tarfile.open(sdist) as archive:
        members = [m for m in archive.getmembers() if m.name.startswith(wanted)]
        # not the sdist's scrapy/: the tests must import the Scrapy distcrawl runs on
        archive.extractall(CACHE, members=members, filter="data")
    # Scrapy looks for a project's scrapy.cfg from the working folder up: without this one a
    # test's `scrapy` subprocess would find distcrawl's own, and run on its settings
    (folder / "scrapy.cfg").write_text("# no Scrapy project: Scrapy's tests run as they are\n")
    return folder


def run_pass(
    tests: Path, modules: list[str], *, frontier: bool, timeout: float
) -> dict[str, dict[str, Any]]:
    """Each test's record from one pytest pass (resumed after a test that had to be killed)."""
    name = "frontier" if frontier else "scrapy"
    results = CACHE / f"results-{name}.jsonl"
    results.unlink(missing_ok=True)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(BENCH)]))}
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "-p",
        "scrapy_suite_plugin",
        "--suite-results",
        str(results),
        "--suite-timeout",
        str(timeout),
        # the backstop for a test that blocks the reactor: the process is ended, and the
        # pass resumes after that test
        "--timeout",
        str(timeout * 2 + 60),
        "--timeout-method",
        "thread",
        *(["--frontier"] if frontier else []),
        *(f"tests/{m}.py" for m in modules),
    ]
    records: dict[str, dict[str, Any]] = {}
    output = CACHE / f"pytest-{name}.log"
    output.unlink(missing_ok=True)
    for _attempt in range(200):
        log(f"{name} pass: {len(modules)} modules (pytest's output: {output})")
        with output.open("a") as out:
            process = subprocess.Popen(
                command, cwd=tests, env=env, stdout=out, stderr=subprocess.STDOUT
            )
            try:
                process.wait()
            finally:
                if process.poll() is None:  # the runner was interrupted: so is its pytest
                    process.kill()
                    process.wait()
        records, running, finished = _read(results)
        if not records and running is None:
            tail = output.read_text(errors="replace")[-3000:]
            raise SystemExit(f"scrapy-suite: the {name} pass ran no test:\n{tail}")
        if finished or running is None:
            break
        log(f"{running} blocked its process: counted as hung, the pass resumes after it")
        records[running] = {"outcome": "hung", "cause": "blocked the process; ended"}
        with results.open("a") as out:
            out.write(json.dumps({"id": running, **records[running]}) + "\n")
    return records


def _read(path: Path) -> tuple[dict[str, dict[str, Any]], str | None, bool]:
    """The finished tests' records, the test that started and never finished, and whether the
    session ended."""
    records: dict[str, dict[str, Any]] = {}
    running = None
    finished = False
    if not path.exists():
        return records, None, False
    for line in path.read_text().splitlines():
        record = json.loads(line)
        if record.get("session") == "finished":
            finished = True
        elif "outcome" in record:
            records[record["id"]] = record
            running = None
        elif record.get("started"):
            running = record["id"]
    return records, running, finished


def module_of(test_id: str) -> str:
    return test_id.split("::", 1)[0].rsplit("/", 1)[-1].removesuffix(".py")


def summarize(
    modules: list[str],
    scrapy: dict[str, dict[str, Any]] | None,
    frontier: dict[str, dict[str, Any]] | None,
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, records in (("scrapy", scrapy), ("frontier", frontier)):
        if records is None:
            continue
        per: dict[str, Counter[str]] = {m: Counter() for m in modules}
        for test_id, record in records.items():
            outcome = record["outcome"]
            if name == "frontier" and test_id in EXPECTED_DIFFERENCES and outcome != "passed":
                outcome = "expected"
            per.setdefault(module_of(test_id), Counter())[outcome] += 1
        keys = (*OUTCOMES, "expected") if name == "frontier" else OUTCOMES
        totals: Counter[str] = sum(per.values(), Counter())
        out[name] = {
            "modules": {m: {k: c[k] for k in keys} for m, c in per.items()},
            "totals": {k: totals[k] for k in keys},
        }
    regressions = []
    expected = []
    if frontier is not None:
        for test_id, record in frontier.items():
            on_scrapy = (scrapy or {}).get(test_id, {}).get("outcome")
            failed = record["outcome"] in ("failed", "hung")
            if test_id in EXPECTED_DIFFERENCES:
                expected.append(
                    {
                        "test": test_id,
                        "outcome": record["outcome"],
                        "scrapy": on_scrapy,
                        "reason": EXPECTED_DIFFERENCES[test_id],
                    }
                )
            elif failed and on_scrapy == "passed":
                regressions.append(
                    {"test": test_id, "outcome": record["outcome"], "cause": record["cause"]}
                )
    out["regressions"] = regressions
    out["expected_differences"] = expected
    return out


def table(summary: dict[str, Any], modules: list[str]) -> str:
    heads = ["module"]
    if "scrapy" in summary:
        heads += ["scrapy pass", "fail", "hung", "skip"]
    if "frontier" in summary:
        heads += ["frontier pass", "fail", "hung", "skip", "expected"]
    rows = []
    for m in [*modules, "total"]:
        row = [m]
        for name, keys in (
            ("scrapy", OUTCOMES),
            ("frontier", (*OUTCOMES, "expected")),
        ):
            if name in summary:
                counts = summary[name]["totals" if m == "total" else "modules"]
                counts = counts if m == "total" else counts.get(m, {})
                row += [str(counts.get(k, 0)) for k in keys]
        rows.append(row)
    widths = [max(len(r[i]) for r in [heads, *rows]) for i in range(len(heads))]

    def line(cells: list[str]) -> str:
        return "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        )

    text = [line(heads), line(["-" * w for w in widths])]
    text += [line(r) for r in rows[:-1]]
    text += [line(["-" * w for w in widths]), line(rows[-1])]
    for entry in summary.get("regressions", []):
        text.append(f"REGRESSION {entry['test']} [{entry['outcome']}]: {entry['cause']}")
    for entry in summary.get("expected_differences", []):
        text.append(f"expected difference {entry['test']} [{entry['outcome']}]: {entry['reason']}")
    return "\n".join(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--modules", nargs="+", default=list(MODULES), help="test modules")
    parser.add_argument(
        "--frontier-only",
        action="store_true",
        help="run the frontier pass only; Scrapy's figures are those of the last full run",
    )
    parser.add_argument(
        "--timeout", type=float, default=DEFAULT_TIMEOUT, help="seconds before a test is hung"
    )
    opts = parser.parse_args(argv)
    modules = [m.removesuffix(".py").rsplit("/", 1)[-1] for m in opts.modules]
    started = time.monotonic()
    ensure_test_dependencies()
    tests = scrapy_tests()
    scrapy: dict[str, dict[str, Any]] | None
    if opts.frontier_only:
        scrapy, _, _ = _read(CACHE / "results-scrapy.jsonl")
        scrapy = {k: v for k, v in scrapy.items() if module_of(k) in modules} or None
    else:
        scrapy = run_pass(tests, modules, frontier=False, timeout=opts.timeout)
    frontier = run_pass(tests, modules, frontier=True, timeout=opts.timeout)
    summary = summarize(modules, scrapy, frontier)
    summary["seconds"] = round(time.monotonic() - started, 1)
    summary["scrapy_version"] = importlib.metadata.version("scrapy")
    write_result(summary)
    if opts.json:
        print(json.dumps(summary, indent=1))
    else:
        print(table(summary, modules))
        print(f"{summary['seconds']:.0f} s")
    return 1 if summary["regressions"] else 0


if __name__ == "__main__":
    sys.exit(main())
