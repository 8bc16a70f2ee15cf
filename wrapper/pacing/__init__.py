"""Pacing: client-side rate limits, and where they are kept (this process, or a store shared by many).

``LocalStore`` keeps limits in this process; ``RedisStore`` (with the ``redis`` extra) in Redis, shared
by every process that names the same store and limit key. ``limit_store`` turns a ``limit_store=``
argument (a Redis URL or a store) into a store, and ``limit_key`` is a deployment's key unless named.
"""

from typing import TYPE_CHECKING, Any

from ._shared import SharedPacer
from ._store import LimitStore, LocalStore, SharedLimit, limit_key, limit_store

if TYPE_CHECKING:
    from ._redis import RedisStore

__all__ = ["LimitStore", "LocalStore", "RedisStore", "SharedLimit", "SharedPacer", "limit_key", "limit_store"]


def __getattr__(name: str) -> Any:
    """``RedisStore`` loads on first use: it needs redis-py, an optional extra."""
    if name == "RedisStore":
        from ._redis import RedisStore

        return RedisStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
