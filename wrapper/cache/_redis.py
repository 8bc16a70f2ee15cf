"""``RedisStore``: the cache in Redis, for many machines (redis-py, the ``redis`` extra).

Entries are plain string keys under a prefix, with Redis's own expiry for ``ttl``. The store uses
redis-py's sync client, which is safe for many threads and forks (its pool opens new connections in
a child); async clients run its calls on the store's threads, so a cancelled task never leaves a
connection with a reply in flight (the redis-py asyncio bug behind CVE-2023-28858/28859, where a
connection handed the next command another's reply). A failed command is retried once at once (a
connection the server closed), and a command that gets no answer in ``timeout`` seconds fails.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from ._store import Errors, Store, StoreStats

if TYPE_CHECKING:
    import redis

__all__ = ["SCHEMES", "RedisStore"]

SCHEMES = ("redis", "rediss", "unix")
"""The URL schemes of Redis (``rediss``: over TLS; ``unix``: a local socket)."""
_BATCH = 1000


class RedisStore(Store):
    """Entries in the Redis at ``url`` (``redis://host:6379/0``, ``rediss://`` for TLS), under ``prefix``.

    Many processes on many machines share it: what one stored, the others read. ``clear`` and
    ``stats`` see the keys under ``prefix`` only, so a cache can share a database with other data.
    """

    def __init__(
        self,
        url: str = "redis://localhost:6379/0",
        *,
        ttl: float | None = None,
        errors: Errors = "warn",
        prefix: str = "wrapper:cache:",
        timeout: float = 2.0,
    ) -> None:
        super().__init__(ttl=ttl, errors=errors)
        try:
            import redis
            from redis.backoff import NoBackoff
            from redis.retry import Retry
        except ImportError:
            raise ImportError("RedisStore needs redis-py: pip install 'completion-clients[redis]'") from None
        if urlsplit(url).scheme not in SCHEMES:
            raise ValueError(f"a Redis URL starts with {', '.join(s + '://' for s in SCHEMES)}; got {url!r}")
        if not prefix:
            raise ValueError("prefix must not be empty: clear() would remove every key of the database")
        self._url = url
        self.prefix = prefix
        self._client: redis.Redis = redis.Redis.from_url(
            url, socket_timeout=timeout, socket_connect_timeout=timeout, retry=Retry(NoBackoff(), 1)
        )
        self._pattern = re.sub(r"([*?\[\]\\])", r"\\\1", prefix) + "*"

    @property
    def location(self) -> str:
        parts = urlsplit(self._url)
        if parts.password is None:
            return self._url
        netloc = parts.netloc.rpartition("@")[2]
        user = f"{parts.username}:***@" if parts.username else ":***@"
        return urlunsplit(parts._replace(netloc=user + netloc))

    def load(self, key: str) -> bytes | None:
        value: Any = self._client.get(self.prefix + key)
        return None if value is None else bytes(value)

    def save(self, key: str, value: bytes) -> None:
        ttl = None if self.ttl is None else max(1, round(self.ttl * 1000))
        self._client.set(self.prefix + key, value, px=ttl)

    def _keys(self) -> Any:
        return self._client.scan_iter(match=self._pattern, count=_BATCH)

    def clear(self) -> int:
        removed = 0
        batch: list[Any] = []
        for name in self._keys():
            batch.append(name)
            if len(batch) == _BATCH:
                removed += int(self._client.unlink(*batch))
                batch.clear()
        if batch:
            removed += int(self._client.unlink(*batch))
        return removed

    def stats(self) -> StoreStats:
        size = 0
        names = list(self._keys())
        for start in range(0, len(names), _BATCH):
            pipe = self._client.pipeline(transaction=False)
            for name in names[start : start + _BATCH]:
                pipe.strlen(name)
            size += sum(int(length) for length in pipe.execute())
        return StoreStats(self.location, len(names), size, self.ttl)

    def close(self) -> None:
        self._client.close()
