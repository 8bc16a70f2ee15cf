"""What every client shares: settings and options, building requests, one attempt loop per side, closing.

A client builds each call's request once (``Request``: URL, headers, JSON body, timeouts), hands it
to a transport (``transports``) inside its attempt loop (``retries``), and turns
what comes back into a typed result or error. A provider module (``wrapper.scale``,
``wrapper.gradient``) supplies its descriptor (``wrapper._core.api.Api``) and a ``Wire``: how its
endpoint's requests are built and its responses read, through the generated client. The wire and
the generated code are imported when the first client is built, not when the module is imported.

Every request carries the same User-Agent and the client's ``default_headers``; redirects are
never followed. The default pools have no cap on connections and use the environment's proxies
and CA bundle.
"""

from __future__ import annotations

import atexit
import copy
import functools
import logging
import math
import os
import threading
import time
from collections.abc import (
    AsyncGenerator,
    Callable,
    Generator,
    Mapping,
)
from contextlib import aclosing
from typing import TYPE_CHECKING, Any, Generic, NamedTuple, Protocol, Self, TypeVar, Unpack, cast

import httpx

from wrapper import _telemetry
from wrapper._core.transports.base import (
    AsyncTransports,
    ClientClosedError,
    HttpxTransport,
    Reply,
    Request,
    encode_json,
)
from wrapper._core.transports.network import (
    checked_headers,
    checked_limits,
    header_value,
    proxy_in_env,
    ssl_context,
    user_agent,
)
from wrapper._core.transports.sync_pool import CheckoutTransport
from wrapper._generated.exceptions import APIConnectionError, APIStatusError, APITimeoutError, NotFoundError

from . import retries as _attempts
from . import sse as _sse
from .error_mapping import Malformed, connection_error, invalid, is_transport_failure, requested
from .headers import ResponseHeaders
from .options import Options, RequestOptions, checked_timeout, split
from .raw import (
    RAW,
    AsyncWithRawResponse,
    AsyncWithStreamingResponse,
    RawResponse,
    WithRawResponse,
    WithStreamingResponse,
)
from .redact import redacted_headers, redacted_url
from .stream_body import DeadlinePassed, Received, Watchdog, in_time
from .transports import fork as _fork
from .validate import check_encodable

if TYPE_CHECKING:
    from httpx_sse import ServerSentEvent

    from .api import Api
    from .results import Completion, CompletionChunk
    from .retry_policy import RetryPolicy
    from .streams import AsyncCompletionStream, CompletionStream

DEFAULT_TIMEOUT = httpx.Timeout(600.0, connect=5.0)
"""Completions can take minutes; connecting should not."""
DEFAULT_MAX_RETRIES = 2
logger = logging.getLogger("wrapper")
T = TypeVar("T")


Timeout = float | httpx.Timeout | None


class Settings(NamedTuple):
    """A client's fixed settings, resolved from arguments and the environment."""

    base_url: str
    headers: dict[str, str]


def client_options(
    timeout: Timeout,
    max_retries: int,
    retry: RetryPolicy | None,
    deadline: float | None,
    stream_idle_timeout: float | None,
) -> dict[str, Any]:
    """A constructor's request options, as ``Options.merged`` takes them (``retry`` None: the default)."""
    options = {
        "timeout": timeout,
        "max_retries": max_retries,
        "deadline": deadline,
        "stream_idle_timeout": stream_idle_timeout,
    }
    return options if retry is None else {**options, "retry": retry}


def from_env(value: object, env: str, argument: str, default: str | None = None) -> str | None:
    """``value`` if given, else the environment variable ``env`` if set and not empty, else ``default``.

    A given value that is not a string is a ``ValueError`` naming ``argument`` and its type (never the
    value: it may be a credential).
    """
    if value is None:
        return os.environ.get(env) or default
    if not isinstance(value, str):
        raise ValueError(f"{argument} must be a string (or None: from {env}); got {type(value).__name__}")
    return value


def required(value: str | None, *, env: str, argument: str, client: str) -> str:
    """A credential from the argument or the environment; ``ValueError`` naming both when neither is set."""
    value = from_env(value, env, argument)
    if not value:
        raise ValueError(
            f"{client} needs {argument}: pass {argument}=... or set the {env} environment variable"
        )
    return header_value(value, f"{argument} (or {env})")


