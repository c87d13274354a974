"""``seed`` through the ``distcrawl`` entry point against a real Redis: accepted seeds pushed in
order, each refusal named, JSON seeds, usage errors."""

from __future__ import annotations

import json

from distcrawl.frontier.store import FrontierKeys

KEYS = FrontierKeys(spider="catalog", start_urls="catalog:start_urls")


def test_seed_pushes_accepted_seeds_in_order_and_names_each_refusal(cli, r) -> None:
    code, out, err = cli(
        "seed", "catalog", "https://shop.test/a", "ftp://x.test/", "not a url",
        "http://127.0.0.1:8000/", "https://shop.test/b",
    )  # fmt: skip
    assert code == 1
    assert "queued 2 seed(s) to catalog:start_urls; 3 refused" in out
    assert "refused 'ftp://x.test/': bad_scheme" in err
    assert "refused 'not a url'" in err
    assert "refused 'http://127.0.0.1:8000/': private_address" in err
    # nodes take seeds from the right-hand end: the first given is the first taken
    assert r.rpop(KEYS.start_urls) == b"https://shop.test/a"
    assert r.rpop(KEYS.start_urls) == b"https://shop.test/b"


def test_seed_priority_and_meta_make_json_seeds_and_private_hosts_follow_the_setting(
    cli, r, tmp_path
) -> None:
    seeds = tmp_path / "seeds.txt"
    seeds.write_text(
        '# campaign\nhttp://127.0.0.1:8000/\n\n{"url": "https://s.test/", "priority": 7}\n'
    )
    code, out, _ = cli(
        "seed", "catalog", "--file", str(seeds), "--priority", "5000", "--meta", '{"c": "x"}',
        "--json", allow="127.0.0.1",
    )  # fmt: skip
    assert code == 0, out
    assert json.loads(out)["queued"] == 2
    pushed = [json.loads(x) for x in reversed(r.lrange(KEYS.start_urls, 0, -1))]
    assert pushed == [
        {"url": "http://127.0.0.1:8000/", "priority": 5000, "meta": {"c": "x"}},
        {"url": "https://s.test/", "priority": 7, "meta": {"c": "x"}},  # its own priority wins
    ]


def test_seed_usage_errors_push_nothing(cli, r) -> None:
    assert cli("seed", "catalog", "https://s.test/", "--meta", "[1]")[0] == 2
    assert cli("seed", "catalog")[0] == 2
    assert cli("seed", "catalog", "https://s.test/", "--dry-run")[0] == 0
    assert r.llen(KEYS.start_urls) == 0
