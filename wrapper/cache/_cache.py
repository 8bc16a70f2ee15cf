"""A store as calls use it (``Cache``): a failing store is a miss, async calls run off the event loop,
and identical requests under way at once are sent once.

A store that fails (unreachable, full, corrupt, an entry that does not read back) never gives a
wrong answer: the call goes to the server. With ``errors="warn"`` a warning is logged once per outage
(on the ``wrapper.cache`` logger) and the store is left alone for ``RETRY_AFTER`` seconds, so a batch
does not wait on a dead server at every prompt; with ``errors="raise"`` the call raises ``CacheError``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from ._entry import CorruptEntry, Entry
from ._flight import Flights
from ._store import Store

if TYPE_CHECKING:
    from wrapper import Completion, CompletionChunk

__all__ = ["RETRY_AFTER", "Cache", "CacheError", "cache_of"]

logger = logging.getLogger("wrapper.cache")

RETRY_AFTER = 5.0
"""Seconds a failed store is left alone before it is tried again."""
T = TypeVar("T")


class CacheError(Exception):
    """The response cache's store failed, and it was made with ``errors="raise"``."""


class Cache:
    """One store's use by calls: ``get``/``put`` (``aget``/``aput`` off the loop) and its ``flights``."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.flights = Flights()
        self._lock = threading.Lock()
        self._down_until = 0.0
        self._outage = False
        self._corrupt_seen = False
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._executor_pid = 0

    def get(self, key: str) -> Entry | None:
        """The entry under ``key``, or None: none, or the store failed (``CacheError`` if it raises)."""
        if self._resting():
            return None
        try:
            data = self.store.load(key)
        except Exception as exc:
            self._failed("read", exc)
            return None
        self._working()
        return None if data is None else self._decoded(key, data)

    def put(self, key: str, entry: Entry) -> None:
        """Store ``entry`` under ``key``; a failure is logged (or ``CacheError``), never the call's."""
        if self._resting():
            return
        try:
            self.store.save(key, entry.encode(key))
        except Exception as exc:
            self._failed("write", exc)
            return
        self._working()

    def read(self, entry: Entry, *, stream: bool) -> Completion | list[CompletionChunk] | None:
        """What ``entry`` answers: a stream's chunks or a completion, each ``cached``; None (a warning, or
        ``CacheError``) if it does not read back."""
        try:
            return entry.chunks() if stream else entry.completion()
        except CorruptEntry as exc:
            self._corrupt(exc)
            return None

    def put_soon(self, key: str, entry: Entry) -> None:
        """``put`` on the store's thread, without waiting for it: an async stream's end, on the event loop
        (the async calls' reads after it run on that thread too, so they find it)."""
        self._executor_now().submit(self.put, key, entry)

    async def aget(self, key: str) -> Entry | None:
        """``get`` on the store's threads: the event loop runs on meanwhile."""
        if self._resting():
            return None
        return await self._off_loop(self.get, key)

    async def aput(self, key: str, entry: Entry) -> None:
        """``put`` on the store's threads."""
        if self._resting():
            return
        await self._off_loop(self.put, key, entry)

    def _executor_now(self) -> concurrent.futures.ThreadPoolExecutor:
        """The store's thread (one: its calls run in the order they were made, a write before the reads
        after it), made in each process (a parent's thread is not in a child)."""
        if self._executor is None or self._executor_pid != os.getpid():
            with self._lock:
                if self._executor is None or self._executor_pid != os.getpid():
                    self._executor = concurrent.futures.ThreadPoolExecutor(
                        1, thread_name_prefix="wrapper-cache"
                    )
                    self._executor_pid = os.getpid()
        return self._executor

    async def _off_loop(self, function: Callable[..., T], *args: object) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._executor_now(), function, *args)

    def _decoded(self, key: str, data: bytes) -> Entry | None:
        try:
            return Entry.decode(key, data)
        except CorruptEntry as exc:
            self._corrupt(exc)
            return None

    def _corrupt(self, exc: CorruptEntry) -> None:
        if self.store.errors == "raise":
            raise CacheError(
                f"an entry of the response cache at {self.store.location} is corrupt: {exc}"
            ) from exc
        with self._lock:
            first, self._corrupt_seen = not self._corrupt_seen, True
        (logger.warning if first else logger.debug)(
            "an entry of the response cache at %s is corrupt (%s): the request goes to the server, "
            "and its answer replaces the entry",
            self.store.location,
            exc,
        )

    def _resting(self) -> bool:
        return self._down_until > time.monotonic()

    def _working(self) -> None:
        if self._outage:
            with self._lock:
                self._outage = False
            logger.info("the response cache at %s works again", self.store.location)

    def _failed(self, action: str, exc: Exception) -> None:
        message = f"the response cache at {self.store.location} could not {action} an entry ({exc!r})"
        if self.store.errors == "raise":
            raise CacheError(message) from exc
        with self._lock:
            first, self._outage = not self._outage, True
            self._down_until = time.monotonic() + RETRY_AFTER
        (logger.warning if first else logger.debug)(
            "%s: requests go to the server, and the cache is tried again in %g s", message, RETRY_AFTER
        )


_caches: weakref.WeakKeyDictionary[Store, Cache] = weakref.WeakKeyDictionary()
_caches_lock = threading.Lock()


def cache_of(store: Store) -> Cache:
    """The one ``Cache`` of ``store`` in this process (its flights and outage state are the store's)."""
    cache = _caches.get(store)
    if cache is None:
        with _caches_lock:
            cache = _caches.get(store)
            if cache is None:
                cache = _caches[store] = Cache(store)
    return cache
