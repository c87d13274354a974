"""Exponential backoff with jitter (the waits of retries, and of a robots.txt fetched again),
and the wait a Retry-After header asks for."""

from __future__ import annotations

import random
import time
from email.utils import parsedate_to_datetime

__all__ = ["backoff_delay", "parse_retry_after"]


def backoff_delay(attempt: int, *, base: float, cap: float, jitter: float) -> float:
    """Seconds to wait before retry number ``attempt`` (1 = first retry); never below the
    un-jittered minimum ``min(cap, base * 2**(attempt-1))``."""
    minimum = min(cap, base * 2.0 ** max(0, attempt - 1))
    return float(minimum) * (1.0 + random.random() * max(0.0, jitter))


def parse_retry_after(value: bytes | str | None, *, now: float | None = None) -> float | None:
    """Seconds from a Retry-After header (delta-seconds or HTTP-date), or None if unusable."""
    if not value:
        return None
    text = value.decode("latin-1") if isinstance(value, bytes) else value
    text = text.strip()
    if text.isdigit():
        return float(text)
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))
