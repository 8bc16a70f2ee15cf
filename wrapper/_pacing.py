"""Client-side rate limits for batches: requests and tokens per minute, paced evenly, slowed by 429s.

``Pacer`` spaces requests with the generic cell rate algorithm (GCRA): each quantity (requests,
tokens) has a theoretical arrival time that every request pushes ``cost / rate`` seconds further;
a request may go once that time is less than ``BURST`` seconds ahead, so at most a quarter of a
second's budget ever goes at once, never a minute's. A request costing more than ``BURST`` seconds
of budget goes once the pacer is idle and its excess is paid by the requests after it.

With no limit given, or below the limits given, the pacer adapts (AIMD) to a limit the server keeps
but did not announce. Every 429 pauses every request for its Retry-After (then requests resume
evenly, not in a burst). The rate is cut only when the server really refuses the pace: when 429s
are at least ``SHARE`` of the answers since the last cut (and at least ``MIN_429S`` of them), at
most once per ``INTERVAL`` (or per Retry-After, if longer). A cut sets the request rate to
``BACKOFF`` times the success rate achieved since the last cut (at most ``BACKOFF`` times the
current rate, at least half of it): never far below what got through. The first cut has no current
rate to bound it: a burst a server's limit let through at first may overstate the success rate, and
the cuts after it (each at most a half) take the rest off. The rate then grows back additively, by
``RECOVERY`` of the rate it was cut to each second, up to the limit given. So a server that refuses a
steady few per cent whatever the pace (a flaky one) never drives the rate down, and one whose limit
lifts is caught up with.

Hand-written rather than aiolimiter, limits or pyrate-limiter: none of them lets a request cost more
than its burst capacity (aiolimiter's ``acquire(amount)`` raises ``ValueError``, the others refuse
it for ever), none takes back a cost once the response reports the real count, none changes its rate
while running, and aiolimiter paces asyncio tasks only, while sync batches pace threads.
"""

from __future__ import annotations

import asyncio
import math
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from ._retry import MAX_RETRY_AFTER

__all__ = ["BURST", "Limiter", "Pacer", "checked_limit", "estimate_tokens"]

BURST = 0.25
"""Seconds of budget that may go at once."""
BACKOFF = 0.8
"""A cut sets the request rate to this fraction of the success rate achieved since the last cut."""
RECOVERY = 0.03
"""Each second after a cut, the request rate grows by this fraction of the rate it was cut to."""
SHARE = 0.15
"""The share of 429s among the answers since the last cut above which the rate is cut."""
MIN_429S = 10
"""Fewer 429s than this since the last cut never cut the rate (their Retry-After still pauses): early
in a batch, a flaky server's few random 429s can be ``SHARE`` of the few answers so far."""
INTERVAL = 1.0
"""Seconds at least between two cuts (longer when the 429's Retry-After is)."""
MIN_RATE = 1 / 60
"""Adaptation never slows below one request a minute."""
WINDOW = 2.0
"""Seconds over which the achieved success rate and the share of 429s are measured."""


class Limiter(Protocol):
    """What paces a batch: the in-process ``Pacer``, or one shared by many processes (``wrapper.ray``)."""

    async def acquire(self, cost: float) -> None:
        """Wait until a request of ``cost`` estimated tokens may go."""
        ...

    async def settle(self, estimate: float, actual: float) -> None:
        """Correct a sent request's token count once its response reports the real one."""
        ...

    async def throttled(self, retry_after: float | None) -> None:
        """A request got 429 (after which the server asked for ``retry_after`` seconds, if it said)."""
        ...


def checked_limit(name: str, value: object) -> float | None:
    """``value`` as a rate limit (None: no limit); ``ValueError`` naming ``name`` unless a number > 0."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < math.inf:
        raise ValueError(f"{name} must be a number > 0 (or None for no limit), got {value!r}")
    return float(value)


def estimate_tokens(prompt: str, params: Mapping[str, Any], max_tokens: str) -> int:
    """A request's token cost before it is sent: ``ceil(len(prompt) / 4)`` plus its ``max_tokens`` keyword."""
    extra = params.get(max_tokens)
    if not isinstance(extra, int) or isinstance(extra, bool) or extra < 0:
        extra = 0  # absent, or invalid: ``complete`` refuses it before anything is sent
    return math.ceil(len(prompt) / 4) + extra


class _Bucket:
    """GCRA state of one quantity at ``rate`` units a second (``inf``: unlimited)."""

    def __init__(self, rate: float) -> None:
        self.rate = rate
        self.due = -math.inf  # when everything charged so far is paid for

    def ready_at(self, cost: float) -> float:
        """The earliest time a request of ``cost`` units may go."""
        if self.rate == math.inf:
            return -math.inf
        return self.due + min(cost / self.rate, BURST) - BURST

    def charge(self, cost: float, at: float) -> None:
        if self.rate != math.inf:
            self.due = max(self.due, at) + cost / self.rate


