"""A batch's figures: ``BatchStats`` snapshots, counted while it runs in constant memory."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs

if TYPE_CHECKING:
    from wrapper import Completion

__all__ = ["BatchStats", "Tally"]

_SMALLEST = 1e-4  # latencies are kept in log-spaced buckets from 0.1 ms, each 5% wider than the last
_GROWTH = 1.05


def _bucket(seconds: float) -> int:
    return max(0, math.floor(math.log(max(seconds, _SMALLEST) / _SMALLEST, _GROWTH)))


@attrs.frozen
class BatchStats:
    """What a batch has done so far: ``.stats`` on what ``complete_many`` returns.

    ``requests`` counts HTTP attempts (first tries and retries), ``rate_limited`` the 429s among
    their answers; ``completed`` and ``failed`` count prompts, ``failures`` the failed ones by error
    type (``{"InternalServerError": 2}``). With a response cache, ``cache_hits`` counts the prompts it
    answered (no request sent) and ``cache_misses`` those it did not. Token counts add up what the
    server's responses reported (a cache hit's are not counted: nothing was spent). Latency is from
    sending an attempt to its answer, within 2.5%.

    A router's batch (``wrapper.router``) and a fan-out also have ``routes``: each route's (or
    target's) own figures by its name, for the attempts it was sent (``failed`` and ``failures``: its
    attempts that failed, whether the prompt was then served by another route or not; ``retries``:
    its attempts that were not a prompt's first).
    """

    requests: int = 0
    completed: int = 0
    failed: int = 0
    failures: Mapping[str, int] = attrs.field(factory=dict, hash=False)
    retries: int = 0
    rate_limited: int = 0
    cache_hits: int = 0
    cache_misses: int = 0
    elapsed: float = 0.0
    prompt_tokens: int = 0
    response_tokens: int = 0
    _latencies: tuple[tuple[int, int], ...] = attrs.field(default=(), repr=False, alias="latencies")
    routes: Mapping[str, BatchStats] = attrs.field(factory=dict, hash=False)

    @property
    def requests_per_minute(self) -> float:
        """HTTP attempts per minute over the batch so far."""
        return self.requests * 60 / self.elapsed if self.elapsed > 0 else 0.0

    @property
    def tokens_per_minute(self) -> float:
        """Prompt and response tokens per minute, as the responses reported them."""
        return (self.prompt_tokens + self.response_tokens) * 60 / self.elapsed if self.elapsed > 0 else 0.0

    @property
    def latency_p50(self) -> float | None:
        """The median seconds from sending an attempt to its answer (None before any answer)."""
        return self._quantile(0.5)

    @property
    def latency_p95(self) -> float | None:
        """The 95th percentile of the seconds from sending an attempt to its answer."""
        return self._quantile(0.95)

    def to_dict(self) -> dict[str, Any]:
        """The figures as JSON types: the fields, the rates and latencies above, and ``routes`` alike."""
        figures: dict[str, Any] = {name: getattr(self, name) for name in (*_COUNTED[:-2], "elapsed")}
        figures.update(
            failures=dict(self.failures),
            prompt_tokens=self.prompt_tokens,
            response_tokens=self.response_tokens,
            requests_per_minute=self.requests_per_minute,
            tokens_per_minute=self.tokens_per_minute,
            latency_p50=self.latency_p50,
            latency_p95=self.latency_p95,
        )
        if self.routes:
            figures["routes"] = {name: stats.to_dict() for name, stats in self.routes.items()}
        return figures

    def _quantile(self, q: float) -> float | None:
        total = sum(count for _, count in self._latencies)
        seen = 0
        for bucket, count in self._latencies:
            seen += count
            if seen >= q * total:
                return float(_SMALLEST * _GROWTH ** (bucket + 0.5))
        return None


_COUNTED = (
    "requests",
    "completed",
    "failed",
    "retries",
    "rate_limited",
    "cache_hits",
    "cache_misses",
    "prompt_tokens",
    "response_tokens",
)
"""What a ``Tally`` counts: ``BatchStats``' fields of the same names (the token sums last)."""


class Tally:
    """The live counts behind ``BatchStats``, updated from every worker (thread-safe); ``route(name)``
    is a route's own."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts = dict.fromkeys(_COUNTED, 0)
        self._failures: dict[str, int] = {}
        self._latencies: dict[int, int] = {}
        self._started: float | None = None
        self._ended: float | None = None
        self._routes: dict[str, Tally] = {}

    def route(self, name: str) -> Tally:
        """The counts of the route called ``name`` (made on first use)."""
        with self._lock:
            route = self._routes.get(name)
            if route is None:
                route = self._routes[name] = Tally()
            return route

    def start(self) -> None:
        self._started = time.monotonic()

    def end(self) -> None:
        self._ended = time.monotonic()

    def sent(self) -> None:
        with self._lock:
            self._counts["requests"] += 1

    def answered(self, latency: float) -> None:
        bucket = _bucket(latency)
        with self._lock:
            self._latencies[bucket] = self._latencies.get(bucket, 0) + 1

    def add(self, name: str) -> None:
        with self._lock:
            self._counts[name] += 1

    def failure(self, kind: str) -> None:
        """One more failed (prompt, or a route's attempt), of error type ``kind``."""
        with self._lock:
            self._counts["failed"] += 1
            self._failures[kind] = self._failures.get(kind, 0) + 1

    def completed(self, completion: Completion) -> None:
        with self._lock:
            self._counts["completed"] += 1
            if not completion.cached:
                self._counts["prompt_tokens"] += completion.prompt_tokens or 0
                self._counts["response_tokens"] += completion.response_tokens or 0

    def snapshot(self, elapsed: float | None = None) -> BatchStats:
        """The figures so far (a route's: over the ``elapsed`` seconds of its batch)."""
        with self._lock:
            if elapsed is None:
                ended = self._ended if self._ended is not None else time.monotonic()
                elapsed = 0.0 if self._started is None else ended - self._started
            counts, latencies = dict(self._counts), tuple(sorted(self._latencies.items()))
            failures, routes = dict(self._failures), dict(self._routes)
        return BatchStats(
            **counts,
            failures=failures,
            elapsed=elapsed,
            latencies=latencies,
            routes={name: route.snapshot(elapsed) for name, route in routes.items()},
        )
