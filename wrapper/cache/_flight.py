"""Identical requests under way at once in one process: the first is sent, the others wait for it.

``Flights.claim(key)`` makes the caller the leader of ``key`` (None) or gives it the ``Flight`` to wait
for; the leader ends it with ``land(entry)`` (its answer) or ``land(None)`` (it failed, or its answer
is not one to share: each waiter then tries again, and one of them leads). Sync and async callers, of
any thread and event loop, share one ``Flights``.
"""

from __future__ import annotations

import asyncio
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._entry import Entry

__all__ = ["Flight", "Flights"]


class Flight:
    """One request under way; waiters get its entry, or None if it gave none."""

    __slots__ = ("_entry", "_flights", "_key", "_landed", "_landing", "_waiters")

    def __init__(self, flights: Flights, key: str) -> None:
        self._flights = flights
        self._key = key
        self._landed = False
        self._entry: Entry | None = None
        self._landing: threading.Event | None = None  # what sync waiters wait on, made by the first

        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []

    @property
    def landed(self) -> bool:
        """Whether the leader has landed it."""
        return self._landed

    def land(self, entry: Entry | None) -> None:
        """The leader's answer (None: none to share); wakes every waiter, sync or async. Once: a later
        call does nothing."""
        with self._flights._lock:
            if self._landed:
                return
            if self._flights._under_way.get(self._key) is self:
                del self._flights._under_way[self._key]
            self._flights.landings += 1
            self._entry = entry
            self._landed = True
            landing, waiters, self._waiters = self._landing, self._waiters, []
        if landing is not None:
            landing.set()
        for loop, future in waiters:
            if not loop.is_closed():
                loop.call_soon_threadsafe(_resolve, future)

    def wait(self, timeout: float | None = None) -> Entry | None:
        """The leader's entry, once it has landed (None: none, or ``timeout`` seconds passed first)."""
        with self._flights._lock:
            if self._landed:
                return self._entry
            if self._landing is None:
                self._landing = threading.Event()
            landing = self._landing
        landing.wait(timeout)
        return self._entry

    async def await_entry(self) -> Entry | None:
        """``wait`` for async callers: the event loop runs on meanwhile (bound it with
        ``asyncio.timeout``)."""
        with self._flights._lock:
            if self._landed:
                return self._entry
            loop = asyncio.get_running_loop()
            future = loop.create_future()
            self._waiters.append((loop, future))
        await asyncio.shield(future)  # a waiter's cancellation leaves the flight as it is
        return self._entry


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


class Flights:
    """The requests under way in this process, by key."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._under_way: dict[str, Flight] = {}
        self.landings = 0
        """How many flights have landed: a caller that saw it change between its look in the store and
        its claim looks again (the answer of an identical call may have been stored meanwhile)."""

    def claim(self, key: str) -> tuple[Flight, bool]:
        """``(flight, True)``: the caller leads ``key``'s flight and must ``land`` it; ``(flight, False)``:
        another caller leads it, wait for it."""
        with self._lock:
            flight = self._under_way.get(key)
            if flight is not None:
                return flight, False
            flight = self._under_way[key] = Flight(self, key)
            return flight, True
