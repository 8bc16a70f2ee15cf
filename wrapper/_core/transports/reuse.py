"""A connection goes back to its pool only when it is clean: nothing left over after its response.

A server whose response is framed wrongly (a ``Content-Length`` shorter than the body it wrote, or a
second response nobody asked for, written with the first) leaves bytes on a keep-alive connection
that the *next* request on it would read as its answer. httpcore keeps whatever h11 read past the
end of a response and starts the connection's next request with it (it only checks that an idle
socket has nothing to read, which catches what arrives later). So the httpx transports wrap each
response's body (``Settled``, ``AsyncSettled``): when it is closed after h11 read past its end, h11
is told the connection failed (``send_failed``), and httpcore closes the connection instead of
pooling it. The sync clients' own pool checks the same when a response hands its connection back
(``sync_pool``), without a wrapper. aiohttp drops a connection with leftovers when its response
ends; what arrives while a connection is idle is checked when the pool hands it out
(``aiohttp_transport``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import h11
import httpx

__all__ = ["AsyncSettled", "Settled"]

_DEPTH = 8
"""How far down to look for httpcore's HTTP/1.1 connection under a response's body: httpx's bound
stream, a transport's wrapper (the sync pool's), httpx's response stream, httpcore's pool stream,
its connection stream, the connection."""


def _h11(stream: object) -> h11.Connection | None:
    """The h11 state machine under an httpx response's body; None if it is not httpcore's HTTP/1.1 (a
    mock, HTTP/2, another transport). Read from the objects' ``__dict__``: a ``getattr`` that misses
    costs an exception, and this runs once a request."""
    for _ in range(_DEPTH):
        attributes = getattr(stream, "__dict__", None)
        if attributes is None:
            return None
        state = attributes.get("_h11_state")
        if state is not None:
            return state if isinstance(state, h11.Connection) else None
        stream = (
            attributes.get("_stream") or attributes.get("_httpcore_stream") or attributes.get("_connection")
        )
        if stream is None:
            return None
    return None


def _spoil_if_unclean(stream: object) -> None:
    """Mark the connection under ``stream`` failed if h11 read past the end of its response, so that
    httpcore closes it when the response is closed."""
    state = _h11(stream)
    if state is not None and state.their_state is h11.DONE and state.trailing_data[0]:
        state.send_failed()


class Settled(httpx.SyncByteStream):
    """A sync response's body whose connection is not pooled if bytes were left over after it."""

    def __init__(self, stream: httpx.SyncByteStream) -> None:
        self._stream = stream

    def __iter__(self) -> Iterator[bytes]:
        return iter(self._stream)  # not a generator of its own: no extra step per chunk

    def close(self) -> None:
        _spoil_if_unclean(self._stream)
        self._stream.close()


class AsyncSettled(httpx.AsyncByteStream):
    """``Settled`` for an async response's body."""

    def __init__(self, stream: httpx.AsyncByteStream) -> None:
        self._stream = stream

    def __aiter__(self) -> AsyncIterator[bytes]:
        return aiter(self._stream)

    async def aclose(self) -> None:
        _spoil_if_unclean(self._stream)
        await self._stream.aclose()
