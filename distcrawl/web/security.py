"""Who may change the crawl from the dashboard: the token, CSRF, and where it may listen.

Reads are open to whoever reaches the port; every action is a POST that must carry
``Authorization: Bearer <DISTCRAWL_WEB_TOKEN>`` (compared in constant time) and the page's
CSRF value in ``X-CSRF-Token``, as JSON, from the dashboard's own origin. A browser cannot send
a custom header or a JSON body to another origin without a CORS preflight, which this server
never grants, so a page elsewhere cannot make a logged-in operator's browser act.
"""

from __future__ import annotations

import hmac
import ipaddress
import secrets
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from starlette.requests import Request

__all__ = ["Guard", "UnsafeBind", "check_bind", "is_loopback"]

#: the environment variable that holds the token
TOKEN_ENV = "DISTCRAWL_WEB_TOKEN"


class UnsafeBind(ValueError):
    """Listening beyond loopback without a token would let anyone on the network read it."""


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_bind(host: str, token: str | None) -> None:
    """Refuse to listen beyond loopback without a token (raises :class:`UnsafeBind`)."""
    if not is_loopback(host) and not token:
        raise UnsafeBind(
            f"refusing to serve the dashboard on {host!r} without a token: set "
            f"{TOKEN_ENV} (its actions need it) or bind 127.0.0.1 (the default)"
        )


@dataclass(frozen=True)
class Guard:
    """Checks an action request; :meth:`refusal` says why it is refused, or None."""

    token: str | None
    csrf: str = field(default_factory=lambda: secrets.token_urlsafe(32))

    @property
    def writable(self) -> bool:
        return bool(self.token)

    def refusal(self, request: Request) -> tuple[int, str] | None:
        if not self.token:
            return 403, f"read-only dashboard: start it with {TOKEN_ENV} set to allow actions"
        origin = request.headers.get("origin")
        if origin is not None and urlsplit(origin).netloc != request.headers.get("host"):
            return 403, "cross-origin request refused"
        if request.headers.get("sec-fetch-site") not in (None, "same-origin", "none"):
            return 403, "cross-site request refused"
        if not request.headers.get("content-type", "").startswith("application/json"):
            return 415, "actions take a JSON body (Content-Type: application/json)"
        csrf = request.headers.get("x-csrf-token", "")
        if not hmac.compare_digest(csrf.encode(), self.csrf.encode()):
            return 403, "missing or stale CSRF token: reload the dashboard"
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(
            given.strip().encode(), self.token.encode()
        ):
            return 401, "wrong or missing token"
        return None
