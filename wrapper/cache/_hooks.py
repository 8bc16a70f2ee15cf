"""The cache on each call: ``cached_calls``, the hook factory of a call whose options name a cache
(``Api.cache_hooks``).

A call whose options name a cache (``cache=``) is answered from it when its key is there (the
attempt loop then sends nothing), waits for an identical call already under way in the process
instead of sending its own, or else sends its request and stores the answer: a completion once it
is parsed, a stream once it has ended complete. Errors, a stream cut, failed or closed early, and
what failed the wire's checks never reach ``succeeded`` or a clean ``finished``, so they are never
stored. ``cache_read=False`` sends even on a hit (and replaces the entry), ``cache_write=False``
stores nothing; ``cache_sample`` is the sample index of a request that samples. A call made through
``with_raw_response`` neither reads nor writes it: a cache has no HTTP response to give back.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from wrapper import AsyncClient, CallHooks, CallInfo

from ._cache import Cache, cache_of
from ._entry import Entry, Recording
from ._flight import Flight
from ._key import request_key
from ._open import open_store

if TYPE_CHECKING:
    from wrapper import Completion, CompletionChunk

__all__ = ["cached_calls"]


def cached_calls(call: CallInfo) -> CallHooks:
    """The cache's hooks for ``call``, whose options name a cache."""
    return _Cached(call, cache_of(open_store(call.options.cache)))


class _Cached(CallHooks):
    """One call's use of the cache: its key, the flight it leads, the stream it records."""

    def __init__(self, call: CallInfo, cache: Cache) -> None:
        super().__init__(call)
        self.cache = cache
        self.key = ""
        self.hit = False
        self.flight: Flight | None = None  # the flight this call leads, until it lands
        self.recording = Recording() if call.stream else None
        # A sync call stores a stream's end at once, even where an event loop runs (a notebook's): its
        # next call reads the store directly, not behind the store's thread.
        self.keep_stream = cache.put_soon if isinstance(call.client, AsyncClient) else cache.put

    def _keyed(self, url: str, body: bytes) -> bool:
        """Set the call's key; whether it reads the cache (not with ``cache_read=False``)."""
        call = self.call
        client, options = call.client, call.options
        sent = json.loads(body.decode())  # decoded first: json.loads of bytes guesses their encoding
        self.key = request_key(client.API, client.base_url, call.model, url, sent, options.cache_sample)
        return bool(options.cache_read)

    def _left(self) -> float | None:
        deadline = self.call.deadline
        return None if deadline is None else max(deadline - time.monotonic(), 0.0)

    def answer(self, url: str, body: bytes) -> Completion | Sequence[CompletionChunk] | None:
        if not self._keyed(url, body):
            return None
        while True:
            landings = self.cache.flights.landings
            answer, flight = self._found(self.cache.get(self.key))
            if flight is None:
                if self.flight is None or self.cache.flights.landings == landings:
                    return answer
                return self._stored_meanwhile(self.cache.get(self.key))
            landed = flight.wait(self._left())
            if landed is not None and (answer := self._answer(landed)) is not None:
                return answer
            if not flight.landed:  # the deadline came first: send it alone
                return None

    async def aanswer(self, url: str, body: bytes) -> Completion | Sequence[CompletionChunk] | None:
        import asyncio

        if not self._keyed(url, body):
            return None
        while True:
            landings = self.cache.flights.landings
            answer, flight = self._found(await self.cache.aget(self.key))
            if flight is None:
                if self.flight is None or self.cache.flights.landings == landings:
                    return answer
                return self._stored_meanwhile(await self.cache.aget(self.key))
            try:
                async with asyncio.timeout(self._left()):
                    landed = await flight.await_entry()
            except TimeoutError:
                return None  # the deadline came first: send it alone
            if landed is not None and (answer := self._answer(landed)) is not None:
                return answer

    def _found(self, entry: Entry | None) -> tuple[Completion | list[CompletionChunk] | None, Flight | None]:
        """The answer in a stored ``entry``; else the flight of an identical call to wait for, or (None,
        None) when this call leads one (it sends, and lands it when it is over)."""
        if entry is not None and (answer := self._answer(entry)) is not None:
            return answer, None
        flight, leads = self.cache.flights.claim(self.key)
        if leads:
            self.flight = flight
            return None, None
        return None, flight

    def _stored_meanwhile(self, entry: Entry | None) -> Completion | list[CompletionChunk] | None:
        """The answer of a call that leads its flight, looking in the store once more because a flight
        landed between its first look and its claim: an identical call may have stored its answer
        meanwhile (it would be sent twice). Found, the flight lands with it; else None: it is sent."""
        if entry is None or (answer := self._answer(entry)) is None:
            return None
        self._land(entry)
        return answer

    def _answer(self, entry: Entry) -> Completion | list[CompletionChunk] | None:
        return self.cache.read(entry, stream=self.call.stream)

    def answered(self, completion: Completion | None) -> None:
        self.hit = True

    def succeeded(self, completion: Completion | None) -> None:
        if completion is not None:
            self._keep(Entry.of_completion(completion), self.cache.put)

    async def asucceeded(self, completion: Completion | None) -> None:
        if completion is not None and self.key:
            entry = Entry.of_completion(completion)
            if self.call.options.cache_write:
                await self.cache.aput(self.key, entry)
            self._land(entry)

    def chunk(self, chunk: CompletionChunk) -> None:
        if self.recording is not None and not self.hit:
            self.recording.add(chunk)

    def finished(self, error: BaseException | None) -> None:
        if error is None and self.recording is not None and not self.hit and self.recording:
            self._keep(self.recording.entry(), self.keep_stream)
        self._land(None)  # a failure (or an answer already landed): waiters send their own

    def _keep(self, entry: Entry, put: Any) -> None:
        if not self.key:  # never asked (``with_raw_response``, which a cache cannot answer): not kept
            return
        if self.call.options.cache_write:
            put(self.key, entry)
        self._land(entry)

    def _land(self, entry: Entry | None) -> None:
        if self.flight is not None:
            self.flight.land(entry)
            self.flight = None
