"""What every client shares: settings and options, building requests, one attempt loop per side, closing.

A client builds each call's request once (``Request``: URL, headers, JSON body, timeouts), hands it
to a transport (``wrapper._transport``) inside its attempt loop (``wrapper._attempts``), and turns
what comes back into a typed result or error. A provider module (``wrapper.scale``,
``wrapper.gradient``) supplies its descriptor (``wrapper._api.Api``) and a ``Wire``: how its
endpoint's requests are built and its responses read, through the generated client. The wire and
the generated code are imported when the first client is built, not when the module is imported.

Every request carries the same User-Agent and the client's ``default_headers``; redirects are
never followed. The default pools have no cap on connections and use the environment's proxies
and CA bundle.
"""

from __future__ import annotations

import atexit
import copy
import logging
import math
import os
import threading
import time
from collections.abc import (
    AsyncGenerator,
    AsyncIterable,
    Callable,
    Generator,
    Iterable,
    Mapping,
)
from typing import TYPE_CHECKING, Any, Generic, NamedTuple, Protocol, Self, TypeVar, cast

import httpx

from . import _attempts, _telemetry
from ._checkout import CheckoutTransport
from ._errors_map import Malformed, connection_error, invalid, is_transport_failure
from ._exceptions import APIStatusError
from ._network import (
    checked_headers,
    checked_limits,
    header_value,
    proxy_in_env,
    ssl_context,
    user_agent,
)
from ._redact import redacted_headers
from ._transport import (
    AsyncTransports,
    ClientClosedError,
    HttpxTransport,
    Reply,
    Request,
    encode_json,
)

if TYPE_CHECKING:
    from httpx_sse import ServerSentEvent

    from ._api import Api
    from ._batch import AsyncBatchIterator, BatchIterator
    from ._results import Completion, CompletionChunk, ResponseHeaders

DEFAULT_TIMEOUT = httpx.Timeout(600.0, connect=5.0)
"""Completions can take minutes; connecting should not."""
DEFAULT_MAX_RETRIES = 2
logger = logging.getLogger("wrapper")
T = TypeVar("T")


class NotGiven:
    """The type of ``NOT_GIVEN``: "leave this option as it is" (``None`` means "no timeout")."""

    def __repr__(self) -> str:
        return "NOT_GIVEN"


NOT_GIVEN = NotGiven()
Timeout = float | httpx.Timeout | None


class Settings(NamedTuple):
    """A client's fixed settings, resolved from arguments and the environment."""

    base_url: str
    headers: dict[str, str]


def from_env(value: str | None, env: str, default: str | None = None) -> str | None:
    """``value`` if given, else the environment variable ``env`` if set and not empty, else ``default``."""
    return value if value is not None else os.environ.get(env) or default


def required(value: str | None, *, env: str, argument: str, client: str) -> str:
    """A credential from the argument or the environment; ``ValueError`` naming both when neither is set."""
    value = from_env(value, env)
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


def _response_headers(raw: Iterable[tuple[bytes, bytes]]) -> ResponseHeaders:
    from ._results import ResponseHeaders

    return ResponseHeaders(raw)


def _checked_retries(max_retries: object) -> int:
    if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
        raise ValueError(f"max_retries must be an integer >= 0; got {max_retries!r}")
    return max_retries


def _positive(value: object) -> bool:
    return not isinstance(value, bool) and isinstance(value, int | float) and 0 < value <= math.inf


def _checked_timeout(timeout: object) -> httpx.Timeout:
    """``timeout`` as an ``httpx.Timeout``; ``ValueError`` unless None, a number > 0 or an httpx.Timeout."""
    if isinstance(timeout, httpx.Timeout):
        for name, value in timeout.as_dict().items():
            if value is not None and not _positive(value):
                raise ValueError(
                    f"timeout: httpx.Timeout's {name} must be None or a number > 0; got {value!r}"
                )
        return timeout
    if timeout is not None and not _positive(timeout):
        raise ValueError(
            f"timeout must be None (no limit), a number of seconds > 0 or an httpx.Timeout; got {timeout!r}"
        )
    return httpx.Timeout(timeout)  # type: ignore[arg-type]


