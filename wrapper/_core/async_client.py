"""The async clients: requests through aiohttp or httpx (or httpx2: ``transports.choice.AsyncTransports``),
one attempt loop (``retries.arun``) for ``complete`` and for a stream's opening, whether a call is made
on a client or routed over several (``routing``)."""

from __future__ import annotations

import functools
import importlib
import math
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import aclosing
from typing import TYPE_CHECKING, Any, Self, cast

import httpx

from . import sse
from .client import (
    ClientCore,
    answered_completion,
    chunks_failed,
    is_event_stream,
    replayed,
    stream_failed,
    target_request,
)
from .error_mapping import invalid
from .headers import user_agent
from .options import Options
from .raw import RAW, AsyncWithRawResponse, AsyncWithStreamingResponse, RawResponse
from .results import ResponseHeaders, routed, whole
from .retries import Attempts, Picks, Target, arun
from .settings import Connect
from .stream_body import DeadlinePassed, Received, awaited_in_time, in_time
from .transports.choice import AsyncTransports
from .transports.environment import proxy_in_env, ssl_context
from .transports.library import HTTPX, Http, chosen, classes, core_name

if TYPE_CHECKING:
    from .results import Completion, CompletionChunk
    from .streams import AsyncCompletionStream
    from .transports.base import Request
    from .wires import StreamingWire

__all__ = ["AsyncClient", "acomplete_routed", "astream_routed", "load_ahead"]

Opened = tuple[httpx.Response, "CompletionChunk", AsyncIterator["CompletionChunk"]]
"""A stream's opening: its response, status checked, its first chunk and the others to come."""


def load_ahead(library: Http | None = None) -> None:
    """Load now what building an async client and its first call would otherwise load inside the event
    loop, where a web app builds its clients (its lifespan): aiohttp (170 modules, 0.13 s), httpx's
    anyio backend, the default pools' TLS context (a CA bundle: 25 to 45 ms) and the User-Agent (the
    package's metadata: 15 to 40 ms); asyncio's debug mode reported the first client's 0.39 s.

    Each API module calls it as it is imported, for the library ``COMPLETION_CLIENTS_HTTP`` names then
    (httpx if it names none it can load: the client's build says why); a client calls it for its own
    library (httpx2's, given an ``httpx2.AsyncClient``). What is loaded stays: later calls cost nothing.
    """
    if library is None:
        try:
            library = chosen()
        except (ValueError, ImportError):
            library = HTTPX
    import anyio._backends._asyncio  # noqa: F401  (what anyio.connect_tcp imports)

    from .transports import aiohttp_transport  # noqa: F401

    importlib.import_module(f"{core_name(library)}._backends.anyio")  # what httpcore's AutoBackend imports
    ssl_context(library)
    user_agent(library)


