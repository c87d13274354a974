"""The vocabulary: every name defined once with its meaning, found by name or by family, and the
reasons of dead letters made one way."""

from __future__ import annotations

import pytest
from scrapy.exceptions import DownloadConnectionRefusedError
from twisted.internet.error import TimeoutError as TwistedTimeout

from distcrawl.base.names import GROUPS, find, vocabulary
from distcrawl.base.names import stats as stat_keys
from distcrawl.base.names.reasons import exception_reason, http_reason


def test_each_name_is_defined_once_in_its_group_with_a_meaning() -> None:
    terms = vocabulary()
    assert {t.group for t in terms} == set(GROUPS)
    for group in GROUPS:
        names = [t.name for t in vocabulary(group)]
        assert names and len(names) == len(set(names)), group
    assert all(t.meaning.strip() for t in terms)
    assert {t.kind for t in vocabulary("metric")} == {"gauge", "counter"}
    assert not any(t.labels for t in terms if t.group != "metric")
    assert {t.kind for t in terms if t.group != "metric"} == {"", "scrapy"}
    assert {t.group for t in terms if t.kind == "scrapy"} == {"stats key"}
    with pytest.raises(ValueError, match="no group"):
        vocabulary("stats keys")


def test_a_dead_letters_reason_is_an_http_status_or_an_exceptions_class_name() -> None:
    assert http_reason(503) == "http_503"
    refused = DownloadConnectionRefusedError("no")
    assert exception_reason(refused) == "DownloadConnectionRefusedError"
    assert exception_reason(TwistedTimeout) == "TimeoutError"
    assert exception_reason("twisted.internet.error.TimeoutError") == "TimeoutError"
    assert find("http_503", "dead letter reason").name == "http_<status>"  # type: ignore[union-attr]


def test_names_are_found_as_themselves_or_as_members_of_their_family() -> None:
    assert find("frontier/acked").name == "frontier/acked"  # type: ignore[union-attr]
    refused = find("frontier/seeds/refused/bad_scheme")
    assert refused is not None and refused.name == "frontier/seeds/refused/<reason>"
    # a name of its own wins over the family that would match it too
    assert find("catalog/pages/not_html").name == "catalog/pages/not_html"  # type: ignore[union-attr]
    assert find("frontier/no_such_counter", "stats key") is None
    # any name could be an exception's: across every group, the widest family matches
    assert find("frontier/no_such_counter").name == "<ExceptionName>"  # type: ignore[union-attr]
    assert find("frontier/refused/", "stats key") is None  # a family member names its part
    assert stat_keys.SEEDS_REFUSED("bad_scheme") == "frontier/seeds/refused/bad_scheme"
    assert stat_keys.SEEDS_REFUSED.part("frontier/seeds/refused/bad_scheme") == "bad_scheme"
    assert stat_keys.SEEDS_REFUSED.part("frontier/refused/bad_scheme") is None


def test_the_metrics_the_dashboard_exports_are_those_of_the_vocabulary() -> None:
    from distcrawl.web.metrics import METRICS

    assert {t.name: t.meaning for t in vocabulary("metric")} == METRICS


def test_the_commands_of_the_command_line_are_those_of_the_vocabulary() -> None:
    from distcrawl.cli import SUBCOMMANDS

    assert [(name, help) for name, (_, help) in SUBCOMMANDS.items()] == [
        (t.name, t.meaning) for t in vocabulary("command")
    ]
