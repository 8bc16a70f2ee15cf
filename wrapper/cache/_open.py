"""``open_store``: what the ``cache`` option names (a path, a Redis URL, a store) as a ``Store``."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from urllib.parse import urlsplit

from ._redis import SCHEMES, RedisStore
from ._sqlite import SQLiteStore
from ._store import Store

__all__ = ["open_store"]

_opened: dict[tuple[str, str], Store] = {}
_named: dict[str | os.PathLike[str], Store] = {}
"""Each path or URL as given, with its store (a relative path: as resolved the first time it was named)."""
_lock = threading.Lock()


def open_store(cache: str | os.PathLike[str] | Store, *, create: bool = True) -> Store:
    """The store ``cache`` names: itself if it is a ``Store``; a ``RedisStore`` for a ``redis://`` (or
    ``rediss://``, ``unix://``) URL; else a ``SQLiteStore`` of that file (``create=False``: a path that
    is no file is a ``FileNotFoundError``, and nothing is created). A path or URL gives the same store
    each time in a process, so every client naming it shares its state."""
    if isinstance(cache, Store):
        return cache
    if isinstance(cache, str | os.PathLike) and (named := _named.get(cache)) is not None:
        return named  # every call of a client names its cache: the usual case, one look-up
    if isinstance(cache, str) and urlsplit(cache).scheme in SCHEMES:
        where = ("redis", cache)
    elif isinstance(cache, str | os.PathLike) and str(cache):
        where = ("sqlite", str(Path(cache).expanduser().absolute()))
    else:
        raise ValueError(
            "cache must be a path (an SQLite file), a redis:// URL or a store from wrapper.cache; "
            f"got {cache!r}"
        )
    if where[0] == "sqlite" and not create and not Path(where[1]).is_file():
        raise FileNotFoundError(f"there is no cache at {cache} (no such file)")
    with _lock:
        store = _opened.get(where)
        if store is None:
            store = _opened[where] = RedisStore(where[1]) if where[0] == "redis" else SQLiteStore(where[1])
        _named[cache] = store
    return store
