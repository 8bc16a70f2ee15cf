"""``RedisStore``: limits kept in Redis, shared by every process that names the same store and key.

Each limit key's state is a pacer's, in two Redis keys (``_lease.lua`` says what they hold), changed
only by one Lua script, atomically: a call reports what the process did and books its next lease,
in one round trip. The calls run on a small pool of threads of the store's, so that neither a sync
caller nor an event loop ever blocks on Redis: a pacer asks for its next lease before the current one
runs out. A call that fails or does not answer within ``timeout`` (Redis down, slow, or gone for a
restart) puts the pacer on its own share of the limit until Redis answers again (``SharedPacer``
says how); the store logs that once per outage, and once when Redis is back.
"""

from __future__ import annotations

import logging
import math
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from importlib import resources
from typing import Any, ClassVar, TypeVar

try:
    import redis
    from redis.backoff import NoBackoff
    from redis.client import PubSub, PubSubWorkerThread
    from redis.retry import Retry
except ImportError as exc:  # pragma: no cover - exercised in a subprocess without redis
    from wrapper.extras import install_hint

    raise ImportError(
        f"a Redis limit store needs redis-py, which is not installed: {install_hint('redis')}"
    ) from exc

from . import _constants as constants
from ._constants import RETRY
from ._pacer import checked_limit
from ._shared import SharedPacer
from ._store import SCHEMES, Limits, checked_limits

__all__ = ["TIMEOUT", "RedisStore"]

logger = logging.getLogger("wrapper")

TIMEOUT = 0.25
"""Seconds a call to Redis may take before the store counts as away (half a lease)."""
PREFIX = "completion-clients:limit"
"""What every Redis key of the store begins with, unless it is given another prefix."""
_THREADS = 2  # calls to Redis at once, per process: each a round trip of a fraction of a millisecond

T = TypeVar("T")


def _unheard(error: BaseException, subscription: PubSub, listener: PubSubWorkerThread) -> None:
    """The store stopped answering the subscription: try again a while later (pauses then come with the
    calls, as the calls themselves fall back on a share)."""
    time.sleep(RETRY)


def _script() -> str:
    """The lease script, after the lines that set its constants."""
    lines = [f"local {name} = {value!r}" for name, value in constants.SCRIPT.items()]
    return "\n".join([*lines, resources.files(__package__).joinpath("_lease.lua").read_text()])