class Wire(Protocol):
    """How one provider's endpoint is spoken, in terms of its generated client."""

    def request(self, model: str, prompt: str, params: Mapping[str, Any], *, stream: bool) -> dict[str, Any]:
        """The generated request builder's kwargs for a call; ``ValueError`` for what the spec forbids."""
        ...

    def parse(self, content: bytes, headers: ResponseHeaders) -> Completion:
        """The result in a successful response's body; ``Malformed`` if it is not what the spec promises."""
        ...

    def status_error(self, response: httpx.Response) -> APIStatusError:
        """The typed error for an error response (its body already read)."""
        ...


class StreamingWire(Wire, Protocol):
    """The wire of an API that streams (``Api.streams``): it reads each server-sent event too."""

    def chunk(
        self, event: ServerSentEvent, response: httpx.Response, headers: ResponseHeaders
    ) -> CompletionChunk | None:
        """The chunk one stream event carries (None for an empty one); an error event raises its error."""
        ...


Called = tuple[str, str, Mapping[str, Any]]
"""What a call was asked: model, prompt and keyword parameters (for telemetry)."""


def _is_event_stream(response: httpx.Response) -> bool:
    content_type: str = response.headers.get("content-type", "")
    return content_type.partition(";")[0].strip() == "text/event-stream"


def _log_response(request: Request, status: int, started: float) -> None:
    if logger.isEnabledFor(logging.DEBUG):
        logger.debug(
            "%s %s -> %d in %.3fs; request headers %s",
            request.method,
            request.url,
            status,
            time.perf_counter() - started,
            redacted_headers({name.lower(): value for name, value in request.headers.items()}),
        )


def _checked_base_url(base_url: str, api: Api) -> str:
    """``base_url`` without its trailing slash; ``ValueError`` unless an http(s) URL with a host."""
    try:
        url = httpx.URL(base_url)
    except httpx.InvalidURL:
        url = None
    if url is None or url.scheme not in ("http", "https") or not url.host:
        raise ValueError(
            f"base_url must be an http:// or https:// URL with a host, such as {api.default_base_url!r}; "
            f"got {base_url!r}"
        )
    return base_url.rstrip("/")


H = TypeVar("H", httpx.Client, httpx.AsyncClient)


def _checked_http_client(http_client: H | None, cls: type[H]) -> H | None:
    """``http_client``; ``ValueError`` unless None or a ``cls`` (a sync client takes an ``httpx.Client``,
    an async one an ``httpx.AsyncClient``)."""
    if http_client is not None and not isinstance(http_client, cls):
        raise ValueError(f"http_client must be an httpx.{cls.__name__}; got {type(http_client).__name__}")
    return http_client


