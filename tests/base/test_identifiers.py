"""Crawl, node and seed list names are checked at start: generated names (Hypothesis) show that
none gets a traceback, a forged log line or a single-slot crawl, from a node (``scrapy crawl``:
one line, exit 2) or from any command that takes a crawl name."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from redis.crc import key_slot

from distcrawl.base.config import SETTINGS
from distcrawl.base.identifiers import BadName, crawl_name_problem, seed_list_problem
from distcrawl.cli import main
from distcrawl.commands.crawl import EXIT_SETTINGS
from distcrawl.frontier.keys import FrontierKeys

ROOT = Path(__file__).resolve().parents[2]

#: names as an operator might type them, and as a hostile or careless one might
names = st.text(
    alphabet=st.one_of(
        st.characters(codec="utf-8"),
        st.sampled_from("{}:\r\n\x00\x1b\x85\u2028\u2029\u200f\ufeff -_.ab"),
    ),
    max_size=24,
)


def one_line(text: str) -> bool:
    """Whether *text* stays one line wherever a log is read (Python's idea of line ends is the
    widest: it also splits on U+0085, U+2028, U+2029 and the ASCII separators)."""
    return len(f"x{text}x".splitlines()) == 1


def slot(key: str) -> int:
    return int(key_slot(key.encode("utf-8", "surrogatepass")))


@given(name=names)
def test_a_crawl_name_is_refused_in_one_line_or_spreads_its_shards_over_the_slots(
    name: str,
) -> None:
    problem = crawl_name_problem(name)
    if problem is not None:
        assert one_line(problem) and problem.isprintable(), problem
        with pytest.raises(BadName):
            FrontierKeys(name, f"{name}:start_urls", shards=16)
        return
    assert name and one_line(name)
    keys = FrontierKeys(name, f"{name}:start_urls", shards=16)
    shard_slots = {slot(shard.levels) for shard in keys.all_shards()}
    assert len(shard_slots) == 16  # no single-slot crawl: each shard a slot of its own
    assert slot(keys.nodes) == slot(keys.counters)  # the control slot is one slot
    assert keys.seeds.prefix  # its default seed list is a usable name too


@given(key=names)
def test_a_seed_list_name_is_refused_in_one_line_or_shares_its_slot(key: str) -> None:
    problem = seed_list_problem(key)
    if problem is not None:
        assert one_line(problem) and problem.isprintable(), problem
        return
    keys = FrontierKeys("c", key, shards=4)
    assert slot(keys.seeds.returned) == slot(key)  # its neighbours share its slot


@given(node_id=names)
def test_a_node_id_is_refused_in_one_line_or_is_one_line(node_id: str) -> None:
    problems = SETTINGS.problems({"DISTCRAWL_NODE_ID": node_id}, {})
    for line in problems:
        assert one_line(line), line
    assert bool(problems) != one_line(node_id) or not node_id.isprintable()


#: a command taking a crawl name, with what else it needs
COMMANDS = (
    ("status", "{}", "--sample", "0"),
    ("control", "{}", "pause"),
    ("deadletters", "{}", "count"),
    ("seed", "{}", "http://shop.test/"),
    ("migrate", "{}", "--dry-run"),
    ("web", "{}", "--port", "1"),
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    # a name that starts with '-' is an option to argparse (a usage error, exit 2 too)
    name=names.filter(lambda n: crawl_name_problem(n) is not None and not n.startswith("-")),
    command=st.sampled_from(COMMANDS),
)
def test_every_command_taking_a_crawl_name_refuses_a_bad_one_in_one_line(
    redis_url: str, name: str, command: tuple[str, ...]
) -> None:
    argv = [name if a == "{}" else a for a in command]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([*argv, "-s", f"REDIS_URL={redis_url}"])
    assert code == 2, (argv, out.getvalue(), err.getvalue())
    lines = [line for line in err.getvalue().splitlines() if line]
    assert len(lines) == 1 and lines[0].startswith("error: the crawl name"), lines
    assert "Traceback" not in err.getvalue()


@pytest.mark.parametrize("name", ["{tag}", "a}b", "", "a\r\n2026-01-01 [x] INFO: forged"])
def test_a_node_refuses_a_bad_crawl_name_in_one_line_and_exits_2(
    redis_url: str, name: str, tmp_path: Path
) -> None:
    env = {
        **os.environ,
        "REDIS_URL": redis_url,
        "SCRAPY_SETTINGS_MODULE": "distcrawl.settings",
        "PYTHONPATH": os.pathsep.join(
            filter(None, [str(ROOT / "tests"), os.environ.get("PYTHONPATH")])
        ),
        "PROBE_SPIDER_NAME": name or "probe-empty",
    }
    log = tmp_path / "node.log"
    argv = [
        sys.executable, "-m", "scrapy", "crawl", name,
        "-s", "SPIDER_MODULES=distcrawl.node.spiders,probe_spiders",
        "-s", f"LOG_FILE={log}",
    ]  # fmt: skip
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120, cwd=ROOT)
    text = log.read_text() if log.exists() else done.stderr
    assert done.returncode == EXIT_SETTINGS, text
    errors = [line for line in text.splitlines() if " ERROR: " in line]
    assert len(errors) == 1 and "Bad crawl name, the node does not start" in errors[0], text
    assert "Traceback" not in text and "forged" not in text.replace(errors[0], "")
    client = redis.Redis.from_url(redis_url)
    assert client.dbsize() == 0  # nothing of the crawl was written
    client.close()


def test_a_spider_class_with_a_bad_name_is_refused_though_the_command_line_is_fine(
    redis_url: str, tmp_path: Path
) -> None:
    # `scrapy crawl good -a name=a}b`: the spider's name, the crawl's, comes from -a
    env = {
        **os.environ,
        "REDIS_URL": redis_url,
        "SCRAPY_SETTINGS_MODULE": "distcrawl.settings",
    }
    log = tmp_path / "node.log"
    argv = [
        sys.executable, "-m", "scrapy", "crawl", "catalog",
        "-a", "name=a}b", "-s", f"LOG_FILE={log}",
    ]  # fmt: skip
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120, cwd=ROOT)
    text = log.read_text() if log.exists() else done.stderr
    assert done.returncode == EXIT_SETTINGS, text
    assert text.count("Bad crawl name, the node does not start") == 1, text
    assert "Traceback" not in text
