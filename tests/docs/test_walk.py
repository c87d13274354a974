"""The docs followed page by page, as a newcomer reads them: the README, then the site's pages in
the order of its navigation (the toctrees of ``docs/index.md``), every block marked
``<!-- run: ID -->`` typed as written into ONE shell, in one folder that looks like the
checkout, with one ``DISTCRAWL_HOME`` (its default, ``./.distcrawl``).

The walk fails when a block errs, when a page ends with a process of its own still running
(a shop, a node, a daemon: pages stop what they start; the embedded servers, which detach,
are the exception the pages document), when a page leaves one of the documented ports bound,
and when a page writes into the checkout outside its ignored paths. A page that needs a fresh
crawl says so itself: it resets the crawl or uses a home of its own.

Ports: every fixed port the pages name (the shop's 8000, the dashboard's 8470, the cluster's
7000-7002, scrapyd's 6800/6801) is replaced, in every block and in ``scrapy.cfg``, by one port
chosen for the whole walk below the kernel's ephemeral range (with the port 10000 above it, a
cluster's bus port, free as well). Other tests bind port 0, which the kernel takes from the
ephemeral range only, so the walk can run beside them.

What a block cannot show is done here, named by the block it precedes (:data:`BEFORE`): the
wait a reader does by looking again, a scrapy-redis crawl to migrate, a journal a MongoDB
outage left. What the output must say is checked per block (:data:`CHECKS`).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import docblocks
import pymongo
import pytest
import redis
import scrapy
from docshell import ROOT, Shell, wait_until

from distcrawl.node.items import Product
from distcrawl.storage.documents import make_record
from distcrawl.storage.journal import Journal

#: what the walk's folder holds of the checkout (linked), besides scrapy.cfg and .gitignore
LINKED = ("distcrawl", "dev.py", "bench", "pyproject.toml", "README.md")
#: where a block names a port: a URL or host:port, an option, a config line, a loop's list
_PORT_CONTEXT = re.compile(
    r"(?:127\.0\.0\.1:|localhost:|--port[ =]|-p |http_port = |for port in )((?:\d{4,5} ?)+)"
)
#: seconds a block may take (a demo of several sites or a Redis Cluster takes longest)
BLOCK_TIMEOUT = 600


def documented_ports(texts: list[str]) -> list[str]:
    """The fixed ports the blocks name, in the order first named."""
    found: list[str] = []
    for text in texts:
        for group in _PORT_CONTEXT.findall(text):
            found += [p for p in group.split() if 1024 <= int(p) < 65536 and p not in found]
    return found


def _free(port: int) -> bool:
    """Nothing binds *port* (a port left in TIME_WAIT by a closed server is free to a server,
    which binds with SO_REUSEADDR, as this check does)."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(2)
        return s.connect_ex(("127.0.0.1", port)) == 0


def walk_ports(fixed: list[str]) -> dict[str, str]:
    """A port for each of *fixed*, below the ephemeral range, whose port + 10000 is free too
    (and below that range as well)."""
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    rng = random.Random()
    chosen: dict[str, str] = {}
    while len(chosen) < len(fixed):
        port = rng.randrange(max(1024, low - 12_000), low - 10_000)
        if str(port) not in chosen.values() and _free(port) and _free(port + 10_000):
            chosen[fixed[len(chosen)]] = str(port)
    return chosen


# --------------------------------------------------------------------------- the checks


def _json_lines(output: str) -> list[dict[str, Any]]:
    return [json.loads(ln) for ln in output.splitlines() if ln.startswith("{")]


def _stored(output: str) -> list[int]:
    """The "products stored by this crawl" figures of the status screens in *output*."""
    return [int(n.replace(",", "")) for n in re.findall(r"stored by this crawl\s+([\d,]+)", output)]


def _demo(expect_stored: int | None = None, sites: list[int] | None = None) -> Callable[..., None]:
    def check(walk: Walk, output: str) -> None:
        summaries = _json_lines(output)
        assert summaries, output[-2000:]
        for summary in summaries:
            assert summary["lost"] == 0 and summary["duplicates"] == 0, summary
            if expect_stored is not None:
                assert summary["stored"] == expect_stored, summary
        if sites is not None:
            assert [s["sites"] for s in summaries] == sites, summaries

    return check


def _status_stored(n: int) -> Callable[..., None]:
    def check(walk: Walk, output: str) -> None:
        assert _stored(output) == [n], output[-3000:]
        assert "drained" in output, output[-3000:]

    return check


