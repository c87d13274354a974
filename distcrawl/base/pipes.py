"""A command's output read by a pipe that closed early (``status --watch | head -3``): the
command ends quietly with status 0, as ``git log | head`` does, and is told apart from a
failed connection to a server, which is also a broken pipe."""

from __future__ import annotations

import contextlib
import os
import select
import sys
from typing import Any, TypeVar

_C = TypeVar("_C")
__all__ = ["end_quietly", "quiet_when_closed", "reader_gone"]


def reader_gone() -> bool:
    """Whether standard output is a pipe (or socket) whose reader has gone away."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, ValueError, OSError):  # replaced or closed stdout: not a pipe's
        return False
    poll = select.poll()
    poll.register(fd, select.POLLOUT)
    return any(events & select.POLLERR for _, events in poll.poll(0))


def end_quietly() -> int:
    """Send what is left of standard output nowhere (the interpreter flushes it on exit, into
    the closed pipe otherwise) and give the exit status of a reader that had enough: 0."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    return 0


def quiet_when_closed(console: _C) -> _C:
    """A rich ``Console`` that ends quietly with status 0 when its reader goes away (rich's own
    ends with status 1), as :func:`end_quietly` does."""
    target: Any = console

    def on_broken_pipe() -> None:
        target.quiet = True
        raise SystemExit(end_quietly())

    target.on_broken_pipe = on_broken_pipe
    return console
