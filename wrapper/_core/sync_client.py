"""The sync clients: requests through an ``httpx.Client`` or an ``httpx2.Client``
(``transports.httpx_transport``), one attempt loop (``retries.run``) for ``complete`` and for a stream's
opening, whether a call is made on a client or routed over several (``routing``)."""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
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
from .options import Options
from .raw import RAW, RawResponse, WithRawResponse, WithStreamingResponse
from .results import ResponseHeaders, routed, whole
from .retries import Attempts, Picks, Target, run
from .settings import Connect
from .stream_body import DeadlinePassed, Received, Watchdog
from .transports.environment import proxy_in_env, ssl_context
from .transports.httpx_transport import HttpxTransport, reply_of
from .transports.library import Http, classes
from .transports.sync_pool import CheckoutTransport

if TYPE_CHECKING:
    from .results import Completion, CompletionChunk
    from .streams import CompletionStream
    from .transports.base import Reply, Request
    from .wires import StreamingWire

__all__ = ["SyncClient", "complete_routed", "stream_routed"]

Opened = tuple[httpx.Response, "CompletionChunk", Iterator["CompletionChunk"]]
"""A stream's opening: its response, status checked, its first chunk and the others to come."""


def _own_pool(library: Http, limits: httpx.Limits) -> httpx.Client:
    """A sync client's own pool, on ``library``: the checkout transport, unless a proxy is configured in
    the environment (httpx applies the environment's proxies only to a pool of its own making)."""
    context = ssl_context(library)
    transport = None if proxy_in_env() else CheckoutTransport(limits, context, library)
    return library.Client(transport=transport, limits=limits, verify=context, trust_env=True)


class SyncClient(ClientCore):
    """A client over an ``httpx.Client`` (or ``httpx2.Client``): closes it on ``close()`` or leaving a
    ``with`` block."""

    _HTTP_CLIENT = "httpx.Client | httpx2.Client"

    def __init__(self, connect: Connect, arguments: Mapping[str, Any]) -> None:
        http_client, limits = self._configure(connect, arguments, asynchronous=False)
        library = self._library
        if http_client is None:
            own = functools.partial(_own_pool, library, limits)
            self._transport = transport = HttpxTransport(own(), own)
        else:
            self._transport = transport = HttpxTransport(cast("httpx.Client", http_client))  # httpx's API
        self._pool_closed = lambda: transport.client.is_closed

    def close(self) -> None:
        """Close the connection pool (its ``with_options`` copies' too); later calls are refused.

        On a ``with_options`` copy it closes the copy alone (``with_options``).
        """
        if self._closes_pool():
            self._transport.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def with_raw_response(self) -> WithRawResponse:
        """The same calls, returning the HTTP response: ``.complete(...)`` gives a ``RawResponse``."""
        return WithRawResponse(self)

    @property
    def with_streaming_response(self) -> WithStreamingResponse:
        """``with client.with_streaming_response.stream(...) as response:``: status and headers first."""
        return WithStreamingResponse(self)

    def _complete(self, model: str, prompt: str, kwargs: Mapping[str, Any]) -> Completion:
        params, options = self._options.split(kwargs)
        return self.call(model, prompt, params, options)

    def call(self, model: str, prompt: str, params: Mapping[str, Any], options: Options) -> Completion:
        """``complete(model, prompt, **kwargs)`` with its keyword arguments split already into the request's
        parameters and the options in force (``client.options.split(kwargs)``): how code that makes calls
        for others (``wrapper.batch``) splits and checks them once for many calls.

        Inside ``with_raw_response`` it returns the completion's ``RawResponse``.
        """
        with self._attempts(options, model, prompt, params, stream=False) as attempts:
            request = attempts.request = self._build(model, prompt, params, options, stream=False)
            answered = None if RAW.get() else answered_completion  # a cache has no HTTP response to give
            result = run(lambda _: self._send(request, attempts), attempts, answered)
            if attempts.hooks and not attempts.was_answered:
                attempts.succeeded(result.parse() if isinstance(result, RawResponse) else result)
            return cast("Completion", result)  # a RawResponse inside with_raw_response

    def _send(
        self, request: Request, attempts: Attempts, route: str | None = None
    ) -> Completion | RawResponse:
        """One attempt of a completion."""
        sent = attempts.bounded(request)
        started = time.perf_counter()
        try:
            reply = self._reply(sent, attempts)
        except DeadlinePassed:  # not an APIError: the attempt loop lets it through
            raise
        except Exception as exc:
            raise self._failed(sent, started, exc) from exc
        return self._result(self._checked(reply, sent, started), route)

    def _reply(self, request: Request, attempts: Attempts) -> Reply:
        """The reply to ``request``, its body read before the call's deadline (else ``DeadlinePassed``):
        httpcore times each read, so a body trickled a byte at a time, or chunked without end, would
        outlast it; a ``Watchdog`` shuts the socket down when it passes."""
        if attempts.left() == math.inf:
            return self._transport.send(request)
        response = self._transport.stream(request, None)
        watchdog = Watchdog(response, attempts.left())
        try:
            response.read()
        except classes("TransportError") as exc:
            if watchdog.fired:
                raise DeadlinePassed() from exc
            raise
        finally:
            watchdog.stop()
            response.close()
        if watchdog.fired:  # a body that ends with its connection ended there: cut short
            raise DeadlinePassed()
        return reply_of(response)

    def _stream(self, model: str, prompt: str, kwargs: Mapping[str, Any]) -> CompletionStream:
        """The stream of a call (arguments checked now, the request sent on the first ``next()``)."""
        from .streams import CompletionStream

        request, attempts = self._stream_call(model, prompt, kwargs)
        return CompletionStream(
            _streamed(attempts, lambda _, made: self._opening(request, made, None), self.API.streams)
        )

    def _opening(self, request: Request, attempts: Attempts, route: str | None) -> Opened:
        """One attempt at a stream's opening (an API that does not stream: its completion as one chunk)."""
        if self.API.streams:
            return self._open(request, attempts, route)
        token = RAW.set(True)
        try:
            raw = cast("RawResponse", self._send(request, attempts, route))
        finally:
            RAW.reset(token)
        return raw.http_response, whole(raw.parse()), iter(())

    def _open(self, request: Request, attempts: Attempts, route: str | None) -> Opened:
        """One attempt: the stream's response, status checked, its first chunk and the others to come."""
        options = attempts.sending
        sent = attempts.bounded(request)
        started = time.perf_counter()
        try:
            response = self._transport.stream(sent, options.stream_idle_timeout)
            if not 200 <= response.status_code < 300:
                try:
                    response.read()
                finally:
                    response.close()
        except Exception as exc:
            raise self._failed(sent, started, exc) from exc
        self._stream_opened(response, sent, started)
        chunks = self._chunks(response, attempts)
        try:
            first = next(chunks)
        except DeadlinePassed:  # not an APIError: the attempt loop lets it through
            raise
        except Exception as exc:  # the generator closed the response
            raise chunks_failed(response, exc, options) from exc
        if route is None:
            return response, first, chunks
        return response, routed(first, route), _routed(chunks, route)

    def _chunks(self, response: httpx.Response, attempts: Attempts) -> Generator[CompletionChunk]:
        """The chunks of a stream's body, until it ends complete (else ``IncompleteStreamError``) or
        the deadline passes (``DeadlinePassed``); closes the response."""
        received = Received()
        left = attempts.left()
        deadline = None if left == math.inf else time.monotonic() + left
        watchdog = Watchdog(response, left)
        try:
            if not is_event_stream(response):
                response.read()
                raise invalid(response, "is not an event stream")
            headers = ResponseHeaders(response.headers.raw)
            read = cast("StreamingWire", self._wire).chunk
            for event in sse.events(response):
                if deadline is not None and time.monotonic() >= deadline:  # also where no watchdog runs
                    raise received.too_late()
                chunk = read(event, response, headers)
                if chunk is not None:
                    yield received.add(chunk)
            received.check_complete(response.request)
        except classes("TransportError"):
            if deadline is not None and time.monotonic() >= deadline:  # the watchdog shut the socket
                raise received.too_late() from None  # not the shutdown's error
            raise
        finally:
            watchdog.stop()
            response.close()


