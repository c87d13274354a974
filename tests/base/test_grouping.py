"""Failures grouped by site, kind and message template: messages that differ only in numbers,
ids, URLs and quoted values fall in one group (a search over generated messages); another
exception class, another place it was raised, another kind or another site never does."""

from __future__ import annotations

import string

from hypothesis import given, settings
from hypothesis import strategies as st

from distcrawl.base.grouping import MAX_TEMPLATE, Failure, exception_template, group_id, template


def test_what_varies_is_replaced_by_placeholders() -> None:
    assert template("Timeout after 3012 ms on https://shop.example/p/1?x=2") == (
        "Timeout after <n> ms on <url>"
    )
    assert template("DNS lookup failed: no results for 'shop-7.example'") == (
        "DNS lookup failed: no results for <value>"
    )
    assert template("order 3f2a9c1e0b7d4e65 by jo@shop.example") == "order <id> by <email>"
    assert template("id 123e4567-e89b-12d3-a456-426614174000 at 0xdeadbeef") == "id <id> at <id>"
    assert template("  spread \n over   lines ") == "spread over lines"
    assert template("") == "(no message)"
    assert len(template("word " * 500)) == MAX_TEMPLATE


def _raise(exc: BaseException) -> BaseException:
    try:
        raise exc
    except BaseException as caught:
        return caught


def _raise_elsewhere(exc: BaseException) -> BaseException:
    try:
        raise exc
    except BaseException as caught:
        return caught


def test_an_exception_is_its_class_its_message_template_and_where_it_was_raised() -> None:
    first = exception_template(_raise(ValueError("bad price '12,99' on item 4")))
    again = exception_template(_raise(ValueError("bad price '3.50' on item 77")))
    assert first == again
    assert first.startswith("ValueError: bad price <value> on item <n> at test_grouping.py:")
    assert first.endswith(" in _raise")
    elsewhere = exception_template(_raise_elsewhere(ValueError("bad price '1' on item 1")))
    assert elsewhere != first  # another place in the code: another group
    assert exception_template(ValueError("x"), where=False) == "ValueError: x"


# -- the search ----------------------------------------------------------------------------------

_WORD = st.text(string.ascii_letters + ":;,!()/-", min_size=1, max_size=12)
_NUMBER = st.integers(min_value=0, max_value=10**12).map(str) | st.floats(
    min_value=0, max_value=1e6, allow_nan=False
).map(lambda f: f"{f:.2f}")
_HEX = st.text("0123456789abcdef", min_size=8, max_size=32).filter(
    lambda t: any(c.isdigit() for c in t) and any(c.isalpha() for c in t)
)
_UUID = st.uuids().map(str)
_URL = st.builds(
    lambda host, path, q: f"https://{host}.example/{path}?q={q}",
    st.text(string.ascii_lowercase, min_size=1, max_size=10),
    st.text(string.ascii_lowercase + string.digits + "/-._", max_size=30),
    st.integers(0, 10**6),
)
_QUOTED = st.text(string.ascii_letters + string.digits + " .-/", max_size=30).map(
    lambda t: f"'{t}'"
)
#: what may vary between two occurrences of one failure
_VARIABLE = {"number": _NUMBER, "id": _HEX | _UUID, "url": _URL, "quoted": _QUOTED}
_SLOT = st.sampled_from(sorted(_VARIABLE))


@st.composite
def _messages(draw: st.DrawFn) -> tuple[str, str]:
    """Two messages of one skeleton: the same words, each variable slot filled twice."""
    part = st.one_of(_WORD.map(lambda w: ("word", w)), _SLOT.map(lambda s: ("slot", s)))
    parts = draw(st.lists(part, min_size=1, max_size=8))
    one, two = [], []
    for kind, value in parts:
        if kind == "word":
            one.append(value)
            two.append(value)
        else:
            one.append(draw(_VARIABLE[value]))
            two.append(draw(_VARIABLE[value]))
    # variable parts are delimited from the words around them, as in real messages
    return " ".join(one), " ".join(two)


@settings(max_examples=300, deadline=None)
@given(_messages(), st.sampled_from(["http", "download", "callback"]), _WORD)
def test_messages_that_differ_only_in_numbers_ids_urls_and_quotes_are_one_group(
    pair: tuple[str, str], kind: str, site: str
) -> None:
    one, two = pair
    assert template(one) == template(two), (one, two)
    assert Failure(site, kind, template(one)).group == Failure(site, kind, template(two)).group


_CLASSES = st.sampled_from([ValueError, KeyError, TypeError, RuntimeError, LookupError])


@settings(max_examples=200, deadline=None)
@given(_messages(), _CLASSES, _CLASSES, _WORD, _WORD)
def test_other_exception_classes_kinds_or_sites_are_never_one_group(
    pair: tuple[str, str], first: type[Exception], second: type[Exception], site: str, other: str
) -> None:
    one, two = pair
    a = exception_template(first(one), where=False)
    b = exception_template(second(two), where=False)
    if first is not second:
        assert group_id(site, "callback", a) != group_id(site, "callback", b)
    assert group_id(site, "callback", a) != group_id(site, "pipeline", a)
    if site != other:
        assert group_id(site, "callback", a) != group_id(other, "callback", a)
