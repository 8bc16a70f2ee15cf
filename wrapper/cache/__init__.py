"""The response cache: the same request is never paid for twice, and never answered wrongly.

A store keeps finished completions (and finished streams, as their chunks) under a key that covers
everything the request sends (``request_key``): ``SQLiteStore``, one local file, safe for many
threads and processes of one machine; ``RedisStore``, one Redis for many machines (the ``redis``
extra); or a ``Store`` subclass of your own. ``open_store`` turns what the ``cache`` option takes (a
path, a ``redis://`` URL, a store) into a store. A store that fails is a miss, with a warning logged
once (``errors="raise"``: ``CacheError``). ``python -m wrapper cache stats|clear STORE`` shows or
empties one.
"""

from __future__ import annotations

from ._cache import CacheError
from ._hooks import cached_calls
from ._key import FORMAT, request_key
from ._open import open_store
from ._redis import RedisStore
from ._sqlite import SQLiteStore
from ._store import Store, StoreStats

__all__ = [
    "FORMAT",
    "CacheError",
    "RedisStore",
    "SQLiteStore",
    "Store",
    "StoreStats",
    "cached_calls",
    "open_store",
    "request_key",
]
