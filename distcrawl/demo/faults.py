"""The faults a demo shop injects: the set in force (:class:`Faults`), and the latency and
random error answers drawn for each request."""

from __future__ import annotations

import enum
import time
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from distcrawl.demo.responses import Response, error_response

if TYPE_CHECKING:
    import random
    import threading

    from distcrawl.demo.config import ShopConfig

__all__ = ["ROBOTS_FAULTS", "UNSET", "FaultInjection", "Faults", "Unset"]

#: how the shop's robots.txt may fail: not at all (""), answering 404 or 503, never answering
#: ("hang": the connection stays open until the shop stops), or closing the connection unanswered
ROBOTS_FAULTS = ("", "404", "503", "hang", "close")


class Unset(enum.Enum):
    UNSET = enum.auto()


UNSET = Unset.UNSET


@dataclass(frozen=True)
class Faults:
    """The faults in force; replaced as a whole so a request sees one consistent set."""

    error_rate: float
    error_status: int
    fail_products: int
    latency_ms: float
    latency_jitter_ms: float
    rate_limit_429: float
    retry_after: int | str | None
    products: int = field(repr=False)
    #: every page but robots.txt is never answered (the connection stays open until stop)
    hang: bool = False
    #: how robots.txt fails (one of ROBOTS_FAULTS)
    robots_fault: str = ""

    @classmethod
    def from_config(cls, config: ShopConfig) -> Faults:
        return cls(
            error_rate=config.error_rate,
            error_status=config.error_status,
            fail_products=config.fail_products,
            latency_ms=config.latency_ms,
            latency_jitter_ms=config.latency_jitter_ms,
            rate_limit_429=config.rate_limit_429,
            retry_after=config.retry_after,
            products=config.products,
            hang=config.hang,
            robots_fault=config.robots_fault,
        )

    def __post_init__(self) -> None:
        for name in ("error_rate", "rate_limit_429"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must be within 0..1, got {value}")
        if self.error_rate + self.rate_limit_429 > 1.0:
            raise ValueError("error_rate + rate_limit_429 must not exceed 1")
        if self.latency_ms < 0 or self.latency_jitter_ms < 0:
            raise ValueError("latency_ms and latency_jitter_ms must be >= 0")
        if not 0 <= self.fail_products <= self.products:
            raise ValueError(f"fail_products must be within 0..{self.products}")
        if not 400 <= self.error_status <= 599:
            raise ValueError(f"error_status must be a 4xx or 5xx status, got {self.error_status}")
        if isinstance(self.retry_after, int) and self.retry_after < 0:
            raise ValueError("retry_after must be >= 0, a text sent as is (an HTTP date), or None")
        if self.robots_fault not in ROBOTS_FAULTS:
            raise ValueError(
                f"robots_fault must be one of {ROBOTS_FAULTS}, got {self.robots_fault!r}"
            )

    def public(self) -> dict[str, Any]:
        data = asdict(self)
        del data["products"]
        return data


class FaultInjection:
    """Draws the faults in force for each request (a part of :class:`DemoShop`)."""

    _lock: threading.Lock
    _fault_rng: random.Random
    _jitter_rng: random.Random

    def _inject(self, faults: Faults) -> Response | None:
        """Sleep the configured latency, then maybe answer with a random fault (or never)."""
        if faults.hang:
            return Response(0, action="hang")
        if faults.latency_ms or faults.latency_jitter_ms:
            delay = faults.latency_ms
            if faults.latency_jitter_ms:
                with self._lock:
                    delay += self._jitter_rng.uniform(0.0, faults.latency_jitter_ms)
            time.sleep(delay / 1000.0)
        if not (faults.rate_limit_429 or faults.error_rate):
            return None
        with self._lock:
            draw = self._fault_rng.random()
        retry_after: tuple[tuple[str, str], ...] = ()
        if faults.retry_after is not None:
            retry_after = (("Retry-After", str(faults.retry_after)),)
        if draw < faults.rate_limit_429:
            return error_response(429, retry_after)
        if draw < faults.rate_limit_429 + faults.error_rate:
            return error_response(
                faults.error_status, retry_after if faults.error_status == 503 else ()
            )
        return None
