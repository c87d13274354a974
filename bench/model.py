"""The frontier's protocol against its model, for longer than CI runs it: random interleavings
of pushes, leases, acks, failures, parked retries, releases, heart-beats, clean stops, crashes,
recoveries, rewinds and Redis restarts across 3 node identities, on a fresh valkey-server, the
whole frontier compared with the model after every step (``tests/frontier_model.py``; the CI
test is ``tests/frontier/test_model.py``).

    .venv/bin/python bench/model.py --examples 500 --steps 60 --json

A failure prints the shortest sequence of steps Hypothesis found; ``passed`` is false.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from _results import print_report
from frontier_model import run_model

from distcrawl.servers.process import RedisServer


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--examples", type=int, default=200, help="examples to run")
    parser.add_argument("--steps", type=int, default=60, help="most steps per example")
    parser.add_argument("--no-shrink", action="store_true", help="report a failure as found")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    home = Path(tempfile.mkdtemp(prefix="distcrawl-model-"))
    server = RedisServer(data_dir=home / "data", log_path=home / "redis.log").start()
    started = time.monotonic()
    failure = None
    try:
        run_model(server, examples=args.examples, steps=args.steps, shrink=not args.no_shrink)
    except Exception as exc:
        failure = "".join(traceback.format_exception(exc))
        print(failure, file=sys.stderr)
    finally:
        server.stop()
    report = {
        "examples": args.examples,
        "steps": args.steps,
        "passed": failure is None,
        "failure": failure.strip().splitlines()[-1] if failure else None,
        "seconds": round(time.monotonic() - started, 1),
    }
    print_report(report, ("examples", "steps", "passed", "failure", "seconds"), as_json=args.json)
    return 0 if failure is None else 1


if __name__ == "__main__":
    sys.exit(main())
