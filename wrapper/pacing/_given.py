"""What callers pass to share a limit: ``limit_store=`` (a Redis URL or a store) and ``limit_key=``.

``limit_store`` turns a ``limit_store=`` argument into a store; ``limit_key`` is the key a deployment's
limit has unless one is named: its API, the host of its base URL and its model. ``limit_for`` is what
the batch, the router and the command line pace a deployment by: the limit of its key in the store
given, or a ``Pacer`` of its own when none is.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from ._pacer import Pacer
from ._store import SCHEMES, LimitStore, SharedLimit, checked_key

__all__ = ["limit_for", "limit_key", "limit_store"]


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


def limit_key(api: str, base_url: str, model: str) -> str:
    """The key of a deployment's limit unless one is named: its API, base URL host (and port) and model,
    so that every process calling that deployment names the same limit, whatever its URL's path."""
    split = urlsplit(str(base_url))
    host = (split.hostname or "").lower()
    where = f"{host}:{split.port}" if split.port else host
    return f"{api} {where or str(base_url).rstrip('/')} {model}"


def limit_for(
    api: str,
    base_url: str,
    model: str,
    requests_per_minute: float | None,
    tokens_per_minute: float | None,
    *,
    store: object = None,
    key: object = None,
) -> SharedLimit:
    """What paces a deployment (``api`` at ``base_url``, called with ``model``) to these limits: with a
    ``store`` (``limit_store=``), the limit of ``key`` (``limit_key=``; None: ``limit_key``'s) in it,
    shared with every caller naming them; otherwise a ``Pacer`` of its own. Bad values raise naming the
    argument and its rule."""
    given = limit_store(store)
    if given is None:
        if key is not None:
            raise ValueError(
                "limit_key names a limit kept in a store: give limit_store too (a redis:// URL, a "
                f"RedisStore or a LocalStore); got limit_key={key!r} and no limit_store"
            )
        return Pacer(requests_per_minute, tokens_per_minute)
    named = limit_key(api, base_url, model) if key is None else checked_key(key)
    return given.pacer(named, requests_per_minute, tokens_per_minute)
