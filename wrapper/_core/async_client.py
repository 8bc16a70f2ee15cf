"""The async clients: requests through aiohttp or httpx (or httpx2: ``transports.choice.AsyncTransports``),
one attempt loop (``retries.arun``) for ``complete`` and for a stream's opening."""

from __future__ import annotations

import functools
import importlib
import math
import time
from collections.abc import AsyncGenerator, Mapping
from contextlib import aclosing
from typing import TYPE_CHECKING, Any, Self, cast

import httpx

from . import sse
from .client import ClientCore, is_event_stream
from .error_mapping import invalid
from .headers import ResponseHeaders
from .insecure import warn_if_insecure
from .options import Options
from .raw import RAW, AsyncWithRawResponse, AsyncWithStreamingResponse, RawResponse
from .retries import Attempts, arun
from .settings import Settings, checked_http_client
from .stream_body import DeadlinePassed, Received, awaited_in_time, in_time
from .transports.base import Request
from .transports.choice import AsyncTransports
from .transports.library import HTTPX, Http, chosen, classes, core_name
from .transports.network import checked_limits, proxy_in_env, ssl_context, user_agent

if TYPE_CHECKING:
    import httpx2

    from .results import Completion, CompletionChunk
    from .streams import AsyncCompletionStream
    from .wires import StreamingWire, Wire

__all__ = ["AsyncClient", "load_ahead"]


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

    def __init__(
        self,
        wire: Wire,
        settings: Settings,
        http_client: httpx.AsyncClient | httpx2.AsyncClient | None,
        limits: httpx.Limits | httpx2.Limits | None,
        default_headers: Mapping[str, str] | None,
        options: Mapping[str, Any],
    ) -> None:
        library = checked_http_client(http_client, asynchronous=True)
        limits = checked_limits(limits, http_client)
        super().__init__(wire, settings, library, default_headers, dict(options))
        warn_if_insecure(self._base_url, cast("httpx.AsyncClient | None", http_client))
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

    async def _complete(self, model: str, prompt: str, kwargs: Mapping[str, Any]) -> Completion:
        """One completion through the attempt loop, with the hooks of the call's options.

        Inside ``with_raw_response`` (``raw.RAW``) it is the completion's ``RawResponse`` instead.
        """
        params, options = self._call(kwargs)
        with self._attempts(options, model, prompt, params, stream=False) as attempts:
            request = self._build(model, prompt, params, options, stream=False)

            async def attempt() -> Completion | RawResponse:
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
                return self._result(self._checked(reply, sent, started))

            try:
                result = await arun(attempt, attempts)
            except DeadlinePassed as exc:  # final: no attempt fits after it
                raise exc.error(request.as_httpx(), attempts) from exc.__cause__
            if attempts.hooks:
                await attempts.asucceeded(result.parse() if isinstance(result, RawResponse) else result)
            return cast("Completion", result)  # a RawResponse inside with_raw_response

    def _stream(self, model: str, prompt: str, kwargs: Mapping[str, Any]) -> AsyncCompletionStream:
        """The stream of a call (arguments checked now, the request sent on the first ``anext()``)."""
        from .streams import AsyncCompletionStream

        params, options = self._call(kwargs)
        request = self._build(model, prompt, params, options, stream=True)
        if not self.API.streams:
            return AsyncCompletionStream(self._one_chunk(model, prompt, kwargs))
        return AsyncCompletionStream(self._sse(request, options, model, prompt, params))

    async def _one_chunk(
        self, model: str, prompt: str, kwargs: Mapping[str, Any]
    ) -> AsyncGenerator[httpx.Response | CompletionChunk, None]:
        from .results import whole

        token = RAW.set(True)
        try:
            raw = cast("RawResponse", await self._complete(model, prompt, kwargs))
        finally:
            RAW.reset(token)
        yield raw.http_response
        yield whole(raw.parse())

    async def _sse(
        self, request: Request, options: Options, model: str, prompt: str, params: Mapping[str, Any]
    ) -> AsyncGenerator[httpx.Response | CompletionChunk, None]:
        """The stream's response, then its chunks; ``aclose()`` closes the connection.

        Everything up to the first chunk is one attempt, retried as any failed request is (nothing
        reached the caller yet); after it, never.
        """
        with self._attempts(options, model, prompt, params, stream=True) as attempts:
            with attempts.active():
                try:
                    opened = await arun(lambda: self._open(request, attempts), attempts)
                except DeadlinePassed as exc:  # final: no attempt fits after it
                    raise exc.error(request.as_httpx(), attempts) from exc.__cause__
            response, first, chunks = opened
            if attempts.hooks:
                await attempts.asucceeded(None)
            try:
                yield response
                yield attempts.chunk(first)
                async for chunk in chunks:
                    yield attempts.chunk(chunk)
            except DeadlinePassed as exc:
                raise exc.error(response.request, attempts) from exc.__cause__
            except Exception as exc:
                raise self._stream_failed(response, exc, attempts) from exc
            finally:
                await chunks.aclose()

    async def _open(
        self, request: Request, attempts: Attempts
    ) -> tuple[httpx.Response, CompletionChunk, AsyncGenerator[CompletionChunk]]:
        """One attempt: the stream's response, status checked, its first chunk and the others to come."""
        options = attempts.options
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
            raise self._chunks_failed(response, exc, options) from exc
        return response, first, chunks

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
