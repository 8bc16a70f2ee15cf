"""``RedisStore``: the cache in Redis, for many machines (redis-py, the ``redis`` extra).

Entries are plain string keys under a prefix, with Redis's own expiry for ``ttl``. The store uses
redis-py's sync connections; async clients run its calls on the store's threads, so a cancelled task
never leaves a connection with a reply in flight (the redis-py asyncio bug behind
CVE-2023-28858/28859, where a connection handed the next command another's reply). A failed command is
retried once at once (a connection the server closed), and a command that gets no answer in
``timeout`` seconds fails.

A call's ``load`` and ``save`` each take an idle connection of the store's own (each thread one at a
time; a forked child opens its own, never its parent's) and send their command on it directly:
redis-py's client and pool around the same command (a pool look-up, a check of the socket, a retry
wrapper, metrics) cost twice the command itself (on redis-py 8.2, about 15 us of CPU against 8), most
of what a cache miss added. ``clear`` and ``stats`` use redis-py's client.
"""

from __future__ import annotations

import os
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
        self._pool: Any = self._client.connection_pool  # what its connections are made of
        self._retried = (redis.ConnectionError, redis.TimeoutError)
        self._idle: list[Any] = []  # connections of this process with no command under way
        self._pid = os.getpid()

    @property
    def location(self) -> str:
        parts = urlsplit(self._url)
        if parts.password is None:
            return self._url
        netloc = parts.netloc.rpartition("@")[2]
        user = f"{parts.username}:***@" if parts.username else ":***@"
        return urlunsplit(parts._replace(netloc=user + netloc))

    def load(self, key: str) -> bytes | None:
        value = self._command("GET", self.prefix + key)
        return None if value is None else bytes(value)

    def save(self, key: str, value: bytes) -> None:
        if self.ttl is None:
            self._command("SET", self.prefix + key, value)
        else:
            self._command("SET", self.prefix + key, value, "PX", max(1, round(self.ttl * 1000)))

    def _command(self, *args: Any) -> Any:
        """The reply to one command, sent on an idle connection (a new one if none is)."""
        if self._pid != os.getpid():  # a forked child: its parent's sockets are never used here
            self._idle, self._pid = [], os.getpid()
        idle = self._idle
        try:
            connection = idle.pop()
        except IndexError:
            connection = self._pool.connection_class(**self._pool.connection_kwargs)
        try:
            try:
                connection.send_command(*args)
                return connection.read_response()
            except self._retried:  # once more, on a new socket: the server may have closed this one
                connection.disconnect()
                connection.send_command(*args)
                return connection.read_response()
        except BaseException:
            connection.disconnect()  # a reply may be under way: no later command may read it
            raise
        finally:
            idle.append(connection)

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
        idle, self._idle = self._idle, []
        for connection in idle:
            connection.disconnect()
        self._client.close()