class _Recent:
    """Events counted in ``WINDOW`` seconds, in ten fixed slots: a rate in constant memory."""

    SLOTS = 10

    def __init__(self, now: float) -> None:
        self._started = now
        self._counts = [0] * self.SLOTS
        self._slot = 0  # the absolute slot number the newest count belongs to

    def _advance(self, now: float) -> None:
        slot = int((now - self._started) / (WINDOW / self.SLOTS))
        for missed in range(self._slot + 1, min(slot, self._slot + self.SLOTS) + 1):
            self._counts[missed % self.SLOTS] = 0
        self._slot = max(self._slot, slot)

    def add(self, now: float, count: int = 1) -> None:
        self._advance(now)
        self._counts[self._slot % self.SLOTS] += count

    def count(self, now: float) -> int:
        """Events in the window."""
        self._advance(now)
        return sum(self._counts)

    def rate(self, now: float) -> float:
        """Events a second over the window, or the time since the start when shorter.

        Never over less than ``INTERVAL``: a server's limit lets a burst through at first.
        """
        self._advance(now)
        return sum(self._counts) / max(min(WINDOW, now - self._started), INTERVAL)


class Pacer:
    """Paces requests to ``requests_per_minute`` and ``tokens_per_minute`` (None: no limit), thread-safe.

    Sync code calls ``reserve`` and waits what it returns; async code awaits ``acquire``. With
    ``adaptive`` (the default) 429s lower the request rate below the limits, as the module says.
    """

    def __init__(
        self,
        requests_per_minute: float | None = None,
        tokens_per_minute: float | None = None,
        *,
        adaptive: bool = True,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        rpm = checked_limit("requests_per_minute", requests_per_minute)
        tpm = checked_limit("tokens_per_minute", tokens_per_minute)
        self._clock = clock
        self._lock = threading.Lock()
        self._ceiling = math.inf if rpm is None else rpm / 60
        self._requests = _Bucket(self._ceiling)
        self._tokens = _Bucket(math.inf if tpm is None else tpm / 60)
        self._adaptive = adaptive
        self._cut_to = math.inf  # the request rate the last 429 set, and when
        self._cut_at = -math.inf
        self._paused_until = -math.inf
        self._successes = _Recent(clock())  # since the last cut, over ``WINDOW`` at most
        self._limited = _Recent(clock())  # 429s, likewise
        self._sent = _Recent(clock())

    @property
    def requests_per_minute(self) -> float:
        """The request rate the pacer keeps now (``inf``: none), after adaptation."""
        with self._lock:
            return self._rate(self._clock()) * 60

    def _rate(self, now: float) -> float:
        grown = self._cut_to * (1.0 + RECOVERY * (now - self._cut_at))
        return min(self._ceiling, grown)

    def reserve(self, cost: float) -> float:
        """Book the next slot for a request of ``cost`` estimated tokens: the seconds to wait for it."""
        with self._lock:
            now = self._clock()
            self._requests.rate = self._rate(now)
            at = max(now, self._paused_until, self._requests.ready_at(1), self._tokens.ready_at(cost))
            self._requests.charge(1, at)
            self._tokens.charge(cost, at)
            self._sent.add(now)
            return at - now

    def correct(self, estimate: float, actual: float) -> None:
        """A request succeeded and used ``actual`` tokens where ``estimate`` was charged."""
        with self._lock:
            self._successes.add(self._clock())
            if self._tokens.rate != math.inf:
                self._tokens.due += (actual - estimate) / self._tokens.rate

    def slow_down(self, retry_after: float | None) -> None:
        """A 429: pause every request for ``retry_after`` seconds and (if adaptive) maybe cut the rate."""
        with self._lock:
            now = self._clock()
            pause = 0.0 if retry_after is None else min(retry_after, MAX_RETRY_AFTER)
            self._paused_until = max(self._paused_until, now + pause)
            # Resume evenly after the pause, not with a burst of the budget unused during it.
            self._requests.due = max(self._requests.due, self._paused_until + BURST)
            if not self._adaptive:
                return
            self._limited.add(now)
            limited = self._limited.count(now)
            answered = limited + self._successes.count(now)
            if now - self._cut_at < max(INTERVAL, pause) or limited < max(MIN_429S, SHARE * answered):
                return
            current = self._rate(now)
            achieved = self._successes.rate(now)
            if current == math.inf:  # the first cut: before any success, the rate requests went at
                cut = BACKOFF * (achieved or self._sent.rate(now))
            else:
                cut = min(BACKOFF * current, max(BACKOFF * achieved, current / 2))
            self._cut_to, self._cut_at = max(cut, MIN_RATE), now
            self._successes, self._limited = _Recent(now), _Recent(now)

    def observe(self, sent: int, succeeded: int) -> None:
        """Count requests sent and succeeded elsewhere (a lease's report): they adapt this pacer."""
        with self._lock:
            now = self._clock()
            self._sent.add(now, sent)
            self._successes.add(now, succeeded)

    async def acquire(self, cost: float) -> None:
        """``Limiter.acquire``: wait for the slot ``reserve`` books."""
        wait = self.reserve(cost)
        if wait > 0:
            await asyncio.sleep(wait)

    async def settle(self, estimate: float, actual: float) -> None:
        """``Limiter.settle``: ``correct``."""
        self.correct(estimate, actual)

    async def throttled(self, retry_after: float | None) -> None:
        """``Limiter.throttled``: ``slow_down``."""
        self.slow_down(retry_after)
