"""The records a node exchanges with the frontier: what a flush carries (children, acks, dead
letters, feedback, revisits) and what it gets back (leases, site events)."""

from __future__ import annotations

import hashlib
import re
import secrets
from dataclasses import dataclass
from typing import Any, NamedTuple

from distcrawl.base.config import SETTINGS

__all__ = [
    "Child",
    "DeadLetter",
    "Feedback",
    "Lease",
    "Leased",
    "Revisit",
    "SiteBudget",
    "SiteEvent",
    "bucket_hash",
    "fingerprint_args",
    "fingerprint_bytes",
    "new_rid_tag",
    "raw_text",
    "text",
]

_HEX = re.compile(rb"[0-9a-fA-F]+")


def new_rid_tag() -> str:
    """A fresh tag for the request ids a node's pushes make (``<seq>.<tag>``): 24 random bits
    in 4 URL-safe base64 characters (no ``.`` or ``:``, which the script splits on). It is
    stored twice per queued request, in the queue and the payload hash, so it is kept short."""
    return secrets.token_urlsafe(3)


#: seconds a cut of a site's rate takes to wear off completely (``DISTCRAWL_SITE_RECOVERY``)
DEFAULT_SITE_RECOVERY: float = SETTINGS.default("DISTCRAWL_SITE_RECOVERY")


class Child(NamedTuple):
    """A request for the frontier: fingerprint (binary, b"" = unfiltered), priority,
    dont_filter, delay in ms (0 = queue now, > 0 = park as a delayed retry), site (host,
    "" = none), payload (see ``codec.encode``); ``own``: the node already works on it, and it
    is written as the node's lease instead of queued (``sync`` answers its lease)."""

    fp: bytes | str
    priority: int
    dont_filter: bool
    delay_ms: int
    site: str
    payload: str
    own: bool = False


class Lease(NamedTuple):
    """A request leased to a node: what its ack names."""

    shard: int
    rid: str
    site: str


class Leased(NamedTuple):
    """A lease as ``sync`` hands it out: the lease, the payload, its priority, and whether its
    site's rate token was spent for it (the node sends those first)."""

    lease: Lease
    payload: bytes
    priority: int
    paced: bool


class DeadLetter(NamedTuple):
    """A request given up on: its id (the fingerprint, hex), JSON record, site, and the lease
    it ends (None: written as is; else only while the node still holds that lease)."""

    id: str
    record: str
    site: str = ""
    lease: Lease | None = None


class Revisit(NamedTuple):
    """[revisit] The ack of a page to fetch again in ``interval_ms``: the lease it ends, the
    payload its revisit carries (the validators of its last answer), and its fingerprint (as
    a child's; recorded again so the dupefilter that forgets keeps it while it is revisited)."""

    lease: Lease
    interval_ms: int
    payload: str
    fp: bytes | str


class Feedback(NamedTuple):
    """How a site answered one node since its last flush: ok, throttled and slow answers;
    ``newest``: ms from the sending of the newest throttled or slow one to the flush (answers
    to requests sent before the site's last cut are that cut's incident); ``hold``: ms the
    site asked every node to wait (Retry-After, capped), 0 for none."""

    site: str
    ok: int
    throttled: int
    slow: int
    newest: int = 0
    hold: int = 0


