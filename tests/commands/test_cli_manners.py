"""The command line's manners, as an operator meets them in a shell: a pipe closed early ends a
command quietly with status 0 (as ``git log | head`` does), a failure is one line and no
traceback, and a seed pushed where no node would look is a warning."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import redis
import scrapy
from scrapy_redis import picklecompat

from distcrawl.frontier.store import FrontierKeys, FrontierStore

KEYS = FrontierKeys(spider="catalog", start_urls="catalog:start_urls")
ROOT = Path(__file__).resolve().parents[2]
DISTCRAWL = [sys.executable, "-m", "distcrawl.cli"]


def _env(redis_url: str = "") -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("REDIS_", "DISTCRAWL_"))}
    if redis_url:
        env["REDIS_URL"] = redis_url
    return env


def _run(*argv: str, redis_url: str = "", **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*DISTCRAWL, *argv], capture_output=True, text=True, cwd=ROOT, env=_env(redis_url),
        timeout=120, **kwargs,  # type: ignore[arg-type]
    )  # fmt: skip


@pytest.mark.parametrize(
    "argv",
    [
        ("status", "catalog", "--watch", "--no-store", "--interval", "0.2"),
        ("status", "catalog", "--watch", "--json", "--no-store", "--interval", "0.2"),
    ],
    ids=["lines", "json"],
)
def test_status_watch_into_head_ends_quietly_with_status_0(redis_url: str, r, argv) -> None:
    """The status page's own example: ``distcrawl status catalog --watch | head -3``."""
    FrontierStore(r, KEYS).heartbeat("n1", "{}")
    command = " ".join(DISTCRAWL + list(argv))
    done = subprocess.run(
        ["bash", "-c", f'{command} | head -3; echo "status ${{PIPESTATUS[0]}}"'],
        capture_output=True, text=True, cwd=ROOT, env=_env(redis_url), timeout=120,
    )  # fmt: skip
    lines = done.stdout.splitlines()
    assert len(lines) == 4 and lines[-1] == "status 0", (done.stdout, done.stderr)
    assert done.stderr == "", done.stderr  # no error line, no traceback


def _closed_url() -> str:
    """A Redis URL on a port nothing listens on (a connection is refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"redis://127.0.0.1:{port}/0"


def _into_a_closed_pipe(argv: list[str], redis_url: str) -> subprocess.CompletedProcess[str]:
    """*argv* with its standard output a pipe whose reader is gone before it writes."""
    read, write = os.pipe()
    os.close(read)
    try:
        return subprocess.run(
            [*DISTCRAWL, *argv], stdout=write, stderr=subprocess.PIPE, text=True, cwd=ROOT,
            env=_env(redis_url), timeout=120,
        )  # fmt: skip
    finally:
        os.close(write)


@pytest.mark.parametrize(
    "argv",
    [
        ["deadletters", "catalog", "list", "--json"],
        ["deadletters", "catalog", "refused"],
        ["status", "catalog", "--json", "--no-store", "--sample", "0"],
        ["seed", "catalog", "--dry-run", "https://shop.test/"],
        ["services", "status", "--json"],
    ],
    ids=lambda argv: " ".join(argv[:3]),
)
def test_output_into_a_closed_pipe_ends_quietly_with_status_0(redis_url: str, r, argv) -> None:
    FrontierStore(r, KEYS).heartbeat("n1", "{}")
    done = _into_a_closed_pipe(argv, redis_url)
    assert "Traceback" not in done.stderr and "Broken pipe" not in done.stderr, done.stderr
    assert "error" not in done.stderr, done.stderr
    if argv[0] != "services":  # services status exits 1 when no embedded server answers
        assert done.returncode == 0, done.stderr


def test_a_redis_that_breaks_is_still_an_error(tmp_path: Path) -> None:
    """A broken connection to Redis is no closed pipe: one error line and status 1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        url = f"redis://127.0.0.1:{s.getsockname()[1]}/0"

        def answer_and_hang_up() -> None:
            conn, _ = s.accept()
            conn.close()

        import threading

        threading.Thread(target=answer_and_hang_up, daemon=True).start()
        done = _run("status", "catalog", "--no-store", "--sample", "0", redis_url=url)
    assert done.returncode == 1, (done.stdout, done.stderr)
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(f"error: cannot read {url}"), line


