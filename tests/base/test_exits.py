"""The exit statuses of ``scrapy crawl``: defined once, each number and name distinct, and the
crawl command's help (which the commands reference shows) lists every one."""

from __future__ import annotations

import pytest

from distcrawl.base.names import exits
from distcrawl.commands import crawl


def test_each_exit_status_has_a_number_and_a_name_of_its_own() -> None:
    codes = [s.code for s in exits.EXIT_STATUSES]
    names = [s.name for s in exits.EXIT_STATUSES]
    assert len(set(codes)) == len(codes) and len(set(names)) == len(names)
    assert all(2 <= code < 126 for code in codes)


def test_a_number_or_a_name_taken_is_refused() -> None:
    before = list(exits.EXIT_STATUSES)
    with pytest.raises(ValueError, match="EXIT_SETTINGS 2 already"):
        exits.exit_status(exits.SETTINGS, "EXIT_OTHER", "another meaning")
    with pytest.raises(ValueError, match="already"):
        exits.exit_status(99, "EXIT_SETTINGS", "the same name")
    with pytest.raises(ValueError, match="not between"):
        exits.exit_status(1, "EXIT_SCRAPY", "Scrapy's own")
    assert before == exits.EXIT_STATUSES


def test_the_crawl_command_exits_with_and_lists_the_registrys_statuses() -> None:
    for status in exits.EXIT_STATUSES:
        assert getattr(crawl, status.name) == status.code
        listed = " ".join((crawl.__doc__ or "").split())
        assert f"- {status.code} ({status.name}): {status.meaning}" in listed