@dataclass(frozen=True)
class SiteBudget:
    """The cluster-wide per-site budget defaults (0 = no limit); see ``admit`` in the script."""

    rate: float = SETTINGS.default("DISTCRAWL_SITE_RATE")
    concurrency: int = SETTINGS.default("DISTCRAWL_SITE_CONCURRENCY")
    burst: float = SETTINGS.default("DISTCRAWL_SITE_BURST")
    adaptive_rate: float = SETTINGS.default("DISTCRAWL_ADAPTIVE_RATE")
    #: seconds an adaptive cut takes to wear off from factor 0 to 1 (linearly, idle or not)
    recovery: float = DEFAULT_SITE_RECOVERY

    @classmethod
    def from_settings(cls, settings: Any) -> SiteBudget:
        """``DISTCRAWL_SITE_RATE``, ``DISTCRAWL_SITE_CONCURRENCY``, ``DISTCRAWL_SITE_BURST``,
        ``DISTCRAWL_ADAPTIVE_RATE``, ``DISTCRAWL_SITE_RECOVERY``."""
        return cls(
            rate=SETTINGS.value(settings, "DISTCRAWL_SITE_RATE"),
            concurrency=SETTINGS.value(settings, "DISTCRAWL_SITE_CONCURRENCY"),
            burst=SETTINGS.value(settings, "DISTCRAWL_SITE_BURST"),
            adaptive_rate=SETTINGS.value(settings, "DISTCRAWL_ADAPTIVE_RATE"),
            recovery=SETTINGS.value(settings, "DISTCRAWL_SITE_RECOVERY"),
        )


class SiteEvent(NamedTuple):
    """An adaptive cut of a site's shared rate (``cut``: detail ``throttled`` or ``slow``), or
    a cut worn off (``recovered``: detail the ms since the cut)."""

    site: str
    kind: str
    before: float
    after: float
    detail: str


def raw_text(value: Any) -> Any:
    """A rid or site from Redis as text, or as the bytes themselves when they are not UTF-8
    (a hostile entry's rid must still name it exactly when it is acked)."""
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return value
    return str(value)


def text(value: Any) -> str:
    return value.decode("utf-8", "surrogateescape") if isinstance(value, bytes) else str(value)


def fingerprint_bytes(fp: bytes | str) -> bytes:
    """A fingerprint as a digest of 16 bytes or more: a digest as given (binary or hex); any
    other value (a test's URL, say) is hashed first. b"" stays b"" (unfiltered)."""
    if isinstance(fp, bytes) and len(fp) in (32, 40, 64) and _HEX.fullmatch(fp):
        fp = fp.decode("ascii")  # hex as Redis hands it back (a scrapy-redis dupefilter)
    if isinstance(fp, str):
        if len(fp) >= 32:
            try:
                return bytes.fromhex(fp)
            except ValueError:
                pass
        fp = fp.encode("utf-8", "surrogateescape")
    if not fp or len(fp) in (16, 20, 32):  # a digest (Scrapy's fingerprints are SHA-1)
        return fp
    return hashlib.sha1(fp).digest()


#: each byte value with its 8 bits in reverse order (a table for bytes.translate)
_REVERSED_BITS = bytes(int(f"{b:08b}"[::-1], 2) for b in range(256))


def bucket_hash(member: int) -> int:
    """The bits of a fingerprint (its first 8 bytes as a signed integer) that choose its
    bucket in the exact dupefilter: the top 32 of its 64 bits in reverse order, so that a
    bucket holds one range of values (see the script's dupefilter)."""
    return _reversed_top((member & 0xFFFFFFFFFFFFFFFF).to_bytes(8, "big"))


def _reversed_top(raw: bytes) -> int:
    """The first 32 bits of ``raw`` in reverse order: each byte's bits reversed, the bytes
    read in reverse order."""
    return int.from_bytes(raw[:4].translate(_REVERSED_BITS), "little")


def fingerprint_args(
    fp: bytes | str, *, bloom: bool, buckets: tuple[int, int] | None = None
) -> tuple[Any, Any]:
    """The ``fp h`` fields of a child (see ``sync`` in the script); ``("", "")`` = unfiltered.
    With ``buckets``, the state (L, split) of the shard's exact dupefilter, h is the bucket
    the fingerprint falls in (its bucket_hash modulo 2^L, or 2^(L+1) for a bucket split)."""
    raw = fingerprint_bytes(fp)
    if not raw:
        return "", ""
    if bloom:
        return raw, ""
    member = int.from_bytes(raw[:8], "big", signed=True)
    h = _reversed_top(raw)  # bucket_hash(member): its first 4 bytes are member's top 32 bits
    if buckets is None:
        return str(member), h
    level, split = buckets
    bucket = h % (1 << level)
    if bucket < split:
        bucket = h % (2 << level)
    return str(member), bucket