def _checked_base_url(base_url: str, api: Api) -> str:
    """``base_url`` without its trailing slash; ``ValueError`` unless an http(s) URL with a host."""
    try:
        url = httpx.URL(base_url)
    except (httpx.InvalidURL, TypeError):
        url = None
    if url is None or url.scheme not in ("http", "https") or not url.host:
        raise ValueError(
            f"base_url must be an http:// or https:// URL with a host, such as {api.default_base_url!r}; "
            f"got {base_url!r}"
        )
    return base_url.rstrip("/")


class _ClientCore:
    """Settings, options and the parts of a call that do no I/O, for sync and async clients alike."""

    API: Api
    _closed: Callable[[], bool]

    def __init__(
        self,
        wire: Wire,
        settings: Settings,
        timeout: Timeout,
        max_retries: int,
        default_headers: Mapping[str, str] | None,
    ) -> None:
        from ._logging import setup_logging  # SGP_CLIENT_LOG, GRADIENT_LOG: read on an API's first client

        setup_logging(self.API)
        self._wire = wire
        self._base_url = _checked_base_url(settings.base_url, self.API)
        self._headers = {"User-Agent": user_agent(), **checked_headers(default_headers), **settings.headers}
        self._timeout = _checked_timeout(timeout)
        self._max_retries = _checked_retries(max_retries)

    @property
    def base_url(self) -> str:
        """The URL the endpoint paths are appended to."""
        return self._base_url

    @property
    def timeout(self) -> httpx.Timeout:
        """The timeout of each attempt."""
        return self._timeout

    @property
    def max_retries(self) -> int:
        """How many times a failed request is retried (0: never)."""
        return self._max_retries

    def with_options(
        self, *, timeout: Timeout | NotGiven = NOT_GIVEN, max_retries: int | NotGiven = NOT_GIVEN
    ) -> Self:
        """A copy with other options, sharing this client's connection pool and headers (closing either
        closes both)."""
        clone = copy.copy(self)
        if not isinstance(timeout, NotGiven):
            clone._timeout = _checked_timeout(timeout)
        if not isinstance(max_retries, NotGiven):
            clone._max_retries = _checked_retries(max_retries)
        return clone

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(base_url={self._base_url!r}, timeout={self._timeout!r}, "
            f"max_retries={self._max_retries})"
        )

    def _build(self, model: str, prompt: str, params: Mapping[str, Any], *, stream: bool) -> Request:
        """The request of one call (arguments checked now); ``ClientClosedError`` on a closed client."""
        if self._closed():
            raise ClientClosedError(f"this {type(self).__name__} client is closed: build a new one")
        kwargs = self._wire.request(model, prompt, params, stream=stream and self.API.streams)
        headers = self._headers | kwargs["headers"]
        if stream and self.API.streams:
            headers["Accept"] = "text/event-stream"
        return Request(
            kwargs["method"].upper(),
            self._base_url + kwargs["url"],
            headers,
            encode_json(kwargs["json"]),
            self._timeout,
        )

    def _policy(self) -> _attempts.Attempts:
        return _attempts.Attempts(self._max_retries)

    def _checked(self, reply: Reply, request: Request, started: float) -> Reply:
        """``reply`` if it is a success (2xx), else its typed error raised; logged at DEBUG either way.

        A redirect is an error too: it is never followed, since the credentials would go with it.
        """
        _log_response(request, reply.status, started)
        if not 200 <= reply.status < 300:
            raise self._wire.status_error(reply.response())
        return reply

    def _completion(self, reply: Reply) -> Completion:
        try:
            return self._wire.parse(reply.content, _response_headers(reply.headers))
        except Malformed as exc:
            raise exc.at(reply.response()) from None

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

    def _chunks_failed(self, response: httpx.Response, exc: Exception) -> Exception:
        """The typed error for a failure while reading a stream's events."""
        return connection_error(exc, response.request) if is_transport_failure(exc) else exc

    def _stream_opened(self, response: httpx.Response, request: Request, started: float) -> httpx.Response:
        reply = Reply(response.status_code, response.headers.raw, b"", response.request, response)
        self._checked(reply, request, started)
        return response