def _readme_demo(walk: Walk, output: str) -> None:
    assert "stored 300" in output or '"stored": 300' in output, output[-2000:]


def _shop_extract(walk: Walk, output: str) -> None:
    product = next(p for p in _json_lines(output) if "input" in p)
    assert product["kind"] == "product", product
    assert "DC-000001" in json.dumps(product), product


def _profile_try(walk: Walk, output: str) -> None:
    assert "profile" in output and "DC-000001" in output, output


def _profile_draft(walk: Walk, output: str) -> None:
    assert "DC-000003" in output, output


def _explain(walk: Walk, output: str) -> None:
    assert re.search(r"sku\s+DC-000001", output), output


def _revisit_status(walk: Walk, output: str) -> None:
    revisit = json.loads(
        next(ln for ln in output.splitlines() if ln.startswith("{")).replace("'", '"')
        .replace("None", "null")
    )  # fmt: skip
    assert revisit["scheduled"] > 0, revisit
    assert "time to drain" in output and "continuous" in output, output


def _revisit_changes(walk: Walk, output: str) -> None:
    assert " -> " in output, output


def _mongodb(walk: Walk, output: str) -> None:
    assert re.search(r"^20 products$", output, re.M), output
    assert "'price_history'" in output, output


def _scrapyd_deploy(walk: Walk, output: str) -> None:
    assert output.count('"status": "ok"') == 2, output


def _migrate(walk: Walk, output: str) -> None:
    summary = _json_lines(output)[-1]
    assert summary["migrated"] == walk.migrated and summary["refused"] == 0, summary
    assert summary["fingerprints_copied"] == walk.migrated, summary


def _shop_changes(walk: Walk, output: str) -> None:
    assert '"changes"' in output or '"added"' in output, output


def _ops_status(walk: Walk, output: str) -> None:
    (status,) = _json_lines(output)
    assert status["drained"], status
    assert status["dead_letters"]["total"] == 3, status["dead_letters"]
    assert status["store"]["this_crawl"] == 97, status["store"]
    assert _stored(output) == [97], output


def _ops_watch(walk: Walk, output: str) -> None:
    assert len([ln for ln in output.splitlines() if "catalog" in ln]) == 3, output
    assert "error" not in output.lower(), output


def _ops_web_read(walk: Walk, output: str) -> None:
    assert re.search(r"^distcrawl_up 1\.0$", output, re.M), output
    assert '"crawl": "catalog"' in output, output


def _ops_seed(walk: Walk, output: str) -> None:
    assert output.strip(), output


def _ops_seed_refused(walk: Walk, output: str) -> None:
    assert "exit status 1" in output, output
    assert "bad_scheme" in output + walk.shell.stderr(), output


def _ops_deadletters(walk: Walk, output: str) -> None:
    assert "http_500" in output and re.search(r"\b3\b", output), output


def _journal(walk: Walk, output: str) -> None:
    assert re.search(r"replayed 2 products", output + walk.shell.stderr()), output


def _ops_control(walk: Walk, output: str) -> None:
    assert "exit status 2: nothing deleted" in output, output


def _demo_incidents(walk: Walk, output: str) -> None:
    (summary,) = _json_lines(output)
    assert summary["stored"] == summary["expected"] == 600, summary
    assert summary["webhook_notices"]["finding"] == 1, summary["webhook_notices"]
    assert summary["webhook_notices"]["crawl_finished"] == 1, summary["webhook_notices"]
    assert all(summary["incident_checks"].values()), summary["incident_checks"]
    assert any(f["field"] == "price" for f in summary["findings"]), summary["findings"]


def _written_to(output: str) -> Path:
    """The file a command said it wrote (``... written to PATH``)."""
    found = re.findall(r"written to (\S+)$", output, re.M)
    assert found, output
    return Path(found[-1])


def _ops_errors(walk: Walk, output: str) -> None:
    # the three products' 500s, each try: one group, its first occurrence kept
    assert "HTTP 500 Internal Server Error" in output, output
    assert re.search(r"^status\s+500$", output, re.M), output
    assert _written_to(output).stat().st_size > 0, output


def _ops_report(walk: Walk, output: str) -> None:
    assert "crawl catalog finished in" in output and '"crawl": "catalog"' in output, output
    assert "HTTP 500" in _written_to(output).read_text(encoding="utf-8"), output


def _ops_functions(walk: Walk, output: str) -> None:
    assert "distcrawl_frontier_" in output, output


