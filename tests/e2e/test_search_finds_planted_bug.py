"""The fault search finds a bug planted on purpose.

The planted bug: with ``DISTCRAWL_TEST_PLANTED_BUG=misconf`` in a node's environment (only
``bench/chaos.py --plant-bug misconf`` and this module set it), a ``MISCONF`` reply is no
outage (:func:`distcrawl.frontier.outages.classify`), as before the fix of issue 41.

The search ran with it, and its result is committed::

    .venv/bin/python bench/chaos.py --search 20 --seed 1 --plant-bug misconf \
        --until-violation --json

(``bench/results/chaos--search_20_seed_1_plant-bug_misconf_until-violation.json``). The tests
here check that the search's seeds give every class of error reply a schedule of its own in
every 13 (so that a bug of one class is met within 20 schedules, whatever the draws), that the
committed run found the planted bug within 20 schedules, and that replaying the seed it found
finds the bug again with the plant, and not without it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.append(str(BENCH))  # after every other folder: bench/ holds a frontier.py

from chaos_schedule import ERROR_CLASSES, Schedule, focus_class, schedule_seeds  # noqa: E402

from distcrawl.base.config import PLANTED_BUG  # noqa: E402
from distcrawl.servers.faultproxy import ERRORS  # noqa: E402

#: the committed result of the planted search
PLANTED_RESULT = (
    BENCH / "results" / "chaos--search_20_seed_1_plant-bug_misconf_until-violation.json"
)


def misconf_violations(report: dict[str, Any]) -> list[dict[str, Any]]:
    return [v for v in report["violations"] if "MISCONF" in v["seen"]]


@pytest.mark.parametrize("seed", [1, 2, 7, 1234567])
def test_every_class_of_error_reply_refuses_writes_mid_crawl_in_every_13_schedules(
    seed: int,
) -> None:
    assert sorted(ERROR_CLASSES) == sorted(ERRORS)
    seeds = schedule_seeds(seed, 40)
    for start in range(0, len(seeds) - len(ERROR_CLASSES) + 1):
        window = seeds[start : start + len(ERROR_CLASSES)]
        assert {focus_class(s) for s in window} == set(ERRORS)
    for s in seeds:
        schedule = Schedule.draw(s)
        assert Schedule.draw(s) == schedule  # a replay runs the same schedule
        focus = [
            e
            for e in schedule.events
            if e.kind == "proxy-error"
            and e.fault is not None
            and e.fault["error"] == focus_class(s)
            and not e.fault["match"]
            and e.at_progress is not None
        ]
        assert focus, schedule.describe()


def test_the_committed_search_found_the_planted_bug_within_20_schedules() -> None:
    result = json.loads(PLANTED_RESULT.read_text())
    report = result["report"]
    assert report["planted_bug"] == "misconf"
    assert report["seed"] == 1 and report["schedules"] <= 20
    assert misconf_violations(report), report["violations_by_invariant"]


def replay(seed: int, tmp_path: Path, *plant: str) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k != PLANTED_BUG}
    env["DISTCRAWL_BENCH_RESULTS"] = str(tmp_path / "results")
    proc = subprocess.run(
        [sys.executable, str(BENCH / "chaos.py"), "--replay", str(seed), *plant, "--json"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env=env,
    )
    assert proc.stdout.strip(), proc.stderr[-3000:]
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


@pytest.mark.slow
def test_a_replay_of_the_seed_found_finds_the_planted_bug_and_only_with_it(
    tmp_path: Path,
) -> None:
    report = json.loads(PLANTED_RESULT.read_text())["report"]
    seed = misconf_violations(report)[0]["seed"]
    planted = replay(seed, tmp_path, "--plant-bug", "misconf")
    assert planted["planted_bug"] == "misconf"
    assert misconf_violations(planted), planted["violations"]
    plain = replay(seed, tmp_path)
    assert plain["planted_bug"] is None
    assert not misconf_violations(plain), plain["violations"]