class RedisStore:
    """Limits in Redis: ``RedisStore("redis://host:6379/0")`` (a URL as redis-py reads it: ``rediss://``
    for TLS, a password in it, ``unix://`` for a socket), or ``RedisStore(redis.Redis(...))`` for a client
    of your own (its timeouts and retries then decide when the store counts as away).

    ``prefix`` begins every Redis key the store writes. ``timeout`` is how long a call may take before
    the pacers fall back on their share (URL only). ``pacer(key, ...)`` is the pacer of a limit key.
    ``round_trips`` counts the calls made to Redis and ``waited`` the requests that waited for one.
    """

    _BY_URL: ClassVar[dict[tuple[int, str], RedisStore]] = {}
    _BY_URL_LOCK: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, server: str | redis.Redis, *, prefix: str = PREFIX, timeout: float = TIMEOUT) -> None:
        if isinstance(server, str):
            if not server.startswith(SCHEMES):
                raise ValueError(f"RedisStore: the URL must begin with one of {', '.join(SCHEMES)}")
            timeout = checked_limit("timeout", timeout) or TIMEOUT
            self.url: str | None = server
            self._redis = redis.Redis.from_url(
                server, socket_timeout=timeout, socket_connect_timeout=timeout, retry=Retry(NoBackoff(), 0)
            )
        elif isinstance(server, redis.Redis):
            self.url = None
            self._redis = server
        else:
            raise TypeError(
                f"RedisStore takes a redis:// URL or a redis.Redis client; got {type(server).__name__}"
            )
        if not isinstance(prefix, str) or not prefix:
            raise ValueError(f"RedisStore: prefix must be a non-empty string; got {prefix!r}")
        self.prefix = prefix
        self.channel = f"{prefix}:pauses"
        self.timeout = timeout
        self._keys: dict[str, list[SharedPacer]] = {}  # each state key's pacers
        self._script = self._redis.register_script(_script())
        self._pacers: dict[Limits, SharedPacer] = {}
        self._lock = threading.Lock()
        self._away = False
        self.round_trips = 0
        self.waited = 0
        self._started()

    @classmethod
    def of(cls, url: str) -> RedisStore:
        """The store of ``url`` in this process: one per URL, so its pacers and connections are shared."""
        with cls._BY_URL_LOCK:
            store = cls._BY_URL.get((os.getpid(), url))
            if store is None:
                store = cls._BY_URL[(os.getpid(), url)] = cls(url)
            return store

    def _started(self) -> None:
        """This process's identity among the store's users, and its threads (again in a forked child)."""
        self._pid = os.getpid()
        self.process = f"{socket.gethostname()}:{self._pid}:{secrets.token_hex(4)}"
        self._calls = ThreadPoolExecutor(_THREADS, thread_name_prefix="limit-store")
        self._listener: PubSubWorkerThread | None = None
        self._listen_at = -math.inf

    def _listen(self) -> None:
        """Hear the pauses other processes publish (the caller holds the lock), on a thread of the store's;
        while the store is away, its calls bring them (a subscription is tried again every ``RETRY``)."""
        now = time.monotonic()
        if self._listener is not None or now < self._listen_at:
            return
        self._listen_at = now + RETRY
        subscription = self._redis.pubsub(ignore_subscribe_messages=True)
        try:
            subscription.subscribe(**{self.channel: self._paused})
        except redis.RedisError:
            subscription.close()
            return
        self._listener = subscription.run_in_thread(sleep_time=0.1, daemon=True, exception_handler=_unheard)

    def _paused(self, message: dict[str, Any]) -> None:
        """Another process met a 429: the pacers of its limit pause for its Retry-After."""
        state, process, seconds = message["data"].decode().split("\n")
        if process != self.process:
            for pacer in self._keys.get(state, ()):
                pacer.pause(float(seconds))

    def pacer(
        self,
        key: str,
        requests_per_minute: float | None = None,
        tokens_per_minute: float | None = None,
        *,
        adaptive: bool = True,
    ) -> SharedPacer:
        """The pacer of ``key`` at these limits (None: none, adapting to 429s), made on first use."""
        limits = checked_limits(key, requests_per_minute, tokens_per_minute, adaptive)
        with self._lock:
            pacer = self._pacers.get(limits)
            if pacer is None:
                pacer = self._pacers[limits] = SharedPacer(self, *limits)
                self._keys.setdefault(self.state_key(key), []).append(pacer)
            return pacer

    def state_key(self, key: str) -> str:
        """The Redis key of a limit key's state (``{key}``: its keys share one slot of a cluster)."""
        return f"{self.prefix}:{{{key}}}"

    def submit(self, call: Callable[[], T]) -> Future[T]:
        """Run ``call`` on the store's threads (started again in a forked child, which has none)."""
        with self._lock:
            if self._pid != os.getpid():
                self._started()
            self._listen()
            return self._calls.submit(call)

    def lease(self, key: str, arguments: Sequence[str]) -> list[str]:
        """One call of the lease script for ``key``: one round trip (a store that lost its scripts, being
        restarted, takes two)."""
        with self._lock:
            self.round_trips += 1
        state = self.state_key(key)
        answer: list[Any] = self._script(
            keys=[state, f"{state}:processes"], args=[self.process, *arguments, self.channel]
        )
        return [value.decode() if isinstance(value, bytes) else str(value) for value in answer]

    def lost_a_wait(self) -> None:
        """A request waited for a call to Redis and could have gone sooner: counted in ``waited``."""
        with self._lock:
            self.waited += 1

    def away(self, error: BaseException, pacing: str) -> None:
        """A call failed: the first since Redis last answered is logged, saying how the process paces now."""
        with self._lock:
            first, self._away = not self._away, True
        if first:
            logger.warning(
                "the limit store at %s is away (%s: %s): each limit is paced to this process's share (%s) "
                "until it answers again",
                self,
                type(error).__name__,
                error,
                pacing,
            )

    def back(self) -> None:
        """A call worked: logged if Redis was away."""
        with self._lock:
            was, self._away = self._away, False
        if was:
            logger.warning("the limit store at %s answers again: the limits are shared again", self)

    def close(self) -> None:
        """Give back the budget this process's pacers hold unused, and close the connections."""
        for pacer in list(self._pacers.values()):
            pacer.close()
        self._calls.shutdown(wait=True)
        if self._listener is not None:
            self._listener.stop()  # its thread ends with its wait for a message, closing its connection
        self._redis.close()

    def __reduce__(self) -> tuple[Callable[[str], RedisStore], tuple[str]]:
        """A store travels (to Ray's workers, say) as its URL: each process has its own connections."""
        if self.url is None:
            raise TypeError(
                "a RedisStore made from a redis.Redis client cannot be sent to another process: give its URL"
            )
        return RedisStore.of, (self.url,)

    def __repr__(self) -> str:
        kwargs = self._redis.connection_pool.connection_kwargs
        where = kwargs.get("path") or f"{kwargs.get('host', 'localhost')}:{kwargs.get('port', 6379)}"
        return f"RedisStore({where}/{kwargs.get('db', 0)})"

    __str__ = __repr__