def _politeness_delay(walk: Walk, output: str) -> None:
    assert _stored(output) == [4], output[-3000:]
    logs = walk.shell.stderr(tail=10**7)
    assert "asks for a Crawl-delay of 1s: one request at a time" in logs, logs[-3000:]


def _politeness_delay_cap(walk: Walk, output: str) -> None:
    assert _stored(output) == [2], output[-3000:]
    logs = walk.shell.stderr(tail=10**7)
    assert "Crawl-delay of 120s: capped at DISTCRAWL_MAX_CRAWL_DELAY" in logs, logs[-3000:]


def _politeness_robots(walk: Walk, output: str) -> None:
    assert re.search(r"robots_unavailable\s+1\b", output), output[-3000:]
    assert "re-queued 1 of 1 matching dead letters" in output, output[-3000:]
    assert _stored(output) == [10], output[-3000:]
    logs = walk.shell.stderr(tail=10**7)
    assert "given up, the site's requests become dead letters" in logs, logs[-3000:]


def _politeness_servers(walk: Walk, output: str) -> None:
    assert "Servers with more than one site" in output, output[-3000:]
    assert re.search(r"127\.0\.0\.1\s+3\b", output), output[-3000:]
    assert _stored(output) == [30], output[-3000:]


CHECKS: dict[str, Callable[[Walk, str], None]] = {
    "readme-demo": _readme_demo,
    "readme-multinode": _status_stored(200),
    "demo-json": _demo(expect_stored=100),
    "demo-errors": _demo(),
    "demo-sites": _demo(sites=[3]),
    "demo-incidents": _demo_incidents,
    "cluster-demo": _demo(sites=[4]),
    "cluster-crawl": _status_stored(100),
    "shop-extract": _shop_extract,
    "profile-try": _profile_try,
    "profile-draft": _profile_draft,
    "explain": _explain,
    "variants": _demo(expect_stored=50),
    "revisit-status": _revisit_status,
    "revisit-changes": _revisit_changes,
    "politeness": _status_stored(30),
    "politeness-crawl-delay": _politeness_delay,
    "politeness-crawl-delay-cap": _politeness_delay_cap,
    "politeness-robots": _politeness_robots,
    "politeness-servers": _politeness_servers,
    "mongodb-query": _mongodb,
    "scrapyd-deploy": _scrapyd_deploy,
    "scrapyd-jobs": _status_stored(100),
    "migrate": _migrate,
    "shop-changes": _shop_changes,
    "ops-status": _ops_status,
    "ops-watch": _ops_watch,
    "ops-web-read": _ops_web_read,
    "ops-seed": _ops_seed,
    "ops-seed-refused": _ops_seed_refused,
    "ops-deadletters": _ops_deadletters,
    "ops-errors": _ops_errors,
    "ops-report": _ops_report,
    "journal": _journal,
    "ops-control": _ops_control,
    "ops-functions": _ops_functions,
}


# ---------------------------------------------------------------- what blocks cannot show


def _changes_logged(walk: Walk) -> None:
    """A reader of the revisit guide lets the crawl run until the shop's first change is
    crawled, before looking at its status."""
    uri = walk.env("MONGO_URI")

    def logged() -> bool:
        client: pymongo.MongoClient[Any] = pymongo.MongoClient(uri, serverSelectionTimeoutMS=5000)
        try:
            return bool(client.get_default_database()["changes"].count_documents({}))
        finally:
            client.close()

    assert wait_until(logged, timeout=240, every=1), walk.shell.stderr()


def _scrapyd_jobs_finished(walk: Walk) -> None:
    """A reader of the scrapyd guide looks at listjobs.json until both jobs finished."""

    def finished(port: str) -> bool:
        url = f"http://127.0.0.1:{port}/listjobs.json?project=distcrawl"
        with urllib.request.urlopen(url, timeout=10) as response:
            jobs = json.load(response)
        return bool(jobs["finished"]) and not jobs["running"] and not jobs["pending"]

    ports = [walk.shell.ports[p] for p in ("6800", "6801")]
    assert wait_until(lambda: all(finished(p) for p in ports), 400, 1), walk.shell.stderr()