def _routed(chunks: Iterator[CompletionChunk], route: str) -> Generator[CompletionChunk]:
    try:
        for chunk in chunks:
            yield routed(chunk, route)
    finally:
        getattr(chunks, "close", lambda: None)()


def _streamed(
    attempts: Callable[[], Attempts], opening: Callable[[Target | None, Attempts], Opened], streams: bool
) -> Generator[httpx.Response | CompletionChunk, None, None]:
    """A stream's response, then its chunks; closing the generator closes the connection.

    Everything up to the first chunk is one attempt, retried as any failed request is (nothing
    reached the caller yet); after it, never. A stream a hook answered (a cache's hit) is replayed.
    """
    with attempts() as made:

        def replay(given: Completion | Sequence[CompletionChunk], target: Target | None) -> Opened:
            response, first, rest = replayed(given, target, made, streams)
            return response, first, iter(rest)

        response, first, chunks = run(lambda target: opening(target, made), made, replay)
        made.opened()
        if not made.was_answered:
            made.succeeded(None)
        try:
            yield response
            yield made.chunk(first)
            yield from map(made.chunk, chunks) if made.hooks else chunks
        except DeadlinePassed as exc:
            raise exc.error(response.request, made) from exc.__cause__
        except Exception as exc:
            raise stream_failed(response, exc, made) from exc
        finally:
            getattr(chunks, "close", lambda: None)()


def complete_routed(routing: Picks, prompt: str) -> Completion:
    """``Routing.complete``: a completion whose attempts go where ``routing`` says."""
    build = functools.partial(target_request, prompt=prompt, stream=False)
    with Attempts(routing.options, routing=routing, prompt=prompt, build=build) as attempts:

        def attempt(target: Target | None) -> Completion | RawResponse:
            assert target is not None
            assert attempts.request is not None
            client: SyncClient = target.client
            return client._send(attempts.request, attempts, target.route)

        answered = None if RAW.get() else answered_completion
        result = run(attempt, attempts, answered)
        if attempts.hooks and not attempts.was_answered:
            attempts.succeeded(result.parse() if isinstance(result, RawResponse) else result)
        return cast("Completion", result)


def stream_routed(routing: Picks, prompt: str) -> CompletionStream:
    """``Routing.stream``: a stream whose attempts (up to its first chunk) go where ``routing`` says."""
    from .streams import CompletionStream

    build = functools.partial(target_request, prompt=prompt, stream=True)

    def opening(target: Target | None, attempts: Attempts) -> Opened:
        assert target is not None
        assert attempts.request is not None
        client: SyncClient = target.client
        return client._opening(attempts.request, attempts, target.route)

    attempts = functools.partial(
        Attempts, routing.options, stream=True, routing=routing, prompt=prompt, build=build
    )
    return CompletionStream(_streamed(attempts, opening, streams=True))