class SyncClient(_ClientCore):
    """A client over an ``httpx.Client``: closes it on ``close()`` or leaving a ``with`` block."""

    def __init__(
        self,
        wire: Wire,
        settings: Settings,
        timeout: Timeout,
        max_retries: int,
        http_client: httpx.Client | None,
        limits: httpx.Limits | None = None,
        default_headers: Mapping[str, str] | None = None,
    ) -> None:
        limits = checked_limits(limits, http_client)
        super().__init__(wire, settings, timeout, max_retries, default_headers)
        if http_client is None:
            # httpx applies the environment's proxies only to a pool of its own making.
            context = ssl_context()
            transport = None if proxy_in_env() else CheckoutTransport(limits, context)
            http_client = httpx.Client(transport=transport, limits=limits, verify=context, trust_env=True)
        self._transport = HttpxTransport(http_client)
        self._closed = lambda: http_client.is_closed

    def close(self) -> None:
        """Close the connection pool (shared with ``with_options`` copies); later calls are refused."""
        self._transport.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _complete(
        self, model: str, prompt: str, params: Mapping[str, Any], policy: _attempts.Attempts | None = None
    ) -> Completion:
        """One completion through the attempt loop (``policy``: a batch's; else this client's retries)."""
        with _telemetry.call(self, model, prompt, params) as span:
            request = self._build(model, prompt, params, stream=False)

            def attempt() -> Completion:
                started = time.perf_counter()
                try:
                    reply = self._transport.send(request)
                except Exception as exc:
                    raise self._failed(request, started, exc) from exc
                return self._completion(self._checked(reply, request, started))

            return span.done(_attempts.run(attempt, policy or self._policy()))

    def _stream(
        self, model: str, prompt: str, params: Mapping[str, Any]
    ) -> Generator[CompletionChunk, None, None]:
        """The chunks of a call (arguments checked now, the request sent on the first ``next()``)."""
        if not self.API.streams:
            self._build(model, prompt, params, stream=False)  # check now, as a real stream does
            return self._one_chunk(model, prompt, params)
        return self._sse(self._build(model, prompt, params, stream=True), (model, prompt, params))

    def _one_chunk(
        self, model: str, prompt: str, params: Mapping[str, Any]
    ) -> Generator[CompletionChunk, None, None]:
        from ._results import whole

        yield whole(self._complete(model, prompt, params))

    def _open(self, request: Request) -> httpx.Response:
        """The stream's response, status checked, through the attempt loop (no retry after it opened)."""

        def attempt() -> httpx.Response:
            started = time.perf_counter()
            try:
                response = self._transport.stream(request)
                if not 200 <= response.status_code < 300:
                    try:
                        response.read()
                    finally:
                        response.close()
            except Exception as exc:
                raise self._failed(request, started, exc) from exc
            return self._stream_opened(response, request, started)

        return _attempts.run(attempt, self._policy())

    def _sse(self, request: Request, call: Called) -> Generator[CompletionChunk, None, None]:
        """The chunks of a server-sent-event stream; closing the generator closes the connection."""
        from httpx_sse import EventSource

        with _telemetry.call(self, *call, stream=True) as span:
            with span.active():
                response = self._open(request)
            try:
                if not _is_event_stream(response):
                    response.read()
                    raise invalid(response, "is not an event stream")
                headers = _response_headers(response.headers.raw)
                read = cast(StreamingWire, self._wire).chunk
                for event in EventSource(response).iter_sse():
                    chunk = read(event, response, headers)
                    if chunk is not None:
                        yield span.chunk(chunk)
            except Exception as exc:
                raise self._chunks_failed(response, exc) from exc
            finally:
                response.close()

    def _complete_many(
        self,
        model: str,
        prompts: Iterable[str],
        params: Mapping[str, Any],
        concurrency: int,
        ordered: bool,
        return_exceptions: bool,
        limits: tuple[float | None, float | None],
    ) -> BatchIterator:
        from . import _batch

        return _batch.complete_many(
            self, model, prompts, params, concurrency, ordered, return_exceptions, limits
        )


