"""One thread per process that does, at their time, what must happen while nobody is calling: shut
a sync call's socket down when its deadline passes (``stream_body.Watchdog``), and close the sync
pool's idle connections once they expire or the server closed them (``sync_pool``).

A ``threading.Timer`` is a thread started per use, some 120 µs each: too dear for every call with
a deadline. Here ``TIMERS.at(when, action)`` is a push on a heap. The thread starts when something
is scheduled, and ends once nothing has been for a moment. Around ``os.fork()`` it is stopped and
started again in the parent, so that a fork never sees it: Python 3.12+ warns when a process with
threads forks, and a child closes the sync connections it inherited only if the parent had no other
thread (``fork``). A child starts its own thread when it needs one; what the parent had scheduled
was for the parent's calls and pools.
"""

from __future__ import annotations

import heapq
import logging
import os
import threading
import time
from collections.abc import Callable

from . import fork as _fork  # noqa: F401  (its fork hooks first: ours, registered after, run before)

__all__ = ["TIMERS", "Timer", "Timers"]

logger = logging.getLogger("wrapper")

_LINGER = 2.0
"""Seconds the thread waits with nothing scheduled before it ends (calls in a row reuse it)."""


class Timer:
    """An action scheduled at ``when`` (``time.monotonic()``); ``Timers.cancel`` drops it."""

    __slots__ = ("action", "when")

    def __init__(self, when: float, action: Callable[[], None]) -> None:
        self.when = when
        self.action: Callable[[], None] | None = action

    def __lt__(self, other: Timer) -> bool:
        return self.when < other.when


class Timers:
    """Actions run at their time by one thread; see the module."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._heap: list[Timer] = []
        self._cancelled = 0
        self._thread: threading.Thread | None = None
        self._paused = False  # while a fork is under way

    def at(self, when: float, action: Callable[[], None]) -> Timer:
        """Run ``action()`` at ``when`` (``time.monotonic()``), in the timers' thread."""
        timer = Timer(when, action)
        with self._changed:
            heapq.heappush(self._heap, timer)
            if self._thread is None:
                self._start()
            elif self._heap[0] is timer:
                self._changed.notify()
        return timer

    def cancel(self, timer: Timer) -> None:
        """Drop ``timer`` unless its action has begun."""
        with self._changed:
            if timer.action is None:
                return
            timer.action = None
            self._cancelled += 1
            if self._cancelled > 64 and self._cancelled * 2 > len(self._heap):  # long deadlines, all met
                self._heap = [timer for timer in self._heap if timer.action is not None]
                heapq.heapify(self._heap)
                self._cancelled = 0

    def _start(self) -> None:
        if not self._paused:
            self._thread = threading.Thread(target=self._run, name="completion-clients timers", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        with self._changed:
            while not self._paused:
                heap = self._heap
                while heap and heap[0].action is None:
                    heapq.heappop(heap)
                    self._cancelled -= 1
                if not heap:
                    if not self._changed.wait_for(lambda: self._heap or self._paused, _LINGER):
                        break
                    continue
                wait = heap[0].when - time.monotonic()
                if wait > 0:
                    self._changed.wait(wait)
                    continue
                timer = heapq.heappop(heap)
                action, timer.action = timer.action, None
                self._changed.release()
                try:
                    assert action is not None
                    action()
                except Exception:  # an action's own failure must not stop the others
                    logger.exception("a scheduled action of the clients failed")
                finally:
                    self._changed.acquire()
            self._thread = None

    def _before_fork(self) -> None:
        with self._changed:
            self._paused = True
            thread = self._thread
            self._changed.notify()
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def _after_fork_in_parent(self) -> None:
        with self._changed:
            self._paused = False
            if self._heap and self._thread is None:
                self._start()

    def _after_fork_in_child(self) -> None:
        self._changed = threading.Condition()
        self._heap = []
        self._cancelled = 0
        self._thread = None
        self._paused = False


TIMERS = Timers()
os.register_at_fork(
    before=TIMERS._before_fork,
    after_in_parent=TIMERS._after_fork_in_parent,
    after_in_child=TIMERS._after_fork_in_child,
)
