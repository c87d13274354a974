"""Checks of a payload's hostile parts: header names and values, cookies, encodings, a pickle
in disguise, JSON's non-standard constants."""

from __future__ import annotations

import functools
import re
from typing import Any

__all__ = [
    "HEADER_VALUE_FORBIDDEN",
    "ascii_compatible",
    "looks_like_pickle",
    "not_json_constant",
    "valid_cookies",
    "valid_headers",
]

# RFC 9110 token characters: a header name with anything else (CR, LF, ':') could smuggle a
# second header or request into what the node sends
_HEADER_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]{1,256}")
HEADER_VALUE_FORBIDDEN = re.compile(r"[\r\n\x00]")
_COOKIE_SCALARS = (str, int, float, bool)
# the first byte of a protocol 0/1 pickle (protocol 2+ starts with \x80); no JSON text starts
# with one of these and also ends with "." (the STOP opcode every pickle ends with)
_PICKLE_OPENERS = b"(cI]}SVLFNGJKMTU"


@functools.lru_cache(maxsize=64)
def ascii_compatible(encoding: str) -> bool:
    """Whether URLs keep their ASCII bytes in ``encoding``. Scrapy percent-encodes a URL's
    query in the request's encoding: in UTF-16 or UTF-32 even an empty query gains a byte
    order mark, and the URL changes again each time it is rebuilt (found by the fuzzer)."""
    try:
        return "/?a=b&c".encode(encoding) == b"/?a=b&c"
    except (LookupError, UnicodeError):
        return False


def valid_cookies(cookies: Any) -> bool:
    if isinstance(cookies, dict):
        return all(
            isinstance(k, str) and isinstance(v, _COOKIE_SCALARS) for k, v in cookies.items()
        )
    if isinstance(cookies, list):
        return all(
            isinstance(c, dict)
            and isinstance(c.get("name"), _COOKIE_SCALARS)
            and isinstance(c.get("value"), _COOKIE_SCALARS)
            and all(isinstance(k, str) and isinstance(v, _COOKIE_SCALARS) for k, v in c.items())
            for c in cookies
        )
    return False


def valid_headers(headers: Any) -> bool:
    return isinstance(headers, dict) and all(
        isinstance(k, str)
        and _HEADER_NAME.fullmatch(k) is not None
        and isinstance(v, list)
        and all(isinstance(x, str) and not HEADER_VALUE_FORBIDDEN.search(x) for x in v)
        for k, v in headers.items()
    )


def looks_like_pickle(payload: bytes) -> bool:
    if payload[:1] == b"\x80":
        return True
    stripped = payload.strip()
    return stripped[-1:] == b"." and stripped[:1] in _PICKLE_OPENERS


def not_json_constant(name: str) -> Any:
    """``NaN`` and ``Infinity`` are Python's, not JSON's: no node writes them, and a request
    holding one could not be queued again."""
    raise ValueError(f"{name} is not JSON")
