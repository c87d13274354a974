"""What the operator commands print alike: a warning for a crawl Redis does not hold, and a
Redis failure with the password masked."""

from __future__ import annotations

import sys
from typing import Any

from distcrawl.base.pipes import reader_gone
from distcrawl.base.urls import mask_url
from distcrawl.ops.context import Context, NoCrawl

__all__ = ["redis_error", "warn_if_no_crawl"]


def warn_if_no_crawl(ctx: Context, client: Any, *, lost_ok: bool = False) -> bool:
    """Warn on stderr when Redis holds none of the crawl's keys; True when it holds some.
    A crawl stored in another frontier format, or whose state a node found gone (unless
    ``lost_ok``), raises :class:`~distcrawl.ops.context.CrawlRefused` (the command ends with
    its reason)."""
    try:
        ctx.check_crawl(client, lost_ok=lost_ok)
    except NoCrawl as exc:
        print(f"warning: {exc}", file=sys.stderr)
        return False
    return True


def redis_error(url: str, exc: BaseException, doing: str = "") -> int:
    """Say on stderr that Redis at *url* failed, its password masked; the exit status, 1.
    A broken pipe that is standard output's (its reader went away) is no Redis failure: it
    goes on up, where the command ends quietly."""
    if isinstance(exc, BrokenPipeError) and reader_gone():
        raise exc
    print(f"error: {doing}{mask_url(url)}: {exc}", file=sys.stderr)
    return 1
