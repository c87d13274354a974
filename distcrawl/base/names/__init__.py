"""distcrawl's vocabulary: every name an operator meets (reasons, stats keys, status words,
metric names, command words), defined once with its meaning.

Code takes each name from here; the docs render :func:`vocabulary`.
"""

from __future__ import annotations

from distcrawl.base.names import commands, metrics, observe, reasons, stats, status
from distcrawl.base.names.terms import Term, registered

__all__ = ["GROUPS", "Term", "find", "vocabulary"]

#: the groups of terms, in the order :func:`vocabulary` lists them
GROUPS = (
    reasons.DEAD_LETTER,
    reasons.REFUSAL,
    stats.STATS,
    status.CRAWL_STATE,
    status.NODE_STATE,
    status.ERROR_KIND,
    status.CUT_CAUSE,
    observe.ERROR_GROUP_KIND,
    observe.NOTICE,
    observe.BASELINE,
    status.HOLD_CAUSE,
    status.DELAY_SOURCE,
    metrics.METRIC,
    commands.COMMAND,
    commands.ACTION,
)


def vocabulary(group: str | None = None) -> list[Term]:
    """Every term (or those of one of :data:`GROUPS`): name, meaning, and for a metric its
    type and labels; a family's variable part is written ``<part>``."""
    if group is not None and group not in GROUPS:
        raise ValueError(f"no group {group!r}; the groups: {', '.join(GROUPS)}")
    order = {name: i for i, name in enumerate(GROUPS)}
    terms = sorted(registered(), key=lambda t: order[t.group])  # stable within a group
    return [t for t in terms if group is None or t.group == group]


def find(name: str, group: str | None = None) -> Term | None:
    """The term *name* is (itself, or a member of a family: ``frontier/refused/not_json`` is
    ``frontier/refused/<reason>``), in *group* or any; None for a name not in the vocabulary.
    A term of its own wins over a family, and a family with a longer fixed part over one with
    a shorter (``<ExceptionName>`` matches only what nothing else does)."""
    terms = vocabulary(group)
    for term in terms:
        if term.name == name:
            return term
    best: tuple[int, Term] | None = None
    for term in terms:
        head, _, rest = term.name.partition("<")
        if not rest or ">" not in rest:
            continue
        tail = rest.partition(">")[2]
        fixed = len(head) + len(tail)
        matches = name.startswith(head) and name.endswith(tail) and len(name) > fixed
        if matches and (best is None or fixed > best[0]):
            best = (fixed, term)
    return best[1] if best else None
