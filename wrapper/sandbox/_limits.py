"""Per-credential rate limits, enforced per second as real services enforce per-minute ones.

Each credential has a bucket per limit that holds one second of the per-minute budget and refills
continuously, so a minute's budget can never be spent in one burst. A request is admitted when every
bucket holds its cost; a cost above a bucket's capacity is admitted when that bucket is full and leaves
it in debt. Tokens are charged an estimate at admission and corrected once the answer is generated.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass

_WINDOW = 1.0  # seconds of the per-minute budget a bucket holds
_SLACK = 1e-9  # float rounding never turns an exact refill into another refusal


def checked_limit(name: str, value: float | None) -> float | None:
    """``value`` if it is None or a positive finite number, else ValueError naming ``name``."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < math.inf:
        raise ValueError(f"{name} must be a positive number, not {value!r}")
    return float(value)


@dataclass(frozen=True)
class Refusal:
    """Why a request was refused: the limit it hit (``"requests"`` or ``"tokens"``), that limit per minute,
    and the seconds until the request would be admitted."""

    limit: str
    per_minute: float
    wait: float


class _Bucket:
    """One credential's budget under one limit."""

    __slots__ = ("capacity", "level", "per_minute", "rate", "stamp")

    def __init__(self, per_minute: float, now: float) -> None:
        self.per_minute = per_minute
        self.rate = per_minute / 60.0
        self.capacity = self.rate * _WINDOW
        self.level, self.stamp = self.capacity, now

    def refill(self, now: float) -> None:
        self.level = min(self.capacity, self.level + (now - self.stamp) * self.rate)
        self.stamp = now

    def wait(self, cost: float) -> float:
        """Seconds until a request of ``cost`` fits (0: now)."""
        missing = min(cost, self.capacity) - self.level
        return missing / self.rate if missing > _SLACK else 0.0


class RateLimits:
    """Requests and tokens per minute (None: unlimited), one budget per credential key."""

    def __init__(
        self, rpm: float | None = None, tpm: float | None = None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.rpm, self.tpm = checked_limit("rpm", rpm), checked_limit("tpm", tpm)
        self._clock = clock
        self._buckets: dict[Hashable, dict[str, _Bucket]] = {}

    def admit(self, key: Hashable, tokens: float) -> Refusal | None:
        """Charge one request of ``tokens`` estimated tokens to ``key``, or say how long it must wait."""
        if self.rpm is None and self.tpm is None:
            return None
        now = self._clock()
        buckets = self._buckets.get(key)
        if buckets is None:
            limits = {"requests": self.rpm, "tokens": self.tpm}
            buckets = {name: _Bucket(limit, now) for name, limit in limits.items() if limit is not None}
            self._buckets[key] = buckets
        costs = {"requests": 1.0, "tokens": tokens}
        for bucket in buckets.values():
            bucket.refill(now)
        waits = {name: bucket.wait(costs[name]) for name, bucket in buckets.items()}
        limit = max(waits, key=waits.__getitem__)
        if waits[limit] > 0:
            return Refusal(limit, buckets[limit].per_minute, waits[limit])
        for name, bucket in buckets.items():
            bucket.level -= costs[name]
        return None

    def settle(self, key: Hashable, estimate: float, actual: float) -> None:
        """Correct ``key``'s token charge from the ``estimate`` made at admission to what was ``actual``."""
        bucket = self._buckets.get(key, {}).get("tokens")
        if bucket is not None:
            bucket.refill(self._clock())
            bucket.level = min(bucket.capacity, bucket.level + estimate - actual)
