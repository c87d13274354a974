"""Who may read and change the crawl from the dashboard: where it may listen, the names it
answers to, the token and CSRF.

The dashboard answers only requests whose ``Host`` names it: loopback names and the names
of ``DISTCRAWL_WEB_HOSTS``, and IP addresses when it listens beyond loopback. Any other name
gets 421 (400 without a ``Host``), so a web page the operator visits cannot read the crawl by
pointing a name of its own at the dashboard's address (DNS rebinding), and the page, which
carries the CSRF value, never reaches such a name.

Reads are open to whoever reaches the port under those names; every action is a POST that must
carry ``Authorization: Bearer <DISTCRAWL_WEB_TOKEN>`` (compared in constant time) and the page's
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

__all__ = ["MIN_TOKEN_LENGTH", "Guard", "HostCheck", "UnsafeBind", "check_bind", "is_loopback"]

#: the environment variable that holds the token
TOKEN_ENV = "DISTCRAWL_WEB_TOKEN"
#: the environment variable (and setting) listing the host names the dashboard answers to
#: beyond loopback, comma-separated
HOSTS_ENV = "DISTCRAWL_WEB_HOSTS"
#: the shortest token accepted: a short one is guessed by trying
MIN_TOKEN_LENGTH = 16


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
    """Refuse a token no request could match or anyone could guess (anywhere): a blank one,
    one with spaces around it (a newline or a space that came with it from a file or a shell:
    an ``Authorization`` header's value loses them), one with characters an HTTP header does
    not carry as typed (beyond printable ASCII), one shorter than :data:`MIN_TOKEN_LENGTH`;
    and listening beyond loopback without a token (raises :class:`UnsafeBind`). The token is
    never shown."""
    if token is not None and not token.strip():
        raise UnsafeBind(
            f"refusing a blank {TOKEN_ENV}: no request could ever match it; set a token of "
            f"at least {MIN_TOKEN_LENGTH} characters, or unset it for a read-only dashboard"
        )
    if token is not None and token != token.strip():
        raise UnsafeBind(
            f"refusing a {TOKEN_ENV} with spaces or a newline around it (came it from a file "
            "with a final newline?): a request's Authorization header cannot carry them, so "
            "none would match; set it without them"
        )
    if token is not None and not all(" " <= c <= "~" for c in token):
        raise UnsafeBind(
            f"refusing a {TOKEN_ENV} with characters beyond printable ASCII: an HTTP header "
            "does not carry them as typed, so no request would match; use letters, digits "
            "and punctuation"
        )
    if token is not None and len(token.strip()) < MIN_TOKEN_LENGTH:
        raise UnsafeBind(
            f"refusing a {TOKEN_ENV} of {len(token.strip())} characters: it takes at least "
            f"{MIN_TOKEN_LENGTH} (e.g. python -c 'import secrets; print(secrets.token_urlsafe())')"
        )
    if not is_loopback(host) and not token:
        raise UnsafeBind(
            f"refusing to serve the dashboard on {host!r} without a token: set "
            f"{TOKEN_ENV} (its actions need it) or bind 127.0.0.1 (the default)"
        )


def _host_name(header: str) -> str | None:
    """The name of a ``Host`` header (port and brackets off, lower case), None if malformed."""
    value = header.strip().lower()
    if value.startswith("["):
        name, sep, rest = value[1:].partition("]")
        if not sep or (rest and not (rest.startswith(":") and rest[1:].isdigit())):
            return None
        return name or None
    name, sep, port = value.partition(":")
    if sep and not port.isdigit():
        return None
    name = name.rstrip(".")
    return name or None


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def _loopback_name(name: str) -> bool:
    # *.localhost never leaves the machine (RFC 6761): no one else's DNS answers it
    return (
        name == "localhost" or name.endswith(".localhost") or (_is_ip(name) and is_loopback(name))
    )


@dataclass(frozen=True)
class HostCheck:
    """Which ``Host`` names the dashboard answers to, listening on ``bind``: loopback names
    (no one else's DNS answers them), the names in ``allowed`` (``DISTCRAWL_WEB_HOSTS``: a
    reverse proxy's, the machine's) and, beyond a loopback bind, IP addresses (a page of
    another site cannot be one)."""

    bind: str
    allowed: frozenset[str] = frozenset()

    @classmethod
    def of(cls, bind: str, allowed: str | list[str] | tuple[str, ...] | None) -> HostCheck:
        items = allowed.split(",") if isinstance(allowed, str) else list(allowed or ())
        names = {n for n in (_host_name(str(i)) for i in items if str(i).strip()) if n}
        return cls(bind=bind, allowed=frozenset(names))

    def refusal(self, header: str | None) -> tuple[int, str] | None:
        """None when the dashboard answers this ``Host``, else (status, why)."""
        if not header:
            return 400, "a request names its Host"
        name = _host_name(header)
        if name is None:
            return 400, "malformed Host header"
        if name in self.allowed or _loopback_name(name):
            return None
        if not is_loopback(self.bind) and _is_ip(name):
            return None
        return 421, f"this dashboard does not answer to {name!r} (see {HOSTS_ENV})"


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
