"""The names an operator gives: a crawl (its spider's name), a node (``DISTCRAWL_NODE_ID``), a
seed list. Each becomes part of Redis keys and of log lines, so some are refused at start:

- a character that ends or forges a log line, or hides text (control and format characters,
  line and paragraph separators, lone surrogates), in any of them;
- an empty crawl name, and a brace in one: Redis Cluster hashes a key by the text between its
  first ``{`` and the next ``}``, so a brace in the crawl's name would put every shard of the
  crawl in one hash slot (one master carrying the whole crawl) or make keys no slot can hold;
- a ``}`` outside a hash tag in a seed list's name (its neighbours could share no slot with it).
"""

from __future__ import annotations

import unicodedata

__all__ = [
    "BadName",
    "check_crawl_name",
    "crawl_name_problem",
    "seed_list_problem",
    "shown",
    "unsafe_characters",
]

#: Unicode categories never allowed in a name: control, format, surrogate, line and paragraph
#: separators (what ends a log line, or hides or reorders what it shows)
_UNSAFE = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
#: characters of a name shown in a message, at most
_SHOWN = 80


class BadName(ValueError):
    """A crawl, node or seed list name that cannot be used; the message says why (one line)."""


def unsafe_characters(text: str) -> list[str]:
    """The characters of *text* a name must not hold, as ``U+000A`` (each once, in order)."""
    found: dict[str, None] = {}
    for char in text:
        if unicodedata.category(char) in _UNSAFE:
            found[f"U+{ord(char):04X}"] = None
    return list(found)


def shown(name: str) -> str:
    """*name* as a message shows it: quoted, ASCII only (escapes for the rest), one line."""
    text = ascii(name[:_SHOWN])
    return text if len(name) <= _SHOWN else text[:-1] + "..." + text[-1]


def _characters(what: str, name: str) -> str | None:
    bad = unsafe_characters(name)
    if not bad:
        return None
    listed = ", ".join(bad[:5]) + (", ..." if len(bad) > 5 else "")
    return (
        f"{what} {shown(name)} holds control or invisible characters ({listed}): they would "
        "forge or hide lines of the log"
    )


def crawl_name_problem(name: str) -> str | None:
    """Why *name* (a spider's name, the crawl's) cannot name a crawl, or None."""
    if not name:
        return "the crawl name is empty: give the spider a name"
    if "{" in name or "}" in name:
        return (
            f"the crawl name {shown(name)} holds a brace: Redis Cluster hashes a key by the text "
            "between braces, so every shard of the crawl would share one hash slot (one "
            "master would carry the whole crawl); name the spider without '{' and '}'"
        )
    return _characters("the crawl name", name)


def seed_list_problem(key: str) -> str | None:
    """Why *key* cannot name a seed list: a character :func:`unsafe_characters` lists, or a
    ``}`` outside its hash tag (a ``{...}`` with text inside)."""
    if not key:
        return "the seed list's name is empty"
    problem = _characters("the seed list", key)
    if problem:
        return problem
    opening = key.find("{")
    closing = key.find("}", opening + 1) if opening != -1 else -1
    if closing > opening + 1:
        return None
    if "}" in key:
        return (
            f"the seed list {shown(key)} has a '}}' outside a hash tag: its slot would be one no "
            "other key can share; name it without one"
        )
    return None


def check_crawl_name(name: str) -> str:
    """*name*, or :class:`BadName` saying why it cannot name a crawl."""
    problem = crawl_name_problem(name)
    if problem:
        raise BadName(problem)
    return name
