"""One connection pool per event loop, closed when its loop shuts down.

A pool's connections belong to the loop that opened them, so an async client keeps one pool per
loop: ``asyncio.run(...)`` twice, or a loop per thread, each get their own. Each pool is watched by
a small async generator started in its loop: ``asyncio.run`` (and every runner that calls
``loop.shutdown_asyncgens()``, as pytest-asyncio's does) closes it before closing the loop, and the
generator then closes the pool, so nothing is left open when a loop ends, closed client or not.

A client collected without ``close()`` takes its watchers with it, and the loop closes each (asyncio
closes an async generator that is collected), which closes its pool quietly. For that the pools are
held by their loop's entry in ``_OPEN`` until closed, not by their client alone: collected with it,
their own finalizers would run first, each warning that it was not closed ("Unclosed client
session", "Unclosed connector", "unclosed transport").

A loop closed without ``shutdown_asyncgens()`` (``loop.close()`` by hand) leaves its pool open: once
the loop is closed nothing can close it (aiohttp's and asyncio's closing schedules callbacks on the
loop, which a closed loop refuses), so close the client before such a loop.

In a forked child every pool inherited from the parent is abandoned unclosed (``fork``): its
sockets are the parent's, and closing them would send TLS close_notify on the parent's connections.
"""

from __future__ import annotations

import asyncio
import os
import threading
import weakref
from collections.abc import AsyncGenerator, Callable
from typing import Generic, Protocol, TypeVar

from . import fork

__all__ = ["PerLoop"]


class _Pool(Protocol):
    async def aclose(self) -> None: ...


P = TypeVar("P", bound=_Pool)

_OPEN: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, set[_Pool]] = weakref.WeakKeyDictionary()
"""The pools open in each loop, until closed (see the module); a loop collected lets its pools go."""
_OPEN_LOCK = threading.Lock()  # loops in several threads open and close pools


class PerLoop(Generic[P]):
    """The pool ``factory`` built for each event loop that asks, until ``aclose()``."""

    def __init__(self, factory: Callable[[], P]) -> None:
        self._factory = factory
        self._lock = threading.Lock()  # loops in several threads may ask at once
        self._pools: dict[asyncio.AbstractEventLoop, tuple[P, AsyncGenerator[None, None]]] = {}
        fork.register(self)

    def after_fork(self) -> None:
        """In a forked child: abandon the parent's pools (see the module)."""
        self._lock = threading.Lock()  # a thread of the parent may have held it at the fork
        fork.abandon(self._pools)
        self._pools = {}

    def ready(self) -> P | None:
        """The running loop's pool if it is open already (no waiting), else None."""
        entry = self._pools.get(asyncio.get_running_loop())
        return None if entry is None else entry[0]

    async def get(self) -> P:
        """The running loop's pool, built (and watched) on its first call."""
        loop = asyncio.get_running_loop()
        entry = self._pools.get(loop)
        if entry is not None:
            return entry[0]
        pool = self._factory()
        watcher = self._watch(loop, pool)
        await anext(watcher)  # its first step registers it with the loop, which will close it at shutdown
        with _OPEN_LOCK:
            _OPEN.setdefault(loop, set()).add(pool)
            for other in [other for other in _OPEN if other.is_closed()]:
                del _OPEN[other]  # a loop closed without shutting down its generators: nothing can close them
        with self._lock:
            self._pools[loop] = (pool, watcher)
            for other in [other for other in self._pools if other.is_closed()]:
                del self._pools[other]
        return pool

    async def _watch(self, loop: asyncio.AbstractEventLoop, pool: P) -> AsyncGenerator[None, None]:
        """Yields once, then waits: once closed (its loop shutting down, or ``aclose``), closes ``pool``
        (unless this is a forked child, which inherited ``pool`` from its parent)."""
        pid = os.getpid()
        try:
            yield
        finally:
            if os.getpid() == pid:
                with self._lock:
                    if self._pools.get(loop, (None,))[0] is pool:
                        del self._pools[loop]
                try:
                    await pool.aclose()
                finally:
                    with _OPEN_LOCK:
                        _OPEN.get(loop, set()).discard(pool)

    async def aclose(self) -> None:
        """Close this loop's pool now, and every other loop's pool from within that loop."""
        with self._lock:
            entries = list(self._pools.items())
        here = asyncio.get_running_loop()
        for loop, (_, watcher) in entries:
            if loop is here:
                await watcher.aclose()
            elif loop.is_running():
                asyncio.run_coroutine_threadsafe(watcher.aclose(), loop)
