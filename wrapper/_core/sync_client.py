"""The sync clients: requests through an ``httpx.Client`` or an ``httpx2.Client``
(``transports.httpx_transport``), one attempt loop (``retries.run``) for ``complete`` and for a stream's
opening."""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Generator, Mapping
from typing import TYPE_CHECKING, Any, Self, cast

import httpx

from . import sse
from .client import ClientCore, is_event_stream
from .error_mapping import invalid
from .headers import ResponseHeaders
from .insecure import warn_if_insecure
from .options import Options
from .raw import RAW, RawResponse, WithRawResponse, WithStreamingResponse
from .retries import Attempts, run
from .settings import Settings, checked_http_client
from .stream_body import DeadlinePassed, Received, Watchdog
from .transports.base import Reply, Request
from .transports.httpx_transport import HttpxTransport, reply_of
from .transports.library import Http, classes
from .transports.network import checked_limits, proxy_in_env, ssl_context
from .transports.sync_pool import CheckoutTransport

if TYPE_CHECKING:
    import httpx2

    from .results import Completion, CompletionChunk
    from .streams import CompletionStream
    from .wires import StreamingWire, Wire

__all__ = ["SyncClient"]


def _own_pool(library: Http, limits: httpx.Limits) -> httpx.Client:
    """A sync client's own pool, on ``library``: the checkout transport, unless a proxy is configured in
    the environment (httpx applies the environment's proxies only to a pool of its own making)."""
    context = ssl_context(library)
    transport = None if proxy_in_env() else CheckoutTransport(limits, context, library)
    return library.Client(transport=transport, limits=limits, verify=context, trust_env=True)


class SyncClient(ClientCore):
    """A client over an ``httpx.Client`` (or ``httpx2.Client``): closes it on ``close()`` or leaving a
    ``with`` block."""

    def __init__(
        self,
        wire: Wire,
        settings: Settings,
        http_client: httpx.Client | httpx2.Client | None,
        limits: httpx.Limits | httpx2.Limits | None,
        default_headers: Mapping[str, str] | None,
        options: Mapping[str, Any],
    ) -> None:
        library = checked_http_client(http_client, asynchronous=False)
        limits = checked_limits(limits, http_client)
        super().__init__(wire, settings, library, default_headers, dict(options))
        warn_if_insecure(self._base_url, cast("httpx.Client | None", http_client))
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
        """One completion through the attempt loop, with the hooks of the call's options.

        Inside ``with_raw_response`` (``raw.RAW``) it is the completion's ``RawResponse`` instead.
        """
        params, options = self._call(kwargs)
        with self._attempts(options, model, prompt, params, stream=False) as attempts:
            request = self._build(model, prompt, params, options, stream=False)

            def attempt() -> Completion | RawResponse:
                sent = attempts.bounded(request)
                started = time.perf_counter()
                try:
                    reply = self._send(sent, attempts)
                except DeadlinePassed:  # not an APIError: the attempt loop lets it through
                    raise
                except Exception as exc:
                    raise self._failed(sent, started, exc) from exc
                return self._result(self._checked(reply, sent, started))

            try:
                result = run(attempt, attempts)
            except DeadlinePassed as exc:  # final: no attempt fits after it
                raise exc.error(request.as_httpx(), attempts) from exc.__cause__
            if attempts.hooks:
                attempts.succeeded(result.parse() if isinstance(result, RawResponse) else result)
            return cast("Completion", result)  # a RawResponse inside with_raw_response

    def _send(self, request: Request, attempts: Attempts) -> Reply:
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

        params, options = self._call(kwargs)
        request = self._build(model, prompt, params, options, stream=True)
        if not self.API.streams:
            return CompletionStream(self._one_chunk(model, prompt, kwargs))
        return CompletionStream(self._sse(request, options, model, prompt, params))

    def _one_chunk(
        self, model: str, prompt: str, kwargs: Mapping[str, Any]
    ) -> Generator[httpx.Response | CompletionChunk, None, None]:
        from .results import whole

        token = RAW.set(True)
        try:
            raw = cast("RawResponse", self._complete(model, prompt, kwargs))
        finally:
            RAW.reset(token)
        yield raw.http_response
        yield whole(raw.parse())

    def _sse(
        self, request: Request, options: Options, model: str, prompt: str, params: Mapping[str, Any]
    ) -> Generator[httpx.Response | CompletionChunk, None, None]:
        """The stream's response, then its chunks; closing the generator closes the connection.

        Everything up to the first chunk is one attempt, retried as any failed request is (nothing
        reached the caller yet); after it, never.
        """
        with self._attempts(options, model, prompt, params, stream=True) as attempts:
            with attempts.active():
                try:
                    response, first, chunks = run(lambda: self._open(request, attempts), attempts)
                except DeadlinePassed as exc:  # final: no attempt fits after it
                    raise exc.error(request.as_httpx(), attempts) from exc.__cause__
            attempts.succeeded(None)
            try:
                yield response
                yield attempts.chunk(first)
                yield from map(attempts.chunk, chunks) if attempts.hooks else chunks
            except DeadlinePassed as exc:
                raise exc.error(response.request, attempts) from exc.__cause__
            except Exception as exc:
                raise self._stream_failed(response, exc, attempts) from exc
            finally:
                chunks.close()

    def _open(
        self, request: Request, attempts: Attempts
    ) -> tuple[httpx.Response, CompletionChunk, Generator[CompletionChunk]]:
        """One attempt: the stream's response, status checked, its first chunk and the others to come."""
        options = attempts.options
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
            raise self._chunks_failed(response, exc, options) from exc
        return response, first, chunks

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
