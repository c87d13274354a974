"""``deadletters`` through the ``distcrawl`` entry point against a real Redis: list, count,
re-queue and purge with filters, the refused entries; and every reason ``status`` shows of a
real crawl's dead letters accepted by ``--reason`` (slow)."""

from __future__ import annotations

import json
import socket
import time

import pytest
import redis
from crawl_nodes import Node, stats_of, stop_all
from frontier_state import queued
from scrapy import Request

from distcrawl.base.names import find
from distcrawl.frontier.store import FrontierKeys
from distcrawl.node.requests import codec

KEYS = FrontierKeys(spider="catalog", start_urls="catalog:start_urls")


def dead_letter(r: redis.Redis, dead_id: str, url: str, reason: str, priority: int = 100) -> None:
    record = {
        "request": codec.encode(Request(url, priority=priority, dont_filter=True), None),
        "url": url,
        "priority": priority,
        "reason": reason,
        "node": "n1",
        "at": time.time(),
        "attempts": 4,
        "first_attempt": time.time() - 10,
        "last_attempt": time.time(),
        "status": 503,
    }
    r.hset(KEYS.shard(0).dead, dead_id, json.dumps(record))


@pytest.fixture
def letters(r):
    dead_letter(r, "a1", "http://a.test/p/1", "http_503")
    dead_letter(r, "a2", "http://a.test/p/2", "twisted.internet.error.TimeoutError")
    dead_letter(r, "b1", "http://b.test/p/1", "http_503")
    return r


def test_deadletters_list_and_count(cli, letters) -> None:
    code, out, _ = cli("deadletters", "catalog", "count", "--json")
    assert json.loads(out) == {
        "total": 3,
        "by_reason": {"http_503": 2, "twisted.internet.error.TimeoutError": 1},
        "by_site": {"a.test": 2, "b.test": 1},
    }
    code, out, _ = cli("deadletters", "catalog", "list", "--site", "A.test", "--json")
    listed = json.loads(out)
    assert listed["total"] == 2
    assert {d["id"] for d in listed["dead_letters"]} == {"a1", "a2"}
    assert "request" not in listed["dead_letters"][0]
    code, out, _ = cli("deadletters", "catalog", "list")
    assert code == 0 and "http://b.test/p/1" in out and "3 of 3" in out


def test_deadletters_requeue_filtered_moves_them_back_to_the_queue(cli, letters) -> None:
    code, out, _ = cli(
        "deadletters", "catalog", "requeue", "--reason", "http_503", "--site", "a.test"
    )
    assert (code, out.strip()) == (0, "re-queued 1 of 1 matching dead letters")
    assert sorted(letters.hkeys(KEYS.shard(0).dead)) == [b"a2", b"b1"]
    [level] = letters.zrange(KEYS.shard(0).levels, 0, -1)
    assert level == b"100"  # its priority came back with it
    [entry] = letters.lrange(KEYS.shard(0).queue(100), 0, -1)
    assert codec.decode(entry.split(b"\t", 1)[1]).url == "http://a.test/p/1"
    assert (
        cli("deadletters", "catalog", "requeue")[1].strip()
        == "re-queued 2 of 2 matching dead letters"
    )
    assert letters.hlen(KEYS.shard(0).dead) == 0 and queued(letters, KEYS) == 3


def test_deadletters_purge_needs_confirmation(cli, letters) -> None:
    assert cli("deadletters", "catalog", "purge")[0] == 2
    code, out, _ = cli("deadletters", "catalog", "purge", "--reason", "http_503", "--yes-really")
    assert (code, out.strip()) == (0, "purged 2 of 2 matching dead letters")
    assert letters.hkeys(KEYS.shard(0).dead) == [b"a2"]


def test_deadletters_refused_lists_the_refused_entries_newest_first(cli, r) -> None:
    for n, reason in enumerate(("bad_scheme", "private_address")):
        entry = {"kind": "seed", "raw": f"seed-{n}", "reason": reason, "node": "n1", "at": n}
        r.lpush(KEYS.rejected, json.dumps(entry))
    code, out, _ = cli("deadletters", "catalog", "refused", "--json")
    assert code == 0
    listed = json.loads(out)
    assert listed["total"] == 2
    assert [e["reason"] for e in listed["refused"]] == ["private_address", "bad_scheme"]
    code, out, _ = cli("deadletters", "catalog", "refused", "--limit", "1")
    assert code == 0 and "private_address" in out and "bad_scheme" not in out
    assert "1 of 2 refused entries shown" in out


def _status_reasons(cli) -> dict[str, int]:
    code, out, err = cli("status", "catalog", "--json", "--sample", "0", "--no-store")
    assert code == 0, err
    return json.loads(out)["dead_letters"]["by_reason"]


