"""What reading a body needs besides its bytes: proof that a stream ended, and the call's deadline.

A stream is complete when a chunk carried the finish reason (Scale sends it on the last one); a body
that ends before one did raises ``IncompleteStreamError`` with the text received (``Received``).
The deadline bounds a body as it bounds the rest of the call, a stream's or a whole response's:
async clients wait under ``asyncio.timeout`` (for a whole response, ``awaited_in_time``; for each
event of a stream, ``in_time``; only when the call has a deadline); sync ones check it between a
stream's events, and a ``Watchdog`` shuts the socket down when it passes, since httpcore times each
read of a body with the read timeout it took when the body began, not with the time left.
"""

from __future__ import annotations

import contextlib
import math
import socket
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Protocol, TypeVar

from wrapper._generated.exceptions import APITimeoutError, IncompleteStreamError

from .transports.timers import TIMERS, Timer

if TYPE_CHECKING:
    import httpx

    from .results import CompletionChunk

__all__ = ["DeadlinePassed", "Received", "Watchdog", "awaited_in_time", "in_time"]

T = TypeVar("T")


class AttemptsMade(Protocol):
    """What ``DeadlinePassed.error`` reads of a call's ``retries.Attempts`` (which imports this module)."""

    made: int

    def ran_out(self, after: str, where: str = "") -> str: ...


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


class Received:
    """What a stream's body delivered so far: its texts, and whether a chunk carried the finish reason."""

    def __init__(self) -> None:
        self.texts: list[str] = []
        self.finished = False

    def add(self, chunk: CompletionChunk) -> CompletionChunk:
        self.texts.append(chunk.text)
        self.finished = self.finished or chunk.finish_reason is not None
        return chunk

    def too_late(self) -> DeadlinePassed:
        """What to raise when the call's deadline passed while the body was read."""
        return DeadlinePassed(len(self.texts))

    def check_complete(self, request: httpx.Request) -> None:
        """At the end of the body: ``IncompleteStreamError`` unless a chunk carried the finish reason."""
        if not self.finished:
            text = "".join(self.texts)
            raise IncompleteStreamError(
                f"the stream ended without its final chunk (none carried a finish_reason) after "
                f"{_plural(len(self.texts), 'chunk')}; the {_plural(len(text), 'character')} received "
                "are in .text",
                request=request,
                text=text,
            )


class DeadlinePassed(Exception):
    """Raised once the call's deadline has passed while a response was read; ``error`` is the typed one.

    ``chunks``: how many chunks a stream had delivered (None for a response read whole).
    """

    def __init__(self, chunks: int | None = None) -> None:
        super().__init__(chunks)
        self.chunks = chunks

    def error(self, request: httpx.Request, attempts: AttemptsMade) -> APITimeoutError:
        """The ``APITimeoutError`` saying so, with the attempts made and the time taken."""
        made = _plural(attempts.made, "attempt")
        if self.chunks is None:
            message = attempts.ran_out(made, "before the response was complete, ")
        else:
            where = "before the stream's first chunk, " if not self.chunks else "while the stream was read, "
            message = attempts.ran_out(f"{made} and {_plural(self.chunks, 'chunk')}", where)
        return APITimeoutError(message, request=request)


class Watchdog:
    """Shuts a sync response's socket down ``seconds`` from now, so a read blocked on it ends then.

    Nothing to do without a deadline (``inf``), or without a socket to shut (a mock transport).
    ``stop()`` before the response is closed: the socket then goes back to the pool untouched, unless
    ``fired`` (then it is shut, and the pool drops it).
    """

    def __init__(self, response: httpx.Response, seconds: float) -> None:
        self._lock = threading.Lock()
        self._timer: Timer | None = None
        self.fired = False
        stream = response.extensions.get("network_stream")
        sock = None if stream is None or seconds == math.inf else stream.get_extra_info("socket")
        if isinstance(sock, socket.socket):
            self._socket = sock
            self._timer = TIMERS.at(time.monotonic() + max(seconds, 0.0), self._fire)

    def _fire(self) -> None:
        with self._lock:
            if self._timer is not None:
                self.fired = True
                with contextlib.suppress(OSError):  # closed meanwhile
                    # socket.socket's own: an SSLSocket's would unwrap it under the reading thread
                    socket.socket.shutdown(self._socket, socket.SHUT_RDWR)

    def stop(self) -> None:
        """After it returns, the socket is never shut by this watchdog."""
        with self._lock:
            timer, self._timer = self._timer, None
        if timer is not None:
            TIMERS.cancel(timer)


_GRACE = 0.05
"""Seconds past the deadline ``awaited_in_time`` waits before it cancels: the attempt's own timeouts,
cut to the deadline, end their waits first (a connection cancelled while httpcore establishes it stays
in its pool, holding a slot: httpcore#830, #1093), so cancelling is left for a body still coming."""


async def awaited_in_time(awaitable: Awaitable[T], seconds: float) -> T:
    """``await awaitable`` (a whole response, its body read), cancelled with ``DeadlinePassed`` if it
    takes more than ``seconds`` (and ``_GRACE``)."""
    import asyncio  # not at module level: `import wrapper.scale` stays light

    timeout = asyncio.timeout(max(seconds, 0.0) + _GRACE)
    try:
        async with timeout:
            return await awaitable
    except TimeoutError as exc:
        if timeout.expired():
            raise DeadlinePassed() from exc
        raise


def in_time(events: AsyncIterator[T], when: float | None, late: Callable[[], Exception]) -> AsyncIterator[T]:
    """``events``, each awaited until the loop's time ``when`` at the latest (then ``late()`` is
    raised); ``events`` itself when there is no deadline (None), so no stream pays for one unasked."""
    return events if when is None else _in_time(events, when, late)


async def _in_time(events: AsyncIterator[T], when: float, late: Callable[[], Exception]) -> AsyncIterator[T]:
    import asyncio  # not at module level: `import wrapper.scale` stays light

    while True:
        timeout = asyncio.timeout_at(when)  # each wait on its own: never across a yield
        try:
            async with timeout:
                event = await anext(events)
        except StopAsyncIteration:
            return
        except TimeoutError as exc:
            if timeout.expired():
                raise late() from exc
            raise
        yield event