class AsyncClient(ClientCore):
    """A client over aiohttp or httpx (``transports.choice.AsyncTransports``): ``await close()``.

    It works from any event loop, with a connection pool of its own in each.
    """

    _HTTP_CLIENT = "httpx.AsyncClient | httpx2.AsyncClient"

    def __init__(self, connect: Connect, arguments: Mapping[str, Any]) -> None:
        http_client, limits = self._configure(connect, arguments, asynchronous=True)
        library = self._library
        load_ahead(library)
        self._transports = transports = AsyncTransports(
            cast("httpx.AsyncClient | None", http_client),  # httpx2's has httpx's API
            library=library,
            limits=limits,
            verify=functools.partial(ssl_context, library),
            proxy=proxy_in_env(),
        )
        self._pool_closed = lambda: transports.closed

    async def close(self) -> None:
        """Close the connection pools (its ``with_options`` copies' too); later calls are refused.

        On a ``with_options`` copy it closes the copy alone (``with_options``).
        """
        if self._closes_pool():
            await self._transports.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    @property
    def with_raw_response(self) -> AsyncWithRawResponse:
        """The same calls, returning the HTTP response: ``await .complete(...)`` gives a ``RawResponse``."""
        return AsyncWithRawResponse(self)

    @property
    def with_streaming_response(self) -> AsyncWithStreamingResponse:
        """``async with client.with_streaming_response.stream(...) as response:``: status, headers first."""
        return AsyncWithStreamingResponse(self)

    def _complete(self, model: str, prompt: str, kwargs: Mapping[str, Any]) -> Awaitable[Completion]:
        """``call``, the arguments split (a plain function: one coroutine fewer on every call's path)."""
        params, options = self._options.split(kwargs)
        return self.call(model, prompt, params, options)

    async def call(self, model: str, prompt: str, params: Mapping[str, Any], options: Options) -> Completion:
        """The async ``SyncClient.call``: ``complete`` with its keyword arguments split already."""
        with self._attempts(options, model, prompt, params, stream=False) as attempts:
            request = attempts.request = self._build(model, prompt, params, options, stream=False)
            answered = None if RAW.get() else answered_completion  # a cache has no HTTP response to give
            result = await arun(lambda _: self._send(request, attempts), attempts, answered)
            if attempts.hooks and not attempts.was_answered:
                await attempts.asucceeded(result.parse() if isinstance(result, RawResponse) else result)
            return cast("Completion", result)  # a RawResponse inside with_raw_response

    async def _send(
        self, request: Request, attempts: Attempts, route: str | None = None
    ) -> Completion | RawResponse:
        """One attempt of a completion."""
        sent = attempts.bounded(request)
        transport = self._transports.ready() or await self._transports.pick()
        started = time.perf_counter()
        left = attempts.left()
        try:
            if left == math.inf:
                reply = await transport.send(sent)
            else:  # the body too: a body trickled a byte at a time would outlast each read's timeout
                reply = await awaited_in_time(transport.send(sent), left)
        except DeadlinePassed:  # not an APIError: the attempt loop lets it through
            raise
        except Exception as exc:
            raise self._failed(sent, started, exc) from exc
        return self._result(self._checked(reply, sent, started), route)

    def _stream(self, model: str, prompt: str, kwargs: Mapping[str, Any]) -> AsyncCompletionStream:
        """The stream of a call (arguments checked now, the request sent on the first ``anext()``)."""
        from .streams import AsyncCompletionStream

        request, attempts = self._stream_call(model, prompt, kwargs)
        return AsyncCompletionStream(
            _streamed(attempts, lambda _, made: self._opening(request, made, None), self.API.streams)
        )

    async def _opening(self, request: Request, attempts: Attempts, route: str | None) -> Opened:
        """One attempt at a stream's opening (an API that does not stream: its completion as one chunk)."""
        if self.API.streams:
            return await self._open(request, attempts, route)
        token = RAW.set(True)
        try:
            raw = cast("RawResponse", await self._send(request, attempts, route))
        finally:
            RAW.reset(token)
        return raw.http_response, whole(raw.parse()), _none()

    async def _open(self, request: Request, attempts: Attempts, route: str | None) -> Opened:
        """One attempt: the stream's response, status checked, its first chunk and the others to come."""
        options = attempts.sending
        sent = attempts.bounded(request)
        transport = self._transports.ready() or await self._transports.pick()
        started = time.perf_counter()
        try:
            response = await transport.stream(sent, options.stream_idle_timeout)
            if not 200 <= response.status_code < 300:
                try:
                    await response.aread()
                finally:
                    await response.aclose()
        except Exception as exc:
            raise self._failed(sent, started, exc) from exc
        self._stream_opened(response, sent, started)
        chunks = self._chunks(response, attempts)
        try:
            first = await anext(chunks)
        except DeadlinePassed:  # not an APIError: the attempt loop lets it through
            raise
        except Exception as exc:  # the generator closed the response
            raise chunks_failed(response, exc, options) from exc
        if route is None:
            return response, first, chunks
        return response, routed(first, route), _routed(chunks, route)

    async def _chunks(self, response: httpx.Response, attempts: Attempts) -> AsyncGenerator[CompletionChunk]:
        """The chunks of a stream's body, until it ends complete (else ``IncompleteStreamError``) or
        the deadline passes (``DeadlinePassed``); closes the response."""
        import asyncio  # not at module level: `import wrapper.scale` stays light

        received = Received()
        left = attempts.left()
        loop = asyncio.get_running_loop()
        deadline = None if left == math.inf else loop.time() + left
        try:
            if not is_event_stream(response):
                await response.aread()
                raise invalid(response, "is not an event stream")
            headers = ResponseHeaders(response.headers.raw)
            read = cast("StreamingWire", self._wire).chunk
            async with aclosing(sse.aevents(response)) as events:
                async for event in in_time(events, deadline, received.too_late):
                    chunk = read(event, response, headers)
                    if chunk is not None:
                        yield received.add(chunk)
            received.check_complete(response.request)
        except classes("TransportError") as exc:
            if deadline is not None and loop.time() >= deadline:  # a read timed out at it
                raise received.too_late() from exc
            raise
        finally:
            await response.aclose()


