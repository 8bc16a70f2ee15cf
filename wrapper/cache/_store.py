"""The interface every store of the response cache has: ``Store``, and its ``StoreStats``."""

from __future__ import annotations

import abc
import dataclasses
import math
from typing import Literal

__all__ = ["Store", "StoreStats"]

Errors = Literal["warn", "raise"]


@dataclasses.dataclass(frozen=True)
class StoreStats:
    """What a store holds: ``entries`` (those not expired), ``size`` (their stored bytes), ``location``
    (a file's path, a Redis URL without its password) and the store's ``ttl`` (None: entries never
    expire)."""

    location: str
    entries: int
    size: int
    ttl: float | None


class Store(abc.ABC):
    """Where cached completions are kept, as bytes under string keys.

    ``ttl`` is how many seconds an entry is served after it was stored (None: until cleared).
    ``errors`` says what a failure of the store does to a call: ``"warn"`` (the default) logs a warning
    once per outage and sends the request as if the store were not there; ``"raise"`` makes the call
    fail with ``wrapper.cache.CacheError`` instead. A store is safe for many threads, and can be used
    from async code: the clients run its calls on threads of its own, off the event loop.

    To keep entries elsewhere, subclass it and implement ``load``, ``save``, ``clear`` and ``stats``.
    """

    def __init__(self, *, ttl: float | None = None, errors: Errors = "warn") -> None:
        if ttl is not None and (
            isinstance(ttl, bool) or not isinstance(ttl, int | float) or not 0 < ttl < math.inf
        ):
            raise ValueError(
                f"ttl must be None (entries never expire) or a number of seconds > 0; got {ttl!r}"
            )
        if errors not in ("warn", "raise"):
            raise ValueError(f"errors must be 'warn' or 'raise'; got {errors!r}")
        self.ttl: float | None = None if ttl is None else float(ttl)
        self.errors: Errors = errors

    @property
    @abc.abstractmethod
    def location(self) -> str:
        """Where the entries are (a path, a URL without its password), for messages and ``stats``."""

    @abc.abstractmethod
    def load(self, key: str) -> bytes | None:
        """The bytes stored under ``key``, or None (none, or expired)."""

    @abc.abstractmethod
    def save(self, key: str, value: bytes) -> None:
        """Store ``value`` under ``key`` (replacing what was there), to expire after ``ttl``."""

    @abc.abstractmethod
    def clear(self) -> int:
        """Remove every entry; how many there were."""

    @abc.abstractmethod
    def stats(self) -> StoreStats:
        """What the store holds now."""

    def close(self) -> None:  # noqa: B027  (a store holding nothing open has nothing to do)
        """Release what the store holds open (connections); it reopens them if used again."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.location!r}, ttl={self.ttl!r}, errors={self.errors!r})"
