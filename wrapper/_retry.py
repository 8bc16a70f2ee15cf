"""When a failed request is retried, how long to wait first, and the wait itself.

Retried: connection errors and timeouts, 408, 409, 429 and 5xx. The wait is the server's
``retry-after-ms`` / ``Retry-After`` (seconds or an HTTP date) when it gives one, capped at
``MAX_RETRY_AFTER``; otherwise exponential backoff from ``INITIAL_DELAY`` up to ``MAX_DELAY``,
with up to 25% jitter taken off so that clients that failed together do not retry together.
``retry_or_raise`` is the one decision (and its INFO log line) the clients and the batch share;
``sleep``/``asleep`` wait, or return at once in testing mode (``wrapper.testing``).
"""

from __future__ import annotations

import logging
import random
import time

from generated.exceptions import APIConnectionError, APIError, APIStatusError, parse_retry_after

from . import _telemetry, testing

__all__ = [
    "INITIAL_DELAY",
    "MAX_DELAY",
    "MAX_RETRY_AFTER",
    "asleep",
    "is_retryable",
    "parse_retry_after",
    "retry_delay",
    "retry_or_raise",
    "sleep",
]

INITIAL_DELAY = 0.5
MAX_DELAY = 8.0
MAX_RETRY_AFTER = 60.0
RETRYABLE_STATUSES = frozenset({408, 409, 429})

logger = logging.getLogger("wrapper")


def retry_or_raise(error: APIError, retries: int, max_retries: int) -> float:
    """Seconds to wait before retry ``retries + 1`` of ``error``'s request (logged at INFO).

    Raises ``error`` when it is final: not retryable, or ``retries`` has reached ``max_retries``.
    """
    if retries >= max_retries or not is_retryable(error):
        raise error
    delay = retry_delay(retries, error.retry_after if isinstance(error, APIStatusError) else None)
    logger.info(
        "retrying %s %s in %.2fs (retry %d of %d) after: %s",
        error.request.method,
        error.request.url,
        delay,
        retries + 1,
        max_retries,
        error,
    )
    _telemetry.retry(error, retries + 1, delay)
    return delay


def sleep(seconds: float) -> None:
    """Wait ``seconds`` before a retry; return at once in testing mode."""
    if not testing.is_testing():
        time.sleep(seconds)


async def asleep(seconds: float) -> None:
    """Wait ``seconds`` before a retry without blocking the loop; return at once in testing mode."""
    import asyncio  # not at module level: `import wrapper.scale` stays light

    await asyncio.sleep(0 if testing.is_testing() else seconds)


def is_retryable(exc: BaseException) -> bool:
    """True for errors worth another attempt: connection errors, timeouts, 408, 409, 429 and 5xx."""
    if isinstance(exc, APIConnectionError):
        return True
    if isinstance(exc, APIStatusError):
        return exc.status_code in RETRYABLE_STATUSES or exc.status_code >= 500
    return False


def retry_delay(attempt: int, retry_after: float | None) -> float:
    """Seconds to wait before retry ``attempt + 1``: the server's ``retry_after`` if given, else backoff."""
    if retry_after is not None:
        return min(max(retry_after, 0.0), MAX_RETRY_AFTER)
    return min(INITIAL_DELAY * 2.0**attempt, MAX_DELAY) * (1.0 - 0.25 * random.random())