async def _replay(chunks: list[CompletionChunk]) -> AsyncGenerator[CompletionChunk]:
    """A replayed stream's chunks after its first."""
    for chunk in chunks:
        yield chunk


async def _none() -> AsyncGenerator[CompletionChunk]:
    """No more chunks (an API that does not stream sent its one)."""
    return
    yield


async def _routed(chunks: AsyncGenerator[CompletionChunk], route: str) -> AsyncGenerator[CompletionChunk]:
    async with aclosing(chunks):
        async for chunk in chunks:
            yield routed(chunk, route)


async def _streamed(
    attempts: Callable[[], Attempts],
    opening: Callable[[Target | None, Attempts], Awaitable[Opened]],
    streams: bool,
) -> AsyncGenerator[httpx.Response | CompletionChunk, None]:
    """A stream's response, then its chunks; ``aclose()`` closes the connection.

    Everything up to the first chunk is one attempt, retried as any failed request is (nothing
    reached the caller yet); after it, never. A stream a hook answered (a cache's hit) is replayed.
    """
    with attempts() as made:

        def replay(given: Completion | Sequence[CompletionChunk], target: Target | None) -> Opened:
            response, first, rest = replayed(given, target, made, streams)
            return response, first, _replay(rest)

        response, first, chunks = await arun(lambda target: opening(target, made), made, replay)
        made.opened()
        if made.hooks and not made.was_answered:
            await made.asucceeded(None)
        try:
            yield response
            yield made.chunk(first)
            async for chunk in chunks:
                yield made.chunk(chunk)
        except DeadlinePassed as exc:
            raise exc.error(response.request, made) from exc.__cause__
        except Exception as exc:
            raise stream_failed(response, exc, made) from exc
        finally:
            await cast("AsyncGenerator[CompletionChunk]", chunks).aclose()


async def acomplete_routed(routing: Picks, prompt: str) -> Completion:
    """``Routing.acomplete``: a completion whose attempts go where ``routing`` says."""
    build = functools.partial(target_request, prompt=prompt, stream=False)
    with Attempts(routing.options, routing=routing, prompt=prompt, build=build) as attempts:

        async def attempt(target: Target | None) -> Completion | RawResponse:
            assert target is not None
            assert attempts.request is not None
            client: AsyncClient = target.client
            return await client._send(attempts.request, attempts, target.route)

        answered = None if RAW.get() else answered_completion
        result = await arun(attempt, attempts, answered)
        if attempts.hooks and not attempts.was_answered:
            await attempts.asucceeded(result.parse() if isinstance(result, RawResponse) else result)
        return cast("Completion", result)


def astream_routed(routing: Picks, prompt: str) -> AsyncCompletionStream:
    """``Routing.astream``: a stream whose attempts (up to its first chunk) go where ``routing`` says."""
    from .streams import AsyncCompletionStream

    build = functools.partial(target_request, prompt=prompt, stream=True)

    async def opening(target: Target | None, attempts: Attempts) -> Opened:
        assert target is not None
        assert attempts.request is not None
        client: AsyncClient = target.client
        return await client._opening(attempts.request, attempts, target.route)

    attempts = functools.partial(
        Attempts, routing.options, stream=True, routing=routing, prompt=prompt, build=build
    )
    return AsyncCompletionStream(_streamed(attempts, opening, streams=True))
