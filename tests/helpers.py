"""Test helpers shared by several modules."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

from wrapper.sandbox import Sandbox


@contextmanager
def arrivals(sb: Sandbox) -> Iterator[list[float]]:
    """The ``time.monotonic()`` at which each vendor-route request reached ``sb``, while in the block."""
    times: list[float] = []
    counter = sb.app.counter
    enter = counter.enter

    def record() -> None:
        times.append(time.monotonic())
        enter()

    counter.enter = record  # type: ignore[method-assign]
    try:
        yield times
    finally:
        del counter.enter  # the class's own method again


def most_in_any_window(times: list[float], per_second: float) -> float:
    """How far the busiest stretch of ``times`` went over ``per_second``: max over i <= j of
    ``(j - i + 1) - per_second * (times[j] - times[i])``, the burst a limiter must have allowed."""
    ordered = sorted(times)
    return max(
        (j - i + 1) - per_second * (ordered[j] - ordered[i])
        for i in range(len(ordered))
        for j in range(i, len(ordered))
    )