class _ClientCore:
    """Settings, options and the parts of a call that do no I/O, for sync and async clients alike."""

    API: Api
    _pool_closed: Callable[[], bool]
    _derived = False
    """True for a ``with_options`` copy: the pool is its parent's, and closing the copy leaves it open."""
    _closed_alone = False

    def __init__(
        self,
        wire: Wire,
        settings: Settings,
        default_headers: Mapping[str, str] | None,
        options: dict[str, Any],
    ) -> None:
        from .logs import setup_logging  # SGP_CLIENT_LOG, GRADIENT_LOG: read on an API's first client

        setup_logging(self.API)
        self._wire = wire
        self._base_url = _checked_base_url(settings.base_url, self.API)
        self._headers = {"User-Agent": user_agent(), **checked_headers(default_headers)}
        self._credentials = settings.headers
        self._options = Options(checked_timeout(options.pop("timeout")), 0).merged(options)

    @property
    def base_url(self) -> str:
        """The URL the endpoint paths are appended to."""
        return self._base_url

    @property
    def timeout(self) -> httpx.Timeout:
        """The timeout of each attempt."""
        return self._options.timeout

    @property
    def max_retries(self) -> int:
        """How many times a failed request is retried (0: never)."""
        return self._options.max_retries

    @property
    def options(self) -> Options:
        """Every request option in force (``wrapper.RequestOptions`` lists them)."""
        return self._options

    def with_options(self, **options: Unpack[RequestOptions]) -> Self:
        """A copy with other request options, sharing this client's connection pool; ``extra_*`` add to
        this client's. ``ValueError`` names a bad or unknown option.

        Closing the copy (or leaving its ``with`` block) closes the copy alone: the pool stays open for
        this client and its other copies, until this client is closed.
        """
        clone = copy.copy(self)
        clone._options = self._options.merged(options)
        clone._derived = True
        return clone

    def _closed(self) -> bool:
        return self._closed_alone or self._pool_closed()

    def _closes_pool(self) -> bool:
        """Mark this client closed; True if its pool is to be closed too (unless a ``with_options`` copy)."""
        self._closed_alone = True
        return not self._derived

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(base_url={redacted_url(self._base_url)!r}, timeout={self.timeout!r}, "
            f"max_retries={self.max_retries})"
        )

    def _call(self, kwargs: Mapping[str, Any]) -> tuple[dict[str, Any], Options]:
        """A call's keyword arguments as its parameters and the options in force for it."""
        params, given = split(kwargs)
        return params, self._options.merged(given)

    def _build(
        self, model: str, prompt: str, params: Mapping[str, Any], options: Options, *, stream: bool
    ) -> Request:
        """The request of one call (arguments checked now); ``ClientClosedError`` on a closed client."""
        if self._closed():
            raise ClientClosedError(f"this {type(self).__name__} client is closed: build a new one")
        streams = stream and self.API.streams
        try:
            kwargs = self._wire.request(model, prompt, params, stream=streams)
            url = self._base_url + kwargs["url"]
            if options.extra_query:
                url = str(httpx.URL(url).copy_merge_params(options.extra_query))
            body = {**kwargs["json"], **options.extra_body} if options.extra_body else kwargs["json"]
            content = encode_json(body)
        except UnicodeEncodeError:  # a lone surrogate somewhere: say in which argument
            extra = {"extra_query": options.extra_query, "extra_body": options.extra_body}
            check_encodable({"model": model, "prompt": prompt, **params, **extra})
            raise
        headers = {**self._headers, **options.extra_headers, **self._credentials, **kwargs["headers"]}
        if streams:
            headers["Accept"] = "text/event-stream"
        return Request(kwargs["method"].upper(), url, headers, content, options.timeout)

    def _batched(self, kwargs: Mapping[str, Any]) -> tuple[Self, dict[str, Any]]:
        """For ``complete_many``: this client with the call's options, and the parameters for each prompt."""
        params, options = self._call(kwargs)
        client = copy.copy(self)
        client._options = options
        return client, params

    def _checked(self, reply: Reply, request: Request, started: float) -> Reply:
        """``reply`` if it is a success (2xx), else its typed error raised; logged at DEBUG either way.

        A redirect is an error too: it is never followed, since the credentials would go with it.
        """
        _log_response(request, reply.status, started)
        if not 200 <= reply.status < 300:
            error = self._wire.status_error(reply.response())
            hint = self._base_url_hint(error.request) if type(error) is NotFoundError else None
            raise requested(error, hint)
        return reply

    def _base_url_hint(self, request: httpx.Request) -> str:
        """What a 404 of the status class (not a typed body naming what is unknown) adds: it may be the
        model, or a ``base_url`` with a path segment too many or too few, so this client's is shown beside
        the path appended to it and the API's default."""
        base_path = httpx.URL(self._base_url).path.rstrip("/")
        endpoint = request.url.path.removeprefix(base_path)
        return (
            f"if the model id is right, check base_url: this client's is {redacted_url(self._base_url)!r}, "
            f"and {endpoint!r} is appended to it (the default is {self.API.default_base_url!r})"
        )

    def _result(self, reply: Reply) -> Completion | RawResponse:
        """The completion in ``reply`` (its ``RawResponse`` inside ``with_raw_response``)."""
        try:
            completion = self._wire.parse(reply.content, ResponseHeaders(reply.headers))
        except Malformed as exc:
            raise exc.at(reply.response()) from None
        return RawResponse(reply.response(), completion) if RAW.get() else completion

    def _failed(self, request: Request, started: float, exc: Exception) -> Exception:
        """The typed error for what a transport raised (re-raised as is if it is not a transport failure)."""
        if not is_transport_failure(exc):
            return exc
        if logger.isEnabledFor(logging.DEBUG):
            logger.debug(
                "%s %s failed after %.3fs: %r",
                request.method,
                request.url,
                time.perf_counter() - started,
                exc,
            )
        return connection_error(exc, request.as_httpx())

    def _chunks_failed(self, response: httpx.Response, exc: Exception, options: Options) -> Exception:
        """The typed error for a failure while reading a stream's events (an idle stream's says so)."""
        if isinstance(exc, APIStatusError):  # an error event
            return requested(exc)
        idle = options.stream_idle_timeout
        if isinstance(exc, httpx.ReadTimeout) and idle is not None:
            return APITimeoutError(
                f"the stream sent nothing for {idle:g} s (stream_idle_timeout)", request=response.request
            )
        return connection_error(exc, response.request) if is_transport_failure(exc) else exc

    def _stream_failed(
        self, response: httpx.Response, exc: Exception, attempts: _attempts.Attempts
    ) -> Exception:
        """The error that ends a stream after its first chunk (never retried): as ``_chunks_failed``,
        a connection error saying how many attempts were made and that the stream had begun."""
        error = self._chunks_failed(response, exc, attempts.options)
        if isinstance(error, APIConnectionError) and error is not exc:
            return attempts.gave_up(error, begun=True)
        return error

    def _stream_opened(self, response: httpx.Response, request: Request, started: float) -> httpx.Response:
        """The stream's response, its status checked."""
        reply = Reply(response.status_code, response.headers.raw, b"", response.request, response)
        self._checked(reply, request, started)
        return response


