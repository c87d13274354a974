"""The records a node exchanges with the frontier script, and the batch format of ``sync``.

A ``sync`` call carries a small JSON header (counts and options, by name) and then flat
sections of fixed-width records in the header's order; :class:`ShardBatch` writes it and
``sync`` in ``frontier.lua`` reads it, so neither side counts argument positions by hand.
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from distcrawl.base.config import SETTINGS

__all__ = [
    "Child",
    "DeadLetter",
    "Feedback",
    "Lease",
    "Leased",
    "Revisit",
    "ShardBatch",
    "ShardReply",
    "SiteBudget",
    "SiteEvent",
    "new_rid_tag",
    "priority_of",
    "text",
]

_HEX = re.compile(rb"[0-9a-fA-F]+")

#: order scores are -priority * SCORE_SPAN + seq (see the script's header)
SCORE_SPAN = 1e10


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
    "" = none), payload (see ``codec.encode``)."""

    fp: bytes | str
    priority: int
    dont_filter: bool
    delay_ms: int
    site: str
    payload: str


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
    """How a site answered one node since its last flush: ok, throttled and slow answers."""

    site: str
    ok: int
    throttled: int
    slow: int


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


def fingerprint_args(fp: bytes | str, *, bloom: bool) -> tuple[Any, Any]:
    """The ``fp h`` fields of a child (see ``sync`` in the script); ``("", "")`` = unfiltered."""
    raw = fingerprint_bytes(fp)
    if not raw:
        return "", ""
    if bloom:
        return raw, ""
    member = int.from_bytes(raw[:8], "big", signed=True)
    return str(member), member & 0xFFFFFFFF


def payload_site(payload: str) -> str | None:
    """The site a compact payload's URL names, as the script's ``site_of_payload`` reads it."""
    if not payload.startswith('{"u":"'):
        return None
    end = payload.find('"', 6)
    if end < 0 or "\\" in payload[6:end]:
        return None
    url = payload[6:end]
    cut = url.find("://")
    if cut <= 0:
        return None
    netloc = url[cut + 3 :]
    for sep in "/?#":
        at = netloc.find(sep)
        if at >= 0:
            netloc = netloc[:at]
    netloc = netloc.rpartition("@")[2]
    if netloc.startswith("["):
        close = netloc.find("]")
        return netloc[1:close].lower() if close > 0 else None
    host, _, port = netloc.rpartition(":")
    if (host and port.isdigit()) or (host and not port):
        netloc = host
    return netloc.lower()


def split_value(value: bytes) -> tuple[str, bytes]:
    """The site and payload of a request's value (as the script's ``split_req`` reads it):
    "<site>\\n<payload>", or a payload whose URL names its site. A value of neither form (a
    hostile entry written by hand) is handed over whole, with no site, to be refused."""
    if value[:1] != b"{":
        site, cut, payload = value.partition(b"\n")
        if cut and payload[:1] == b"{":
            return raw_text(site), payload
        return "", value
    return payload_site(value.decode("utf-8", "replace")) or "", value


