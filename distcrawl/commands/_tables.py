"""Tables that fit the screen: columns a narrow screen can spare are left out, one column
gives way (a URL cut in the middle, a reason cut at its end), every other cell is kept whole.
``--json`` prints the full values."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rich.console import Console, JustifyMethod
from rich.table import Table
from rich.text import Text

from distcrawl.base.pipes import quiet_when_closed
from distcrawl.base.urls import shorten_middle

__all__ = ["Column", "console", "fit_table"]

#: the width of a table printed into a pipe or a file when ``COLUMNS`` is not set
PIPE_WIDTH = 200


@dataclass(frozen=True)
class Column:
    """One column of a :func:`fit_table`."""

    name: str
    justify: JustifyMethod = "left"
    #: the order in which a narrow screen leaves it out (1 first; 0: never)
    drop: int = 0
    #: how its cells give way when the table is too wide: "middle" (URLs), "end", or None
    shrink: str | None = None
    #: the fewest characters it keeps when it gives way (its header's at least)
    least: int = 12
    #: of several columns that give way, the lower gives way first
    give: int = 0
    #: at most this many characters (0: no cap), whatever the screen's width
    cap: int = 0
    style: str | None = None


def console() -> Console:
    """The terminal's console; into a pipe or a file, ``COLUMNS`` wide if set, else wide
    enough that nothing is cut (tables take only the width they need)."""
    found = Console()
    if found.is_terminal:
        return quiet_when_closed(found)
    return quiet_when_closed(Console(width=int(os.environ.get("COLUMNS") or 0) or PIPE_WIDTH))


def _cut(text: str, width: int, how: str | None) -> str:
    if len(text) <= width:
        return text
    if how == "middle":
        return shorten_middle(text, width)
    return text[: max(0, width - 1)] + "…"


def _plain(cell: Any) -> str:
    return cell.plain if isinstance(cell, Text) else str(cell)


def fit_table(
    columns: Sequence[Column],
    rows: Sequence[Sequence[Any]],
    width: int,
    *,
    title: str | None = None,
    styles: Sequence[str | None] | None = None,
) -> Table:
    """A table of *rows* (cells as text, or rich ``Text``) at most *width* characters wide:
    columns are left out in their ``drop`` order until the rest fit with every shrinking
    column at its natural width or at least a few characters, then the shrinking columns are
    cut to what is left. *styles*: one row style per row."""
    caps = [c.cap or 10**9 for c in columns]
    texts = [[_cut(_plain(cell), cap, c.shrink or "end") for cell, c, cap in
              zip(row, columns, caps, strict=True)] for row in rows]  # fmt: skip
    natural = [max([len(c.name), *(len(row[i]) for row in texts)]) for i, c in enumerate(columns)]
    shown = list(range(len(columns)))

    least = [max(c.least, len(c.name)) if c.shrink else natural[i] for i, c in enumerate(columns)]

    def need(indexes: list[int], floor: bool) -> int:
        widths = [min(natural[i], least[i]) if floor else natural[i] for i in indexes]
        return sum(widths) + 2 * (len(indexes) - 1)

    for i in sorted((i for i, c in enumerate(columns) if c.drop), key=lambda i: columns[i].drop):
        if need(shown, floor=True) <= width:
            break
        shown.remove(i)
    widths = {i: natural[i] for i in shown}
    over = need(shown, floor=False) - width
    shrinking = [i for i in shown if columns[i].shrink]
    # down to their least widths, then (a screen narrower than that) further
    for floors in (least, [4] * len(columns)):
        for i in sorted(shrinking, key=lambda i: columns[i].give):
            give = min(over, max(0, widths[i] - floors[i]))
            widths[i] -= give
            over -= give
    table = Table(title=title, title_justify="left", box=None, header_style="bold", pad_edge=False)
    for i in shown:
        c = columns[i]
        table.add_column(c.name, justify=c.justify, no_wrap=True, style=c.style)
    for n, (row, text) in enumerate(zip(rows, texts, strict=True)):
        cells: list[Any] = []
        for i in shown:
            value = _cut(text[i], widths[i], columns[i].shrink or "end")
            original = row[i]
            cells.append(Text(value, style=original.style) if isinstance(original, Text) else value)
        table.add_row(*cells, style=styles[n] if styles else None)
    return table
