"""The shape of a name in distcrawl's vocabulary, and the registry every name is defined in."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Family", "Term", "registered", "term"]

#: every term, in the order its module defines it
_TERMS: list[Term] = []


@dataclass(frozen=True)
class Term:
    """One name as operators meet it, and what it means.

    ``name`` is the exact string; a family of names (a reason, a page kind, an HTTP status as
    the variable part) writes its variable part as ``<part>``. ``kind`` and ``labels`` are set
    for metrics (``gauge`` or ``counter``, and the label names); a stats key Scrapy counts and
    distcrawl only reads has the kind ``scrapy``.
    """

    group: str
    name: str
    meaning: str
    kind: str = ""
    labels: tuple[str, ...] = ()


def term(
    group: str, name: str, meaning: str, *, kind: str = "", labels: tuple[str, ...] = ()
) -> str:
    """Define *name* in *group* with its *meaning*; returns *name*, to bind to a constant."""
    _TERMS.append(Term(group, name, meaning, kind, labels))
    return name


class Family:
    """Names made of a fixed ``prefix`` and a variable part (``frontier/refused/<reason>``).

    Calling it makes a member (``REFUSED("not_json")``); :meth:`part` reads the variable part
    of a member back (None for a name outside the family).
    """

    def __init__(self, group: str, prefix: str, part: str, meaning: str, *, kind: str = "") -> None:
        self.prefix = prefix
        self.name = term(group, f"{prefix}<{part}>", meaning, kind=kind)

    def __call__(self, part: str) -> str:
        return self.prefix + part

    def part(self, name: str) -> str | None:
        if name.startswith(self.prefix) and len(name) > len(self.prefix):
            return name[len(self.prefix) :]
        return None


def registered() -> list[Term]:
    return list(_TERMS)
