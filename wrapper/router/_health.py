"""Whether a route is cooling down: a route that keeps failing rests for a while, then is tried again.

A route cools down when its last ``MIN_FAILURES`` answers within ``WINDOW`` seconds all failed
(connection errors, timeouts, retried statuses but 429, which its pacer answers by slowing down),
whatever it did before: a route down now is down, however long it served. It cools down too when
its failures are at least ``MIN_FAILURES`` and ``SHARE`` of its answers over the last ``WINDOW``
seconds: one failure among many successes is a blip, not a route down, but a route that fails as
often as it serves is not well. It rests ``COOLDOWN`` seconds, or the failure's Retry-After if
longer; the first answer after that decides: a success ends the cooldown, a failure starts another
at once. A route whose limit is kept in a shared store (``wrapper.pacing.SharedPacer``) tells it its
cooldowns, and rests too while another process's lasts.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Protocol

__all__ = ["COOLDOWN", "MIN_FAILURES", "SHARE", "WINDOW", "Health"]

COOLDOWN = 5.0
"""Seconds a failing route rests (longer when its failure asked so with Retry-After)."""
MIN_FAILURES = 3
"""Failures in a row (or within ``WINDOW``, as ``SHARE`` of the answers) before a route cools down."""
SHARE = 0.5
"""The share of failures among a route's answers within ``WINDOW`` at which it cools down."""
WINDOW = 10.0
"""Seconds over which a route's answers are counted."""


class Cooldowns(Protocol):
    """Where cooldowns are shared with other processes: ``wrapper.pacing.SharedPacer``'s."""

    def cool(self, seconds: float) -> None: ...

    def cooling(self) -> float: ...


class Health:
    """One route's recent answers and cooldown (thread-safe); ``shared``: where its cooldowns are shared
    with other processes (None: nowhere)."""

    def __init__(
        self, clock: Callable[[], float] = time.monotonic, *, shared: Cooldowns | None = None
    ) -> None:
        self._clock = clock
        self._shared = shared
        self._lock = threading.Lock()
        self._answers: deque[tuple[float, bool]] = deque()  # (when, failed), within WINDOW
        self._failures = 0
        self._until = -math.inf
        self._probing = False  # cooled down, and no success since
        self.cooldowns = 0

    def left(self) -> float:
        """Seconds of cooldown left (0: none), another process's too if shared."""
        shared = self._shared.cooling() if self._shared is not None else 0.0
        return max(self._until - self._clock(), shared, 0.0)

    def succeeded(self) -> None:
        with self._lock:
            self._add(self._clock(), failed=False)
            self._probing = False

    def failed(self, retry_after: float | None) -> None:
        """A failure of the route (not the request's fault); ``retry_after``: what the server asked."""
        with self._lock:
            now = self._clock()
            self._add(now, failed=True)
            answers = self._answers
            in_a_row = len(answers) >= MIN_FAILURES and all(
                answers[-n][1] for n in range(1, MIN_FAILURES + 1)
            )
            if (
                self._probing
                or in_a_row
                or (self._failures >= MIN_FAILURES and self._failures >= SHARE * len(answers))
            ):
                rest = max(COOLDOWN, retry_after or 0.0)
                self._until = max(self._until, now + rest)
                if self._shared is not None:
                    self._shared.cool(rest)
                answers.clear()
                self._failures = 0
                self._probing = True
                self.cooldowns += 1

    def _add(self, now: float, *, failed: bool) -> None:
        answers = self._answers
        while answers and answers[0][0] < now - WINDOW:
            self._failures -= answers.popleft()[1]
        answers.append((now, failed))
        self._failures += failed
