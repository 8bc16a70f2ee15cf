"""When a failed request is retried, how long to wait first, and the wait itself.

What is retried and how long to wait is a ``RetryPolicy`` (``wrapper._core.retry_policy``; by default
connection errors and timeouts, 408, 409, 429 and 5xx, after the server's ``retry-after-ms`` /
``Retry-After`` in seconds or as an HTTP date, else exponential backoff with jitter); a response's
``x-should-retry`` overrides its status rule.
``retry_or_raise`` is the one decision (and its INFO log line) the clients and the batch share;
``sleep``/``asleep`` wait, or return at once in testing mode (``wrapper.testing``).
"""

from __future__ import annotations

import logging
import time

from wrapper import _telemetry, testing
from wrapper._generated.exceptions import APIConnectionError, APIError, APIStatusError, parse_retry_after

from .retry_policy import RetryPolicy

__all__ = [
    "DEFAULT_POLICY",
    "INITIAL_DELAY",
    "MAX_DELAY",
    "MAX_RETRY_AFTER",
    "asleep",
    "is_retryable",
    "parse_retry_after",
    "retry_delay",
    "retry_or_raise",
    "sleep",
    "waited",
]

DEFAULT_POLICY = RetryPolicy()
INITIAL_DELAY = DEFAULT_POLICY.initial_backoff
MAX_DELAY = DEFAULT_POLICY.max_backoff
MAX_RETRY_AFTER = DEFAULT_POLICY.max_retry_after

logger = logging.getLogger("wrapper")


def retry_or_raise(
    error: APIError, retries: int, max_retries: int, policy: RetryPolicy = DEFAULT_POLICY
) -> float:
    """Seconds to wait before retry ``retries + 1`` of ``error``'s request (logged at INFO).

    Raises ``error`` when it is final: ``policy`` does not retry it, or ``retries`` has reached
    ``max_retries``.
    """
    if retries >= max_retries or not is_retryable(error, policy):
        raise error
    delay = policy.backoff(retries, error.retry_after if isinstance(error, APIStatusError) else None)
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


def waited(seconds: float) -> float:
    """How long a retry's wait of ``seconds`` really lasts: 0 in testing mode (the one place it is read)."""
    return 0.0 if testing.is_testing() else seconds


def sleep(seconds: float) -> None:
    """Wait ``seconds`` before a retry; return at once in testing mode."""
    time.sleep(waited(seconds))


async def asleep(seconds: float) -> None:
    """Wait ``seconds`` before a retry without blocking the loop; return at once in testing mode."""
    import asyncio  # not at module level: `import wrapper.scale` stays light

    await asyncio.sleep(waited(seconds))


def is_retryable(exc: BaseException, policy: RetryPolicy = DEFAULT_POLICY) -> bool:
    """True for errors worth another attempt under ``policy`` (the server's ``x-should-retry`` first)."""
    if isinstance(exc, APIConnectionError):
        return policy.connection_errors
    if isinstance(exc, APIStatusError):
        should: str = exc.response.headers.get("x-should-retry", "").strip().lower()
        if should in ("true", "false"):
            return should == "true"
        return exc.status_code in policy.statuses
    return False


def retry_delay(attempt: int, retry_after: float | None) -> float:
    """Seconds to wait before retry ``attempt + 1`` under the default policy."""
    return DEFAULT_POLICY.backoff(attempt, retry_after)
