"""Helpers shared by test modules (fixtures stay in conftest)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from wrapper.sandbox import Sandbox


def wait_until(condition: Callable[[], bool], timeout: float = 5.0) -> bool:
    """Poll ``condition`` every 10 ms until it holds (True) or ``timeout`` seconds pass (False)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def batch_threads() -> list[threading.Thread]:
    """The live worker threads of sync ``complete_many`` batches."""
    return [t for t in threading.enumerate() if t.name.startswith("complete_many")]


class Held:
    """A scripted reply that holds each request until ``release()`` (or 10 s), then answers with ``reply``.

    ``held`` counts the requests waiting now; ``answered`` those answered after being held.
    """

    def __init__(self, reply: Callable[[Any], None]) -> None:
        self._reply = reply
        self._release = threading.Event()
        self._lock = threading.Lock()
        self.held = 0
        self.answered = 0

    def release(self) -> None:
        self._release.set()

    def __call__(self, handler: Any) -> None:
        with self._lock:
            self.held += 1
        self._release.wait(10)
        with self._lock:
            self.held -= 1
            self.answered += 1
        self._reply(handler)


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
