"""The context of an operator tool: with no Redis to work on it says where it looked and
starts nothing; it finds the embedded Redis of ``DISTCRAWL_HOME``; a crawl Redis does not hold
is a warning."""

from __future__ import annotations

import json

import pytest
import redis
from fixtures_cli import distcrawl_in

from distcrawl.frontier.store import FrontierKeys

KEYS = FrontierKeys(spider="catalog", start_urls="catalog:start_urls")


@pytest.mark.parametrize(
    "argv",
    [
        ("status", "catalog"),
        ("seed", "catalog", "https://shop.test/"),
        ("deadletters", "catalog", "count"),
        ("control", "catalog", "pause"),
    ],
)
def test_operator_commands_from_an_empty_directory_fail_with_the_home_they_looked_in(
    tmp_path, argv
) -> None:
    done = distcrawl_in(tmp_path, *argv)
    assert done.returncode == 1, done.stdout
    home = tmp_path / ".distcrawl"
    assert f"no embedded Redis runs under {home}" in done.stderr
    assert "REDIS_URL" in done.stderr and "Traceback" not in done.stderr
    assert not home.exists()  # nothing was started, not even a folder made


def test_operator_commands_use_the_running_embedded_redis_of_distcrawl_home(tmp_path) -> None:
    home = tmp_path / "home"
    try:
        from distcrawl.servers.embedded import ensure_redis

        url = ensure_redis(home)
        redis.Redis.from_url(url).lpush(KEYS.start_urls, "https://shop.test/")
        done = distcrawl_in(
            tmp_path, "status", "catalog", "--json", "--sample", "0", "--no-store",
            DISTCRAWL_HOME=str(home),
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["frontier"]["start_list"] == 1
        assert "warning" not in done.stderr
    finally:
        from distcrawl.servers.embedded import stop_services

        stop_services(home)


def test_a_spider_name_with_no_keys_is_a_warning(cli, r) -> None:
    code, _, err = cli("status", "nosuchspider", "--json", "--sample", "0", "--no-store")
    assert code == 0
    assert "warning:" in err and "no crawl 'nosuchspider'" in err
    r.lpush(KEYS.start_urls, "https://shop.test/")
    code, _, err = cli("status", "catalog", "--json", "--sample", "0", "--no-store")
    assert code == 0 and "warning" not in err
