"""Logging switched on by each API's environment variable (``Api.log_env``), as the vendors' SDKs do.

``SGP_CLIENT_LOG`` (Scale, the variable scale-gp reads) or ``GRADIENT_LOG`` (Gradient) set to
``info`` or ``debug`` (any case) sets the level of the package's logger, ``wrapper``, when the first
client of that API is built, and gives it a handler to stderr in openai-python's format
(``[2026-01-01 12:00:00 - wrapper.retry:52 - INFO] retrying ...``). The handler stays quiet once the
application configures logging itself (the root logger has a handler): the lines then go to the
application's handlers only, and never twice. Any other value warns and changes nothing.

What each level prints, on every transport (httpx's and aiohttp's alike):

- ``info``: each retry: method, URL, the wait, which retry of how many, and the error it follows.
- ``debug``: that, plus one line per response (method, URL, status, seconds, the request's headers
  with credentials redacted) and one per request that failed to connect or timed out.

Credentials never appear: headers are redacted (``wrapper._core.redact``) and error messages scrubbed
before they are logged. Both APIs log to the one ``wrapper`` logger, so the more verbose of the two
variables applies to both. httpx's own logger is left alone (set ``logging.getLogger("httpx")`` for it).
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import warnings

__all__ = ["LEVELS", "setup_logging"]

LEVELS = {"info": logging.INFO, "debug": logging.DEBUG}
"""The values the variables take (in any case), and the level each sets."""
FORMAT = "[%(asctime)s - %(name)s.%(module)s:%(lineno)d - %(levelname)s] %(message)s"
DATE_FORMAT = "%Y-%m-%d %H:%M:%S"

logger = logging.getLogger("wrapper")
_seen: set[str] = set()
_lock = threading.Lock()


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to ``sys.stderr`` as it is when a line is logged (so a redirected stderr gets it), and
    only while the application has no logging of its own (no handler on the root logger)."""

    def __init__(self) -> None:
        super().__init__()
        self.setFormatter(logging.Formatter(FORMAT, DATE_FORMAT))
        self.addFilter(lambda record: not logging.getLogger().handlers)

    @property
    def stream(self) -> object:
        return sys.stderr

    @stream.setter
    def stream(self, _value: object) -> None:
        pass  # StreamHandler's constructor sets it: the property above always reads the current stderr


_handler = _StderrHandler()


def setup_logging(env: str) -> None:
    """Apply the environment variable ``env`` (an API's ``log_env``) the first time a client of its API
    is built (later calls return at once)."""
    if env in _seen:
        return
    with _lock:
        if env in _seen:
            return
        _seen.add(env)
        value = os.environ.get(env, "")
        if not value:
            return
        level = LEVELS.get(value.strip().lower())
        if level is None:
            warnings.warn(
                f"{env}={value!r} is not a log level: use 'info' or 'debug' (any case); "
                "logging is left as it is",
                RuntimeWarning,
                stacklevel=_caller_level(),
            )
            return
        if logger.level == logging.NOTSET or level < logger.level:
            logger.setLevel(level)
        if _handler not in logger.handlers:
            logger.addHandler(_handler)


def _caller_level() -> int:
    """The ``stacklevel`` of the first frame outside this package: the line that built the client."""
    package = os.path.dirname(os.path.dirname(__file__)) + os.sep  # wrapper/, not only its core
    frame, level = sys._getframe(1), 1
    while frame is not None and (os.path.dirname(frame.f_code.co_filename) + os.sep).startswith(package):
        frame, level = frame.f_back, level + 1  # type: ignore[assignment]
    return level