def _scrapy_redis_crawl(walk: Walk) -> None:
    """The migrate guide starts from a stopped scrapy-redis crawl in the Redis REDIS_URL
    names: a pickled priority queue and a dupefilter, as its nodes leave them."""
    from scrapy_redis import picklecompat

    walk.shell.run_ok('eval "$(distcrawl services start)"\n')
    client = redis.Redis.from_url(walk.env("REDIS_URL"))
    for i in range(5):
        request = scrapy.Request(f"http://127.0.0.1:9/p/{i}.html", priority=100)
        data = picklecompat.dumps({**request.to_dict(), "callback": "parse"})
        client.zadd("catalog:requests", {data: -request.priority})
        client.sadd("catalog:dupefilter", f"{i:040x}")
    client.close()
    walk.migrated = 5


def _a_journal_left(walk: Walk) -> None:
    """The journals page starts from a journal a node left while MongoDB was down."""
    shop = f"http://127.0.0.1:{walk.shell.ports['8000']}"
    journal = Journal(
        walk.shell.workdir / ".distcrawl" / "journal" / "catalog.products",
        database="catalog",
        collection="products",
    )
    now = dt.datetime.now(dt.UTC)
    items = [
        Product(url=f"{shop}/p/journaled-{i}.html", name=f"Journaled {i}", price="9.99",
                currency="USD", site="127.0.0.1")
        for i in (1, 2)
    ]  # fmt: skip
    journal.append([make_record(item, ("url",), history=20, now=now) for item in items])
    journal.close()


BEFORE: dict[str, Callable[[Walk], None]] = {
    "revisit-status": _changes_logged,
    "scrapyd-jobs": _scrapyd_jobs_finished,
    "migrate": _scrapy_redis_crawl,
    "journal": _a_journal_left,
}


# --------------------------------------------------------------------------- the walk