def _own_pool(limits: httpx.Limits) -> httpx.Client:
    """A sync client's own pool: the checkout transport, unless a proxy is configured in the environment
    (httpx applies the environment's proxies only to a pool of its own making)."""
    context = ssl_context()
    transport = None if proxy_in_env() else CheckoutTransport(limits, context)
    return httpx.Client(transport=transport, limits=limits, verify=context, trust_env=True)


class SyncClient(_ClientCore):
    """A client over an ``httpx.Client``: closes it on ``close()`` or leaving a ``with`` block."""

    def __init__(
        self,
        wire: Wire,
        settings: Settings,
        http_client: httpx.Client | None,
        limits: httpx.Limits | None,
        default_headers: Mapping[str, str] | None,
        options: Mapping[str, Any],
    ) -> None:
        limits = checked_limits(limits, _checked_http_client(http_client, httpx.Client))
        super().__init__(wire, settings, default_headers, dict(options))
        if http_client is None:
            own = functools.partial(_own_pool, limits)
            self._transport = transport = HttpxTransport(own(), own)
        else:
            self._transport = transport = HttpxTransport(http_client)
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

    def _complete(
        self, model: str, prompt: str, kwargs: Mapping[str, Any], policy: _attempts.Attempts | None = None
    ) -> Completion:
        """One completion through the attempt loop (``policy``: a batch's; else the options' retries).

        Inside ``with_raw_response`` (``_raw.RAW``) it is the completion's ``RawResponse`` instead.
        """
        params, options = self._call(kwargs)
        with _telemetry.call(self, model, prompt, params) as span:
            request = self._build(model, prompt, params, options, stream=False)
            attempts = policy or _attempts.Attempts(options)

            def attempt() -> Completion | RawResponse:
                sent = attempts.bounded(request)
                started = time.perf_counter()
                try:
                    reply = self._transport.send(sent)
                except Exception as exc:
                    raise self._failed(sent, started, exc) from exc
                return self._result(self._checked(reply, sent, started))

            result = _attempts.run(attempt, attempts)
            span.done(result.parse() if isinstance(result, RawResponse) else result)
            return cast("Completion", result)  # a RawResponse inside with_raw_response

    def _stream(self, model: str, prompt: str, kwargs: Mapping[str, Any]) -> CompletionStream:
        """The stream of a call (arguments checked now, the request sent on the first ``next()``)."""
        from .streams import CompletionStream

        params, options = self._call(kwargs)
        request = self._build(model, prompt, params, options, stream=True)
        if not self.API.streams:
            return CompletionStream(self._one_chunk(model, prompt, kwargs))
        return CompletionStream(self._sse(request, options, (model, prompt, params)))

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
        self, request: Request, options: Options, call: Called
    ) -> Generator[httpx.Response | CompletionChunk, None, None]:
        """The stream's response, then its chunks; closing the generator closes the connection.

        Everything up to the first chunk is one attempt, retried as any failed request is (nothing
        reached the caller yet); after it, never.
        """
        with _telemetry.call(self, *call, stream=True) as span:
            attempts = _attempts.Attempts(options)
            with span.active():
                try:
                    response, first, chunks = _attempts.run(lambda: self._open(request, attempts), attempts)
                except DeadlinePassed as exc:  # final: no attempt fits after it
                    raise exc.error(request.as_httpx(), attempts.retries + 1) from exc.__cause__
            try:
                yield response
                yield span.chunk(first)
                yield from map(span.chunk, chunks)
            except DeadlinePassed as exc:
                raise exc.error(response.request, attempts.retries + 1) from exc.__cause__
            except Exception as exc:
                raise self._stream_failed(response, exc, attempts) from exc
            finally:
                chunks.close()

    def _open(
        self, request: Request, attempts: _attempts.Attempts
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

    def _chunks(self, response: httpx.Response, attempts: _attempts.Attempts) -> Generator[CompletionChunk]:
        """The chunks of a stream's body, until it ends complete (else ``IncompleteStreamError``) or
        the deadline passes (``DeadlinePassed``); closes the response."""
        received = Received()
        left = attempts.left()
        deadline = None if left == math.inf else time.monotonic() + left
        watchdog = Watchdog(response, left)
        try:
            if not _is_event_stream(response):
                response.read()
                raise invalid(response, "is not an event stream")
            headers = ResponseHeaders(response.headers.raw)
            read = cast(StreamingWire, self._wire).chunk
            for event in _sse.events(response):
                if deadline is not None and time.monotonic() >= deadline:  # also where no watchdog runs
                    raise received.too_late(attempts.options.deadline)
                chunk = read(event, response, headers)
                if chunk is not None:
                    yield received.add(chunk)
            received.check_complete(response.request)
        except httpx.TransportError:
            if deadline is not None and time.monotonic() >= deadline:  # the watchdog shut the socket
                raise received.too_late(attempts.options.deadline) from None  # not the shutdown's error
            raise
        finally:
            watchdog.stop()
            response.close()


class AsyncClient(_ClientCore):
    """A client over aiohttp or httpx (``wrapper._core.transports.base.AsyncTransports``): ``await close()``.

    It works from any event loop, with a connection pool of its own in each.
    """

    def __init__(
        self,
        wire: Wire,
        settings: Settings,
        http_client: httpx.AsyncClient | None,
        limits: httpx.Limits | None,
        default_headers: Mapping[str, str] | None,
        options: Mapping[str, Any],
    ) -> None:
        limits = checked_limits(limits, _checked_http_client(http_client, httpx.AsyncClient))
        super().__init__(wire, settings, default_headers, dict(options))
        self._transports = transports = AsyncTransports(
            http_client, limits=limits, verify=ssl_context, proxy=proxy_in_env()
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

    async def _complete(
        self, model: str, prompt: str, kwargs: Mapping[str, Any], policy: _attempts.Attempts | None = None
    ) -> Completion:
        """One completion through the attempt loop (``policy``: a batch's; else the options' retries).

        Inside ``with_raw_response`` (``_raw.RAW``) it is the completion's ``RawResponse`` instead.
        """
        params, options = self._call(kwargs)
        with _telemetry.call(self, model, prompt, params) as span:
            request = self._build(model, prompt, params, options, stream=False)
            attempts = policy or _attempts.Attempts(options)

            async def attempt() -> Completion | RawResponse:
                sent = attempts.bounded(request)
                transport = self._transports.ready() or await self._transports.pick()
                started = time.perf_counter()
                try:
                    reply = await transport.send(sent)
                except Exception as exc:
                    raise self._failed(sent, started, exc) from exc
                return self._result(self._checked(reply, sent, started))

            result = await _attempts.arun(attempt, attempts)
            span.done(result.parse() if isinstance(result, RawResponse) else result)
            return cast("Completion", result)  # a RawResponse inside with_raw_response

    def _stream(self, model: str, prompt: str, kwargs: Mapping[str, Any]) -> AsyncCompletionStream:
        """The stream of a call (arguments checked now, the request sent on the first ``anext()``)."""
        from .streams import AsyncCompletionStream

        params, options = self._call(kwargs)
        request = self._build(model, prompt, params, options, stream=True)
        if not self.API.streams:
            return AsyncCompletionStream(self._one_chunk(model, prompt, kwargs))
        return AsyncCompletionStream(self._sse(request, options, (model, prompt, params)))

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
        self, request: Request, options: Options, call: Called
    ) -> AsyncGenerator[httpx.Response | CompletionChunk, None]:
        """The stream's response, then its chunks; ``aclose()`` closes the connection.

        Everything up to the first chunk is one attempt, retried as any failed request is (nothing
        reached the caller yet); after it, never.
        """
        with _telemetry.call(self, *call, stream=True) as span:
            attempts = _attempts.Attempts(options)
            with span.active():
                try:
                    opened = await _attempts.arun(lambda: self._open(request, attempts), attempts)
                except DeadlinePassed as exc:  # final: no attempt fits after it
                    raise exc.error(request.as_httpx(), attempts.retries + 1) from exc.__cause__
            response, first, chunks = opened
            try:
                yield response
                yield span.chunk(first)
                async for chunk in chunks:
                    yield span.chunk(chunk)
            except DeadlinePassed as exc:
                raise exc.error(response.request, attempts.retries + 1) from exc.__cause__
            except Exception as exc:
                raise self._stream_failed(response, exc, attempts) from exc
            finally:
                await chunks.aclose()

    async def _open(
        self, request: Request, attempts: _attempts.Attempts
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

    async def _chunks(
        self, response: httpx.Response, attempts: _attempts.Attempts
    ) -> AsyncGenerator[CompletionChunk]:
        """The chunks of a stream's body, until it ends complete (else ``IncompleteStreamError``) or
        the deadline passes (``DeadlinePassed``); closes the response."""
        import asyncio  # not at module level: `import wrapper.scale` stays light

        received = Received()
        left = attempts.left()
        loop = asyncio.get_running_loop()
        deadline = None if left == math.inf else loop.time() + left
        try:
            if not _is_event_stream(response):
                await response.aread()
                raise invalid(response, "is not an event stream")
            headers = ResponseHeaders(response.headers.raw)
            read = cast(StreamingWire, self._wire).chunk
            async with aclosing(_sse.aevents(response)) as events:
                late = functools.partial(received.too_late, attempts.options.deadline)
                async for event in in_time(events, deadline, late):
                    chunk = read(event, response, headers)
                    if chunk is not None:
                        yield received.add(chunk)
            received.check_complete(response.request)
        except httpx.TransportError as exc:
            if deadline is not None and loop.time() >= deadline:  # a read timed out at it
                raise received.too_late(attempts.options.deadline) from exc
            raise
        finally:
            await response.aclose()


C = TypeVar("C", bound=SyncClient)


class DefaultClient(Generic[C]):
    """The client behind a module's ``complete``/``stream``: built from the environment on first use.

    A forked child keeps it: the client drops the pool it inherited (``wrapper._core.transports.fork``).
    """

    def __init__(self, factory: Callable[[], C]) -> None:
        self._factory = factory
        self._client: C | None = None
        self._lock = threading.Lock()
        _fork.register(self)

    def after_fork(self) -> None:
        self._lock = threading.Lock()  # a thread of the parent may have held it at the fork

    def get(self) -> C:
        """The client, built on the first call (thread-safe) and closed when the interpreter exits."""
        client = self._client
        if client is None:
            with self._lock:
                if self._client is None:
                    self._client = self._factory()
                    atexit.register(self.close)
                client = self._client
        return client

    def close(self) -> None:
        """Close and forget the client; the next ``get()`` builds a new one."""
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
            atexit.unregister(self.close)
            client.close()
