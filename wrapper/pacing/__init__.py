"""Pacing: client-side rate limits, the layer under the batch, the router and Ray, and where limits are kept.

``Pacer`` paces requests to requests and tokens per minute, evenly, slowing down on 429s, and opens
slowly when no limit is given. ``Limiter`` is where a limit is kept, the seam a limit kept elsewhere
plugs into: a ``Pacer`` keeps one in this process, ``wrapper.ray``'s leases one shared by a cluster,
a ``SharedPacer`` one shared through a ``RedisStore`` (``LeaseCalls``: what it asks of the store).
Their words are the same: a request
``acquire``\\ s its turn (sync code waits each of ``turns``, with ``wait_turn``), ``settle``\\ s the
tokens it used (``used_tokens``, against ``estimate_tokens``), and a 429 says it was ``throttled``.
``checked_limit`` checks a limit as every extra takes one.

A ``LimitStore`` gives the limiter of each limit key: ``LocalStore`` keeps limits in this process;
``RedisStore`` (with the ``redis`` extra) in Redis, shared by every process that names the same store
and limit key. ``limit_store`` turns a ``limit_store=`` argument (a Redis URL or a store) into a store,
``limit_key`` is a deployment's key unless named (its API, base URL host and model), and ``limit_for``
what the batch, the router and the command line pace a deployment by: its limit in a store, or a
``Pacer`` of its own.
"""

from typing import TYPE_CHECKING, Any

from ._given import limit_for, limit_key, limit_store
from ._pacer import Limiter, Pacer, await_turn, checked_limit, estimate_tokens, used_tokens, wait_turn
from ._shared import LeaseCalls, SharedPacer
from ._store import LimitStore, LocalStore, SharedLimit, checked_key

if TYPE_CHECKING:
    from ._redis import RedisStore

__all__ = [
    "LeaseCalls",
    "LimitStore",
    "Limiter",
    "LocalStore",
    "Pacer",
    "RedisStore",
    "SharedLimit",
    "SharedPacer",
    "await_turn",
    "checked_key",
    "checked_limit",
    "estimate_tokens",
    "limit_for",
    "limit_key",
    "limit_store",
    "used_tokens",
    "wait_turn",
]


def __getattr__(name: str) -> Any:
    """``RedisStore`` loads on first use: it needs redis-py, an optional extra."""
    if name == "RedisStore":
        from ._redis import RedisStore

        return RedisStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
