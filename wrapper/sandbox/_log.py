"""The sandbox's request log: one line per request on the standard ``logging`` logger ``wrapper.sandbox``.

``Sandbox(log=True)`` (``--log``) turns it on: the logger's level becomes INFO, and a handler writes the
lines to stderr while nothing else would show them (no handler above the logger, as in a script that
configures no logging). Where the application (or pytest) has handlers, the lines go to those only:
pytest shows them under "Captured log" of a failing test, and ``caplog`` holds them.
"""

from __future__ import annotations

import logging
import sys
import threading

logger = logging.getLogger("wrapper.sandbox")
_lock = threading.Lock()


class _StderrHandler(logging.Handler):
    """Writes to ``sys.stderr`` as it is when a line is logged, while no handler above the logger would."""

    def __init__(self) -> None:
        super().__init__()
        self.setFormatter(logging.Formatter("%(asctime)s %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        if _handled_above():
            return
        try:
            sys.stderr.write(self.format(record) + "\n")
        except Exception:  # as logging's own handlers do: a broken stderr never breaks the server
            self.handleError(record)


def _handled_above() -> bool:
    """Whether a logger above ``wrapper.sandbox`` has a handler that its records reach."""
    node = logger
    while node.propagate and node.parent is not None:
        node = node.parent
        if node.handlers:
            return True
    return False


_handler = _StderrHandler()


def enable() -> None:
    """Let the request lines through: the logger's level to INFO (unless lower), and the stderr handler."""
    with _lock:
        if logger.level == logging.NOTSET or logger.level > logging.INFO:
            logger.setLevel(logging.INFO)
        if _handler not in logger.handlers:
            logger.addHandler(_handler)
