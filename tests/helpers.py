"""Helpers shared by test modules: ``from helpers import ...`` (fixtures stay in conftest)."""

from __future__ import annotations

import contextlib
import logging
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from wrapper import testing

ROOT = Path(__file__).resolve().parents[1]


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


@contextlib.contextmanager
def fast_server(delay: float) -> Iterator[str]:
    """The bench's bare asyncio server (``scripts/bench/server.py``) in a child process: its URL.

    It answers both APIs from fixed bodies after ``delay`` seconds, thousands of requests a second.
    """
    command = [
        sys.executable,
        str(ROOT / "scripts" / "bench" / "server.py"),
        "--chunks",
        "2",
        "--delay",
        str(delay),
    ]
    process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert process.stdin is not None
    assert process.stdout is not None
    try:
        yield f"http://127.0.0.1:{int(process.stdout.readline())}"
    finally:
        process.stdin.close()  # the server stops when its stdin closes
        process.wait(timeout=10)
        process.stdout.close()


class _RetryWaits(logging.Handler):
    """Collects the delay of each ``retrying ... in %.2fs`` record the clients log at INFO."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.waits: list[float] = []

    def emit(self, record: logging.LogRecord) -> None:
        if isinstance(record.args, tuple) and str(record.msg).startswith("retrying "):
            self.waits.append(float(record.args[2]))  # type: ignore[arg-type]


@contextlib.contextmanager
def retry_waits() -> Iterator[list[float]]:
    """Testing mode on (retries do not wait), and the waits they would have had, read from the log."""
    logger = logging.getLogger("wrapper")
    handler, level, was_testing = _RetryWaits(), logger.level, testing.is_testing()
    logger.addHandler(handler)
    if not logger.isEnabledFor(logging.INFO):
        logger.setLevel(logging.INFO)
    testing.set_testing(True)
    try:
        yield handler.waits
    finally:
        testing.set_testing(was_testing)
        logger.setLevel(level)
        logger.removeHandler(handler)