def priority_of(score: float) -> int:
    """The priority an order score was made from."""
    return -int(score // SCORE_SPAN)


@dataclass
class ShardBatch:
    """Everything one flush sends to one shard."""

    children: list[Child] = field(default_factory=list)
    acks: list[Lease] = field(default_factory=list)
    dead: list[DeadLetter] = field(default_factory=list)
    feedback: list[Feedback] = field(default_factory=list)
    revisits: list[Revisit] = field(default_factory=list)
    lease: int = 0
    #: then up to ``extra`` more, only of a priority higher than ``above`` (the worst this
    #: flush leases elsewhere)
    above: int | None = None
    extra: int = 0
    #: call the shard even with nothing to send or lease, to learn its queue
    read: bool = False

    def __bool__(self) -> bool:
        return bool(
            self.children
            or self.acks
            or self.dead
            or self.feedback
            or self.revisits
            or self.lease
            or self.read
        )

    def args(self, node: str, options: dict[str, Any], *, bloom: bool = False) -> list[Any]:
        header = {
            "c": len(self.children),
            "a": len(self.acks),
            "d": len(self.dead),
            "f": len(self.feedback),
            "lease": self.lease,
            **options,
        }
        if self.revisits:
            header["r"] = len(self.revisits)
        if self.above is not None and self.extra > 0:
            header["above"], header["extra"] = self.above, self.extra
        # what the script takes when a field is missing is left out (JSON it need not decode)
        header = {k: v for k, v in header.items() if HEADER_DEFAULTS.get(k, _NONE) != v}
        args: list[Any] = ["sync", node, json.dumps(header, separators=(",", ":"))]
        for c in self.children:
            fp, h = fingerprint_args(c.fp, bloom=bloom)
            # "=": the payload's URL names the site, so the script stores the payload alone
            site = "=" if c.site and payload_site(c.payload) == c.site else c.site
            spec = f"{'d' if c.dont_filter else ''}{c.priority}"
            if c.delay_ms or site != "=":
                spec += f" {c.delay_ms} {site}"
            args += [fp, h, spec, c.payload]
        # the acks' rids, then their sites: the script hands the rids on as one range
        args += [a.rid for a in self.acks]
        args += [a.site for a in self.acks]
        for d in self.dead:
            args += [d.id, d.record, d.site, d.lease.rid if d.lease else ""]
        for f in self.feedback:
            args += [f.site, f.ok, f.throttled, f.slow]
        for r in self.revisits:
            fp, h = fingerprint_args(r.fp, bloom=bloom)
            args += [r.lease.rid, r.lease.site, r.interval_ms, r.payload, fp, h]
        return args


#: the header fields ``sync`` reads with a default when they are missing, and that default
#: (frontier.lua: ``tonumber(h[...]) or ...``; idle and paused count only when 1)
HEADER_DEFAULTS: dict[str, Any] = {
    "c": 0,
    "a": 0,
    "d": 0,
    "f": 0,
    "lease": 0,
    "live": 1,
    "idle": 0,
    "paused": 0,
    "rate": 0,
    "conc": 0,
    "burst": 1,
    "adaptive": 8,
    "recover": 120_000,
}
_NONE = object()


@dataclass(frozen=True)
class ShardReply:
    """What ``sync`` answered for one shard."""

    shard: int
    added: int
    filtered: int
    parked: int
    acked: int
    stale_acks: int
    leased: list[Leased]
    next_due_ms: int
    queued: int
    head_priority: int | None
    at_head: int
    site_events: list[SiteEvent] = field(default_factory=list)
    #: [revisit] acks that scheduled their page's next visit
    revisited: int = 0

    @staticmethod
    def rewound(raw: Any) -> bytes | None:
        """What the shard holds as this node's mark when the call found its last mark gone
        (and did nothing), else None."""
        if isinstance(raw, list) and len(raw) == 2 and raw[0] in (b"rewound", "rewound"):
            found = raw[1]
            return found if isinstance(found, bytes) else str(found).encode()
        return None

    @classmethod
    def parse(cls, shard: int, raw: list[Any]) -> ShardReply:
        added, filtered, parked, acked, stale, out, next_due, paced, queued, head, at_head = raw[
            :11
        ]
        flat = [text(v) for v in raw[11]] if len(raw) > 11 else []
        events = [
            SiteEvent(flat[i], flat[i + 1], float(flat[i + 2]), float(flat[i + 3]), flat[i + 4])
            for i in range(0, len(flat) - 4, 5)
        ]
        paced_rids = {raw_text(p) for p in paced}
        leased = []
        for entry in out:
            # "<order score>\t<rid>\t<value>", the value as the shard's Q:req holds it
            entry = entry if isinstance(entry, bytes) else str(entry).encode()
            score_text, rid_raw, value = entry.split(b"\t", 2)
            rid = raw_text(rid_raw)
            score = float(score_text)
            site, payload = split_value(value)
            leased.append(
                Leased(
                    Lease(shard, rid, site),
                    payload,
                    priority_of(score),
                    rid in paced_rids,
                )
            )
        head_text = text(head)
        return cls(
            shard=shard,
            added=int(added),
            filtered=int(filtered),
            parked=int(parked),
            acked=int(acked),
            stale_acks=int(stale),
            leased=leased,
            next_due_ms=int(next_due),
            queued=int(queued),
            head_priority=priority_of(float(head_text)) if head_text else None,
            at_head=int(at_head),
            site_events=events,
            revisited=int(raw[12]) if len(raw) > 12 else 0,
        )