def test_every_reason_status_shows_is_one_the_filters_accept(cli, r) -> None:
    dead_letter(r, "a", "http://a.test/1", "DownloadConnectionRefusedError")
    dead_letter(r, "b", "http://a.test/2", "http_503")
    r.hset(KEYS.shard(0).dead, "c", json.dumps({"url": "http://a.test/3"}))  # no reason
    r.hset(KEYS.shard(0).dead, "d", b"\xff not json")
    shown = _status_reasons(cli)
    assert shown == {
        "DownloadConnectionRefusedError": 1,
        "http_503": 1,
        "unknown": 1,
        "unreadable_record": 1,
    }
    for reason, n in shown.items():
        code, out, _ = cli("deadletters", "catalog", "count", "--reason", reason, "--json")
        assert code == 0 and json.loads(out)["by_reason"] == {reason: n}
        code, out, _ = cli("deadletters", "catalog", "purge", "--reason", reason, "--yes-really")
        assert (code, out.strip()) == (0, f"purged {n} of {n} matching dead letters")
    assert r.hlen(KEYS.shard(0).dead) == 0


def _closed_port() -> int:
    """A loopback port nothing listens on (bound, then closed)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


#: the stats keys distcrawl counts (and Scrapy's that it reads or names)
OUR_STATS = (
    "catalog/", "frontier/", "pipeline/", "safety/", "revisit", "freshness/", "retry/",
    "scheduler/", "dupefilter/", "robotstxt/shared", "gc/",
)  # fmt: skip
#: a node that gives up fast: one retry, a short backoff
# robots.txt off: the closed port's robots.txt would hold its site (RFC 9309) for
# DISTCRAWL_ROBOTS_HOLD_MAX; here the retries' own reasons are what status shows
GIVES_UP_FAST = {
    "RETRY_TIMES": 1,
    "RETRY_BACKOFF_BASE": 0.05,
    "RETRY_BACKOFF_MAX": 0.1,
    "ROBOTSTXT_OBEY": False,
}


@pytest.mark.slow
def test_a_real_crawls_dead_letters_are_requeued_and_purged_by_the_reasons_status_shows(
    cli, r, redis_url, mongo_uri, shop_factory, tmp_path
) -> None:
    # three products always answer 500; one seed is a port nothing listens on
    shop = shop_factory(products=30, fail_products=3)
    refused = f"http://127.0.0.1:{_closed_port()}/"
    r.lpush(KEYS.start_urls, shop.url, refused)

    def crawl(node_id: str) -> dict[str, int]:
        node = Node(
            redis_url=redis_url,
            mongo_uri=mongo_uri,
            log_dir=tmp_path,
            node_id=node_id,
            settings=GIVES_UP_FAST,
        )
        try:
            assert node.wait() == 0, node.log()[-3000:]
        finally:
            stop_all([node])
        # every stats key of distcrawl's a node counted is a name of the vocabulary
        ours = [k for k in stats_of(node.log()) if k.startswith(OUR_STATS)]
        assert ours and [k for k in ours if find(k, "stats key") is None] == []
        return _status_reasons(cli)

    shown = crawl("d1")
    # the names status shows: an HTTP status, and an exception by its class name
    assert shown == {"http_500": 3, "DownloadConnectionRefusedError": 1}, shown
    code, out, _ = cli("deadletters", "catalog", "count", "--json")
    assert code == 0 and json.loads(out)["by_reason"] == shown
    for reason, n in shown.items():
        code, out, _ = cli("deadletters", "catalog", "requeue", "--reason", reason)
        assert (code, out.strip()) == (0, f"re-queued {n} of {n} matching dead letters")
    assert _status_reasons(cli) == {}

    # crawled again, they fail again, with the same reasons; now purge them by those names
    again = crawl("d2")
    assert again == shown, again
    for reason, n in again.items():
        code, out, _ = cli("deadletters", "catalog", "purge", "--reason", reason, "--yes-really")
        assert (code, out.strip()) == (0, f"purged {n} of {n} matching dead letters")
    code, out, _ = cli("status", "catalog", "--json", "--sample", "0", "--no-store")
    assert json.loads(out)["dead_letters"]["total"] == 0


def test_lists_fit_80_columns_with_urls_cut_in_the_middle(cli, r, monkeypatch) -> None:
    long_url = "http://shop-with-a-long-name.test/category/sub/" + "x" * 80 + "/p/123456"
    dead_letter(r, "d" * 40, long_url, "twisted.internet.error.ConnectionRefusedError")
    refusal = {"kind": "seed", "raw": "y" * 300, "reason": "not_a_url", "at": time.time()}
    r.lpush(KEYS.rejected, json.dumps({**refusal, "node": "node-with-a-long-name-1"}))
    monkeypatch.setenv("COLUMNS", "80")
    for action in ("list", "refused", "count"):
        code, out, _ = cli("deadletters", "catalog", action)
        assert code == 0
        lines = out.splitlines()
        assert max(len(line) for line in lines) <= 80, out
    code, out, _ = cli("deadletters", "catalog", "list")
    row = next(line for line in out.splitlines() if "…" in line and "http://" in line)
    assert "http://shop-with" in row and row.rstrip().endswith("/p/123456")
    code, out, _ = cli("deadletters", "catalog", "list", "--json")
    assert json.loads(out)["dead_letters"][0]["url"] == long_url  # whole in --json
