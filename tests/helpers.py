"""Helpers shared by test modules (import them with ``from helpers import ...``)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

from wrapper import testing


class _RetryWaits(logging.Handler):
    """Collects the delay of each ``retrying ... in %.2fs`` record the clients log at INFO."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.waits: list[float] = []

    def emit(self, record: logging.LogRecord) -> None:
        if isinstance(record.args, tuple) and str(record.msg).startswith("retrying "):
            self.waits.append(float(record.args[2]))  # type: ignore[arg-type]


@contextmanager
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