class Walk:
    """One shell in a folder that looks like the checkout, and what a page may leave. The
    shell's temporary folders (``mktemp``) are made in a folder of the walk's own."""

    def __init__(self, folder: Path, ports: dict[str, str]) -> None:
        folder.mkdir(parents=True)
        for name in LINKED:
            (folder / name).symlink_to(ROOT / name)
        shutil.copy(ROOT / ".gitignore", folder / ".gitignore")
        self.tmp = folder.parent / "tmp"
        self.tmp.mkdir()
        self.shell = Shell(folder, ports=ports, link=(), env={"TMPDIR": str(self.tmp)})
        self.migrated = 0
        git = ["git", "-C", str(folder)]
        quiet = {"check": True, "capture_output": True}
        subprocess.run([*git, "init", "-q"], **quiet)  # type: ignore[call-overload]
        # the shell's stderr, kept in the folder, is the walk's own
        (folder / ".git" / "info" / "exclude").write_text("shell.stderr\n")
        subprocess.run([*git, "add", "-A"], **quiet)  # type: ignore[call-overload]
        subprocess.run(
            [*git, "-c", "user.name=walk", "-c", "user.email=walk@localhost", "commit", "-qm",
             "the checkout"],
            **quiet,
        )  # type: ignore[call-overload]  # fmt: skip
        self._linked_before = _untracked(ROOT, LINKED)

    def env(self, name: str) -> str:
        return self.shell.run_ok(f'echo "${name}"\n').output.strip().splitlines()[-1]

    def leftovers(self) -> list[str]:
        """The processes of the shell's session other than the shell (zombies aside)."""
        return [f"{pid}: {cmdline}" for pid, session, _, cmdline in _processes()
                if session == self.shell.proc.pid and pid != self.shell.proc.pid]  # fmt: skip

    def detached(self) -> list[tuple[int, str]]:
        """Processes that left the session but run in the walk's folders (a daemonized
        server): their working folder or their command line is the walk's."""
        here = str(self.shell.workdir.parent)
        return [(pid, cmdline) for pid, session, cwd, cmdline in _processes()
                if session != self.shell.proc.pid and (cwd.startswith(here) or here in cmdline)
                and pid != os.getpid()]  # fmt: skip

    def servers_left(self) -> list[Path]:
        """Homes of embedded servers the pages made in temporary folders."""
        return sorted({p.parent for p in self.tmp.rglob("*.json")
                       if p.name in ("redis.json", "mongo.json")})  # fmt: skip

    def bound_ports(self) -> list[str]:
        """The documented ports something still listens on."""
        return [f"{fixed} (as {port})" for fixed, port in self.shell.ports.items()
                if _listening(int(port))]  # fmt: skip

    def written(self) -> list[str]:
        """Files the pages wrote into the checkout outside its ignored paths."""
        done = subprocess.run(
            ["git", "-C", str(self.shell.workdir), "status", "--porcelain",
             "--untracked-files=all"],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        ours = done.stdout.splitlines()
        through = sorted(_untracked(ROOT, LINKED) - self._linked_before)
        return ours + [f"{p} (in the checkout, through a link)" for p in through]


def _processes() -> list[tuple[int, int, str, str]]:
    """(pid, session, working folder, command line) of every running process (no zombies)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
            cwd = os.readlink(entry / "cwd")
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if fields[0] != "Z":
            found.append((int(entry.name), int(fields[3]), cwd, cmdline))
    return found


def _untracked(repo: Path, paths: tuple[str, ...]) -> set[str]:
    """The files under *paths* of *repo* that git neither tracks nor ignores."""
    done = subprocess.run(
        ["git", "-C", str(repo), "status", "--porcelain", "--untracked-files=all", "--",
         *[p for p in paths if (repo / p).is_dir()]],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return {line for line in done.stdout.splitlines() if line.startswith("??")}


def _page_end(walk: Walk, page: str) -> None:
    """What a page must not leave behind: its processes, its ports, files in the checkout."""
    left: list[str] = []
    wait_until(lambda: not walk.leftovers() and not walk.bound_ports(), timeout=30, every=0.5)
    left += [f"a process still running: {p}" for p in walk.leftovers()]
    left += [f"a documented port still bound: {p}" for p in walk.bound_ports()]
    left += [f"written into the checkout: {w}" for w in walk.written()]
    assert not left, f"{page} left behind:\n" + "\n".join(left) + f"\n{walk.shell.stderr()}"


@pytest.mark.slow
def test_the_docs_walk(tmp_path: Path) -> None:
    order = docblocks.reading_order()
    # a block a page includes from a file read before (the README's lines, which the
    # one-machine page shows again) was run where the reader first met it
    runs, met = [], set()
    for page, b in order:
        if b.kind == "run" and b.arg not in met:
            runs.append((page, b))
            met.add(b.arg)
    ports = walk_ports(documented_ports([b.text for _, b in runs]))
    walk = Walk(tmp_path / "checkout", ports)
    shell = walk.shell
    finished = False
    took: list[tuple[float, str]] = []
    try:
        for page in dict.fromkeys(p for p, _ in order):
            name = str(page.relative_to(ROOT))
            for _, block in [(p, b) for p, b in runs if p == page]:
                before = BEFORE.get(block.arg)
                if before is not None:
                    before(walk)
                began = time.monotonic()
                result = shell.run(block.text, timeout=BLOCK_TIMEOUT)
                took.append((time.monotonic() - began, block.arg))
                assert result.ok(), (
                    f"{name}: block {block.arg} ({block.where}) failed: {result.errors}\n"
                    f"--- output:\n{result.output[-3000:]}\n--- stderr:\n{shell.stderr()}"
                )
                check = CHECKS.get(block.arg)
                if check is not None:
                    check(walk, result.output)
            _page_end(walk, name)
        finished = True
    finally:
        print(
            "the walk's slowest blocks:",
            ", ".join(f"{a} {t:.0f}s" for t, a in sorted(took)[::-1][:12]),
        )
        # the servers the pages leave running by design (the default home's), those of
        # temporary homes, then the shell's own processes
        shell.close(homes=(shell.workdir / ".distcrawl", *walk.servers_left()))
        left = walk.detached()
        for pid, _ in left:  # started by the walk (they run in its folders): ended by PID
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    if finished:
        assert not left, f"processes left running outside the pages' homes: {left}"


def test_every_run_block_is_on_the_walk() -> None:
    """The walk runs every block marked run: a page outside the navigation would be missed."""
    walked = {b.arg for _, b in docblocks.reading_order() if b.kind == "run"}
    marked = {b.arg for b in docblocks.shell_blocks() if b.kind == "run"}
    assert marked <= walked, sorted(marked - walked)
    assert set(CHECKS) <= marked and set(BEFORE) <= marked, (
        sorted(set(CHECKS) - marked), sorted(set(BEFORE) - marked)
    )  # fmt: skip


def test_the_walks_ports_are_the_documented_ones() -> None:
    runs = [b.text for _, b in docblocks.reading_order() if b.kind == "run"]
    assert set(documented_ports(runs)) >= {"8000", "8470", "7000", "7001", "7002", "6800"}
    chosen = walk_ports(["8000", "7000"])
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    assert all(int(p) + 10_000 < low for p in chosen.values()), chosen