class AsyncClient(_ClientCore):
    """A client over aiohttp or httpx (``wrapper._transport.AsyncTransports``): ``await close()``.

    It works from any event loop, with a connection pool of its own in each.
    """

    def __init__(
        self,
        wire: Wire,
        settings: Settings,
        timeout: Timeout,
        max_retries: int,
        http_client: httpx.AsyncClient | None,
        limits: httpx.Limits | None = None,
        default_headers: Mapping[str, str] | None = None,
    ) -> None:
        limits = checked_limits(limits, http_client)
        super().__init__(wire, settings, timeout, max_retries, default_headers)
        if http_client is not None and not isinstance(http_client, httpx.AsyncClient):
            raise ValueError(f"http_client must be an httpx.AsyncClient; got {type(http_client).__name__}")
        self._transports = transports = AsyncTransports(
            http_client, limits=limits, verify=ssl_context, proxy=proxy_in_env()
        )
        self._closed = lambda: transports.closed

    async def close(self) -> None:
        """Close the connection pools (shared with ``with_options`` copies); later calls are refused."""
        await self._transports.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def _complete(
        self, model: str, prompt: str, params: Mapping[str, Any], policy: _attempts.Attempts | None = None
    ) -> Completion:
        """One completion through the attempt loop (``policy``: a batch's; else this client's retries)."""
        with _telemetry.call(self, model, prompt, params) as span:
            request = self._build(model, prompt, params, stream=False)

            async def attempt() -> Completion:
                transport = await self._transports.pick()
                started = time.perf_counter()
                try:
                    reply = await transport.send(request)
                except Exception as exc:
                    raise self._failed(request, started, exc) from exc
                return self._completion(self._checked(reply, request, started))

            return span.done(await _attempts.arun(attempt, policy or self._policy()))

    def _stream(
        self, model: str, prompt: str, params: Mapping[str, Any]
    ) -> AsyncGenerator[CompletionChunk, None]:
        """The chunks of a call (arguments checked now, the request sent on the first ``anext()``)."""
        if not self.API.streams:
            self._build(model, prompt, params, stream=False)
            return self._one_chunk(model, prompt, params)
        return self._sse(self._build(model, prompt, params, stream=True), (model, prompt, params))

    async def _one_chunk(
        self, model: str, prompt: str, params: Mapping[str, Any]
    ) -> AsyncGenerator[CompletionChunk, None]:
        from ._results import whole

        yield whole(await self._complete(model, prompt, params))

    async def _open(self, request: Request) -> httpx.Response:
        """The stream's response, status checked, through the attempt loop (no retry after it opened)."""

        async def attempt() -> httpx.Response:
            transport = await self._transports.pick()
            started = time.perf_counter()
            try:
                response = await transport.stream(request)
                if not 200 <= response.status_code < 300:
                    try:
                        await response.aread()
                    finally:
                        await response.aclose()
            except Exception as exc:
                raise self._failed(request, started, exc) from exc
            return self._stream_opened(response, request, started)

        return await _attempts.arun(attempt, self._policy())

    async def _sse(self, request: Request, call: Called) -> AsyncGenerator[CompletionChunk, None]:
        """The chunks of a server-sent-event stream; ``aclose()`` on the generator closes the connection."""
        from httpx_sse import EventSource

        with _telemetry.call(self, *call, stream=True) as span:
            with span.active():
                response = await self._open(request)
            try:
                if not _is_event_stream(response):
                    await response.aread()
                    raise invalid(response, "is not an event stream")
                headers = _response_headers(response.headers.raw)
                read = cast(StreamingWire, self._wire).chunk
                async for event in EventSource(response).aiter_sse():
                    chunk = read(event, response, headers)
                    if chunk is not None:
                        yield span.chunk(chunk)
            except Exception as exc:
                raise self._chunks_failed(response, exc) from exc
            finally:
                await response.aclose()

    def _complete_many(
        self,
        model: str,
        prompts: Iterable[str] | AsyncIterable[str],
        params: Mapping[str, Any],
        concurrency: int,
        ordered: bool,
        return_exceptions: bool,
        limits: tuple[float | None, float | None],
    ) -> AsyncBatchIterator:
        from . import _batch

        return _batch.acomplete_many(
            self, model, prompts, params, concurrency, ordered, return_exceptions, limits
        )


C = TypeVar("C", bound=SyncClient)


class DefaultClient(Generic[C]):
    """The client behind a module's ``complete``/``stream``: built from the environment on first use."""

    def __init__(self, factory: Callable[[], C]) -> None:
        self._factory = factory
        self._client: C | None = None
        self._lock = threading.Lock()

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
