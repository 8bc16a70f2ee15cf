"""Where a limit's pacing lives: the limit store seam under the pacer.

A ``LimitStore`` gives the pacer of a limit key (``pacer(key, requests_per_minute, tokens_per_minute)``).
``LocalStore`` keeps limits in this process: every caller naming one key shares one ``Pacer``.
``RedisStore`` (``wrapper.pacing._redis``) keeps them in Redis, shared by every process that names the
same store and key. ``limit_store`` turns what a user passes as ``limit_store=`` into a store, and
``limit_key`` is the key a deployment's limit has unless named: its API, base URL and model.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from wrapper.batch import Pacer, checked_limit

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["SCHEMES", "LimitStore", "LocalStore", "SharedLimit", "limit_key", "limit_store"]

SCHEMES = ("redis://", "rediss://", "unix://")
"""The URLs ``limit_store=`` takes (a Redis server: plain, over TLS, or on a Unix socket)."""


@runtime_checkable
class SharedLimit(Protocol):
    """What a store's pacer does, whichever store it comes from: ``Pacer``'s methods."""

    @property
    def requests_per_minute(self) -> float: ...

    def turns(self, cost: float) -> Iterator[float]: ...

    def delay(self, cost: float) -> float: ...

    def correct(self, estimate: float, actual: float) -> None: ...

    def slow_down(self, retry_after: float | None) -> None: ...

    async def acquire(self, cost: float) -> None: ...

    async def settle(self, estimate: float, actual: float) -> None: ...

    async def throttled(self, retry_after: float | None) -> None: ...


@runtime_checkable
class LimitStore(Protocol):
    """Where limits are kept: gives the pacer of each limit key, the same one to every caller of a process
    that names the key with the same limits."""

    def pacer(
        self,
        key: str,
        requests_per_minute: float | None = None,
        tokens_per_minute: float | None = None,
        *,
        adaptive: bool = True,
    ) -> SharedLimit: ...


def checked_key(key: object) -> str:
    """``key`` as a limit key; ``ValueError`` naming ``limit_key`` unless a non-empty string."""
    if not isinstance(key, str) or not key.strip():
        raise ValueError(
            f"limit_key must be a non-empty string (or None: the API, base URL and model); got {key!r}"
        )
    return key


class LocalStore:
    """Limits kept in this process: callers that name the same key (and limits) share one ``Pacer``."""

    def __init__(self) -> None:
        self._pacers: dict[tuple[str, float | None, float | None, bool], Pacer] = {}
        self._lock = threading.Lock()

    def pacer(
        self,
        key: str,
        requests_per_minute: float | None = None,
        tokens_per_minute: float | None = None,
        *,
        adaptive: bool = True,
    ) -> Pacer:
        """The pacer of ``key`` at these limits (None: none, adapting to 429s), made on first use."""
        limits = (
            checked_key(key),
            checked_limit("requests_per_minute", requests_per_minute),
            checked_limit("tokens_per_minute", tokens_per_minute),
            adaptive,
        )
        with self._lock:
            pacer = self._pacers.get(limits)
            if pacer is None:
                pacer = self._pacers[limits] = Pacer(*limits[1:3], adaptive=adaptive)
            return pacer

    def __repr__(self) -> str:
        return f"LocalStore({len(self._pacers)} limits)"


def limit_store(value: object) -> LimitStore | None:
    """What ``limit_store=`` was given, as a store: None (each pacer alone, in this process), a store, or a
    Redis URL (the ``RedisStore`` of that URL, one per process). ``ValueError`` or ``TypeError`` naming
    ``limit_store`` for anything else."""
    if value is None or isinstance(value, LimitStore):
        return value
    if isinstance(value, str):
        if not value.startswith(SCHEMES):
            raise ValueError(
                f"limit_store must be a Redis URL ({', '.join(s + '...' for s in SCHEMES)}) or a store "
                f"(RedisStore, LocalStore); got {_shown(value)}"
            )
        from ._redis import RedisStore  # redis-py is an optional extra

        return RedisStore.of(value)
    raise TypeError(
        f"limit_store must be a Redis URL (redis://host:6379/0) or a store (RedisStore, LocalStore); "
        f"got {type(value).__name__}"
    )


def _shown(url: str) -> str:
    """``url`` for an error message, without what may be a password in it."""
    scheme, separator, rest = url.partition("://")
    return repr(f"{scheme}{separator}{rest.rpartition('@')[2]}" if separator else url[:40])


def limit_key(api: str, base_url: Any, model: str) -> str:
    """The key of a deployment's limit unless one is named: its API, base URL and model."""
    return f"{api} {str(base_url).rstrip('/')} {model}"
