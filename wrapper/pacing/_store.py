"""Where a limit's pacing lives: the limit store seam under the pacer.

A ``LimitStore`` gives the pacer of a limit key, a ``SharedLimit``:
``pacer(key, requests_per_minute, tokens_per_minute)``.
``LocalStore`` keeps limits in this process: every caller naming one key shares one ``Pacer``.
``RedisStore`` (``wrapper.pacing._redis``) keeps them in Redis, shared by every process that names the
same store and key.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from ._pacer import Limiter, Pacer, checked_limit

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["SCHEMES", "LimitStore", "Limits", "LocalStore", "SharedLimit", "checked_key", "checked_limits"]

SCHEMES = ("redis://", "rediss://", "unix://")
"""The URLs ``limit_store=`` takes (a Redis server: plain, over TLS, or on a Unix socket)."""


@runtime_checkable
class SharedLimit(Limiter, Protocol):
    """What a store gives for a limit key, whichever store it comes from: a ``Limiter`` that sync code
    paces by too (``turns``) and a router compares routes by (``delay``): ``Pacer``'s words, and a
    ``SharedPacer``'s."""

    @property
    def requests_per_minute(self) -> float: ...

    def turns(self, cost: float) -> Iterator[float]: ...

    def delay(self, cost: float) -> float: ...


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
            f"limit_key must be a non-empty string (or None: the API, base URL host and model); got {key!r}"
        )
    return key


Limits = tuple[str, float | None, float | None, bool]
"""A limit as a store keeps it: its key, requests and tokens per minute (None: none), and whether
429s adapt it."""


def checked_limits(
    key: object, requests_per_minute: object, tokens_per_minute: object, adaptive: bool
) -> Limits:
    """What a store's ``pacer`` was given, checked: ``ValueError`` naming the field and its rule."""
    return (
        checked_key(key),
        checked_limit("requests_per_minute", requests_per_minute),
        checked_limit("tokens_per_minute", tokens_per_minute),
        adaptive,
    )


class LocalStore:
    """Limits kept in this process: callers that name the same key (and limits) share one ``Pacer``."""

    def __init__(self) -> None:
        self._pacers: dict[Limits, Pacer] = {}
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
        limits = checked_limits(key, requests_per_minute, tokens_per_minute, adaptive)
        with self._lock:
            pacer = self._pacers.get(limits)
            if pacer is None:
                pacer = self._pacers[limits] = Pacer(*limits[1:3], adaptive=adaptive)
            return pacer

    def __repr__(self) -> str:
        return f"LocalStore({len(self._pacers)} limits)"