def test_a_seed_list_no_node_would_read_is_a_warning(redis_url: str, r) -> None:
    typo = _run("seed", "catalgo", "https://shop.test/", redis_url=redis_url)
    assert typo.returncode == 0, typo.stderr
    assert typo.stderr.startswith(
        "warning: no spider of this project is named 'catalgo' (its spiders: catalog)"
    ), typo.stderr
    assert "no node would take seeds from catalgo:start_urls" in typo.stderr
    assert r.llen("catalgo:start_urls") == 1  # pushed all the same
    # a dry run warns alike, and pushes nothing
    dry = _run("seed", "catalgo", "https://shop.test/b", "--dry-run", redis_url=redis_url)
    assert dry.returncode == 0 and "no node would take seeds from" in dry.stderr, dry.stderr
    assert "would queue 1 seed(s)" in dry.stdout and r.llen("catalgo:start_urls") == 1
    # and with no Redis to read, on the project's spiders alone
    away = _run("seed", "catalgo", "https://shop.test/b", "--dry-run", redis_url=_closed_url())
    assert away.returncode == 0 and "(Redis not read: " in away.stderr, away.stderr
    dry_known = _run("seed", "catalog", "https://shop.test/", "--dry-run", redis_url=redis_url)
    assert "warning" not in dry_known.stderr, dry_known.stderr
    # pushing there again: still no node ever ran that crawl
    again = _run("seed", "catalgo", "https://shop.test/a", redis_url=redis_url)
    assert "warning: no spider of this project is named 'catalgo'" in again.stderr
    # an empty name is no misspelling: no crawl can have it (its keys would hold no hash tag),
    # so it is refused as every bad crawl name is, in one line, and nothing is pushed
    empty = _run("seed", "", "https://shop.test/", redis_url=redis_url)
    assert (empty.returncode, empty.stderr) == (
        2,
        "error: the crawl name is empty: give the spider a name\n",
    ), empty.stderr
    assert r.llen(":start_urls") == 0
    known = _run("seed", "catalog", "https://shop.test/", redis_url=redis_url)
    assert known.returncode == 0 and "warning" not in known.stderr, known.stderr
    # a crawl of another project, whose nodes ran: they read their list
    other = FrontierKeys(spider="other", start_urls="other:start_urls")
    r.hset(other.config, "_by", "a-node")
    theirs = _run("seed", "other", "https://shop.test/", redis_url=redis_url)
    assert theirs.returncode == 0 and "warning" not in theirs.stderr, theirs.stderr


def test_journal_show_of_a_folder_without_a_journal_says_so(tmp_path: Path) -> None:
    missing = tmp_path / ".distcrawl" / "journal" / "catalog.products"
    for action in ("show", "replay"):
        done = _run("journal", action, str(missing), "--mongo-uri", "mongodb://127.0.0.1:1/x")
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == (
            f"{missing}: no journal: a node writes one only while MongoDB is unreachable "
            "(after MONGO_JOURNAL_AFTER seconds of outage, or once more than "
            "MONGO_BUFFER_MAX_ITEMS products wait), into MONGO_JOURNAL_PATH (by default "
            "<DISTCRAWL_HOME>/journal/<database>.<collection>)"
        ), done.stdout
    as_json = _run("journal", "show", str(missing), "--json")
    assert json.loads(as_json.stdout) == {"directory": str(missing), "targets": [],
                                          "journal": False}  # fmt: skip
    a_file = tmp_path / "file"
    a_file.write_text("")
    done = _run("journal", "show", str(a_file))
    assert done.returncode == 2 and done.stderr.strip() == f"error: {a_file} is a file, not a " \
        "journal folder"  # fmt: skip


def test_the_shop_on_a_busy_port_is_one_line() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        done = _run("shop", "--port", str(port))
    assert done.returncode == 1 and done.stdout == "", done
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(f"distcrawl shop: cannot listen on 127.0.0.1:{port}: "), line
    assert "--port 0 picks a free one" in line


def test_migrate_without_trust_pickle_refuses_once_with_the_count(redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url)
    for i in range(25):
        request = scrapy.Request(f"http://shop.test/p/{i}.html", priority=100)
        data = picklecompat.dumps({**request.to_dict(), "callback": "parse"})
        client.zadd("pickled:requests", {data: -request.priority})
    client.close()
    done = _run("migrate", "pickled", "--dry-run", "--json", redis_url=redis_url)
    assert done.returncode == 1, done.stderr
    refusals = [ln for ln in done.stderr.splitlines() if ln.startswith("refused")]
    assert refusals == [
        "refused 25 queue entries: pickle_refused: pass --trust-pickle to read pickled queues"
    ], done.stderr
    assert json.loads(done.stdout)["refused"] == 25
