"""``RetryPolicy``: which failures a client retries, and how long it waits before each retry.

The defaults are the clients' behaviour when no policy is given: connection errors and timeouts,
408, 409, 429 and 5xx are retried; the wait is the server's ``retry-after-ms`` / ``Retry-After``
when it gives one (up to ``max_retry_after`` seconds), otherwise exponential backoff from
``initial_backoff`` up to ``max_backoff`` seconds, with up to ``jitter`` of it taken off at random
so that clients that failed together do not retry together. A response's ``x-should-retry: true``
or ``false`` overrides the status rule, as the vendors' own SDKs do. How many times is
``max_retries``, a separate option.
"""

from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Collection

__all__ = ["DEFAULT_STATUSES", "RetryPolicy"]

DEFAULT_STATUSES = frozenset({408, 409, 429, *range(500, 600)})
"""Request timeout, conflict, too many requests, and every server error."""


def _statuses(value: Collection[int]) -> frozenset[int]:
    if isinstance(value, str | bytes) or not isinstance(value, Collection):
        raise ValueError(f"retry: statuses must be a collection of HTTP status codes; got {value!r}")
    for status in value:
        if isinstance(status, bool) or not isinstance(status, int) or not 100 <= status <= 599:
            raise ValueError(f"retry: statuses must be HTTP status codes (100-599); got {status!r}")
    return frozenset(value)


@dataclasses.dataclass(frozen=True, repr=False)
class RetryPolicy:
    """Which failures are retried and how long to wait: ``retry=RetryPolicy(...)`` on a client or a call."""

    statuses: Collection[int] = DEFAULT_STATUSES
    """Statuses that are retried (``x-should-retry`` from the server overrides this)."""
    initial_backoff: float = 0.5
    """Seconds before the first retry, doubled for each one after it."""
    max_backoff: float = 8.0
    """The longest backoff."""
    jitter: float = 0.25
    """The largest share of a backoff taken off at random (0: none, 1: up to all of it)."""
    max_retry_after: float = 60.0
    """The longest ``Retry-After`` honoured: a longer one is cut to this."""
    connection_errors: bool = True
    """Whether connection errors and timeouts are retried."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "statuses", _statuses(self.statuses))
        for name in ("initial_backoff", "max_backoff", "max_retry_after"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < math.inf:
                raise ValueError(f"retry: {name} must be a number of seconds >= 0; got {value!r}")
        if self.max_backoff < self.initial_backoff:
            raise ValueError(
                f"retry: max_backoff ({self.max_backoff!r}) must not be below initial_backoff "
                f"({self.initial_backoff!r})"
            )
        if (
            isinstance(self.jitter, bool)
            or not isinstance(self.jitter, int | float)
            or not 0 <= self.jitter <= 1
        ):
            raise ValueError(f"retry: jitter must be a number from 0 to 1; got {self.jitter!r}")
        if not isinstance(self.connection_errors, bool):
            raise ValueError(
                f"retry: connection_errors must be True or False; got {self.connection_errors!r}"
            )

    def __repr__(self) -> str:
        statuses = "DEFAULT_STATUSES" if self.statuses == DEFAULT_STATUSES else repr(sorted(self.statuses))
        return (
            f"RetryPolicy(statuses={statuses}, initial_backoff={self.initial_backoff!r}, "
            f"max_backoff={self.max_backoff!r}, jitter={self.jitter!r}, "
            f"max_retry_after={self.max_retry_after!r}, connection_errors={self.connection_errors!r})"
        )

    def backoff(self, retries: int, retry_after: float | None) -> float:
        """Seconds before retry ``retries + 1``: the server's ``retry_after`` if given, else the backoff."""
        if retry_after is not None:
            return min(max(retry_after, 0.0), self.max_retry_after)
        backoff = min(self.initial_backoff * 2.0**retries, self.max_backoff)
        return backoff * (1.0 - self.jitter * random.random())
