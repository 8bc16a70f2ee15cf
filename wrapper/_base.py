"""What every client shares: settings and options, the send-with-retries loop, debug logging, closing.

A provider module (``wrapper.scale``, ``wrapper.gradient``) supplies a ``Wire``: how its endpoint's
requests are built and its responses read, through the generated client. The wire and the
generated code are imported when the first client is built, not when the module is imported.

Every request carries the same User-Agent and the client's ``default_headers``; redirects are
never followed. The default pools have no cap on connections, use the environment's proxies and CA
bundle, and the default async clients post ``complete`` on an aiohttp fast lane when nothing
(a proxy, a mock or an instrumentation of httpx) needs the request to go through httpx.
"""

from __future__ import annotations

import atexit
import copy
import functools
import logging
import os
import threading
import time
from collections.abc import (
    AsyncGenerator,
    AsyncIterable,
    Awaitable,
    Callable,
    Generator,
    Iterable,
    Mapping,
)
from typing import TYPE_CHECKING, Any, Generic, NamedTuple, Protocol, Self, TypeVar

import httpx

from generated.exceptions import APIError, APIStatusError

from . import _retry, _telemetry
from ._checkout import CheckoutTransport
from ._errors_map import Malformed, connection_error, invalid, is_transport_failure
from ._network import (
    checked_headers,
    checked_limits,
    header_value,
    httpx_is_watched,
    proxy_in_env,
    ssl_context,
    user_agent,
)
from ._redact import redacted_headers

if TYPE_CHECKING:
    from httpx_sse import ServerSentEvent

    from ._aiohttp_lane import Lane
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

    provider: str
    """The provider's name in telemetry (``gen_ai.provider.name``)."""

    def parse(self, content: bytes, headers: ResponseHeaders) -> Completion:
        """The result in a successful response's body; ``Malformed`` if it is not what the spec promises."""
        ...

    def status_error(self, response: httpx.Response) -> APIStatusError:
        """The typed error for an error response (its body already read)."""
        ...


ChunkReader = Callable[["ServerSentEvent", httpx.Response, "ResponseHeaders"], "CompletionChunk | None"]
Called = tuple[str, str, Mapping[str, Any]]
"""What a call was asked: model, prompt and keyword parameters (for telemetry)."""


@functools.lru_cache(maxsize=1024)
def _url(text: str) -> httpx.URL:
    """The parsed URL: parsing is a good part of httpx's per-request cost, and clients call few URLs."""
    return httpx.URL(text)


def _is_event_stream(response: httpx.Response) -> bool:
    content_type: str = response.headers.get("content-type", "")
    return content_type.partition(";")[0].strip() == "text/event-stream"


def _log_response(method: str, url: object, status: int, started: float, headers: Mapping[str, str]) -> None:
    if logger.isEnabledFor(logging.DEBUG):
        logger.debug(
            "%s %s -> %d in %.3fs; request headers %s",
            method,
            url,
            status,
            time.perf_counter() - started,
            redacted_headers({name.lower(): value for name, value in headers.items()}),  # as httpx has them
        )


def _response_headers(response: httpx.Response) -> ResponseHeaders:
    from ._results import ResponseHeaders

    return ResponseHeaders(response.headers.raw)


def _checked_retries(max_retries: int) -> int:
    if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
        raise ValueError(f"max_retries must be an integer >= 0; got {max_retries!r}")
    return max_retries


def _timeout(timeout: Timeout) -> httpx.Timeout:
    return timeout if isinstance(timeout, httpx.Timeout) else httpx.Timeout(timeout)


class _ClientCore:
    """Settings, options and the parts of sending that do no I/O, for sync and async clients alike."""

    _http: httpx.Client | httpx.AsyncClient

    def __init__(
        self,
        wire: Wire,
        settings: Settings,
        timeout: Timeout,
        max_retries: int,
        default_headers: Mapping[str, str] | None,
    ) -> None:
        self._wire = wire
        self._base_url = settings.base_url.rstrip("/")
        self._headers = {"User-Agent": user_agent(), **checked_headers(default_headers), **settings.headers}
        self._timeout = _timeout(timeout)
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
            clone._timeout = _timeout(timeout)
        if not isinstance(max_retries, NotGiven):
            clone._max_retries = _checked_retries(max_retries)
        return clone

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(base_url={self._base_url!r}, timeout={self._timeout!r}, "
            f"max_retries={self._max_retries})"
        )

    def _request(self, kwargs: dict[str, Any], *, stream: bool = False) -> httpx.Request:
        """The request for a generated ``_get_kwargs`` result, with the client's URL, credentials, timeout."""
        headers = self._headers | kwargs["headers"]
        if stream:
            headers["Accept"] = "text/event-stream"
        url = _url(self._base_url + kwargs["url"])
        return self._http.build_request(
            kwargs["method"], url, json=kwargs["json"], headers=headers, timeout=self._timeout
        )

    def _completion(self, response: httpx.Response) -> Completion:
        try:
            return self._wire.parse(response.content, _response_headers(response))
        except Malformed as exc:
            raise exc.at(response) from None

    def _succeeded(self, request: httpx.Request, response: httpx.Response, started: float) -> httpx.Response:
        """``response`` if it is a success (2xx), else its typed error raised; logged at DEBUG either way.

        A redirect is an error too: it is never followed, since the credentials would go with it.
        """
        _log_response(request.method, request.url, response.status_code, started, request.headers)
        if not 200 <= response.status_code < 300:
            raise self._wire.status_error(response)
        return response

    def _transport_failed(self, request: httpx.Request, started: float, exc: Exception) -> APIError:
        if logger.isEnabledFor(logging.DEBUG):
            logger.debug(
                "%s %s failed after %.3fs: %r",
                request.method,
                request.url,
                time.perf_counter() - started,
                exc,
            )
        return connection_error(exc, request)


class SyncClient(_ClientCore):
    """A client over an ``httpx.Client``: closes it on ``close()`` or leaving a ``with`` block."""

    _http: httpx.Client
    complete: Callable[..., Completion]  # each provider's, with its own keyword arguments

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
        self._http = http_client

    def close(self) -> None:
        """Close the connection pool (shared with ``with_options`` copies)."""
        self._http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _retrying(self, attempt: Callable[[], T]) -> T:
        """``attempt()`` until it returns; its typed errors are retried as ``_retry`` says, else raised."""
        retries = 0
        while True:
            try:
                return attempt()
            except APIError as error:
                delay = _retry.retry_or_raise(error, retries, self._max_retries)
            _retry.sleep(delay)
            retries += 1

    def _send(self, request: httpx.Request, *, stream: bool = False) -> httpx.Response:
        """The successful response to ``request``, retrying as ``_retry`` says; else the typed error."""

        def attempt() -> httpx.Response:
            started = time.perf_counter()
            try:
                response = self._http.send(request, stream=stream, follow_redirects=False)
                if stream and not 200 <= response.status_code < 300:
                    try:
                        response.read()
                    finally:
                        response.close()
            except Exception as exc:
                if not is_transport_failure(exc):
                    raise
                raise self._transport_failed(request, started, exc) from exc
            return self._succeeded(request, response, started)

        return self._retrying(attempt)

    def complete_many(
        self,
        model: str,
        prompts: Iterable[str],
        *,
        concurrency: int = 16,
        ordered: bool = False,
        return_exceptions: bool = False,
        requests_per_minute: float | None = None,
        tokens_per_minute: float | None = None,
        **params: Any,
    ) -> BatchIterator:
        """``complete`` for each prompt, at most ``concurrency`` in flight, paced to the limits given.

        Iterate for the results as they finish; ``.stats`` has the batch's figures. See ``wrapper._batch``.
        """
        from . import _batch

        return _batch.complete_many(
            self,
            model,
            prompts,
            concurrency=concurrency,
            ordered=ordered,
            return_exceptions=return_exceptions,
            requests_per_minute=requests_per_minute,
            tokens_per_minute=tokens_per_minute,
            **params,
        )

    def _complete(self, kwargs: dict[str, Any], call: Called) -> Completion:
        with _telemetry.call(self, *call) as span:
            return span.done(self._completion(self._send(self._request(kwargs))))

    def _one_chunk(self, kwargs: dict[str, Any], call: Called) -> Generator[CompletionChunk, None, None]:
        from ._results import whole

        yield whole(self._complete(kwargs, call))

    def _sse(
        self, request: httpx.Request, read: ChunkReader, call: Called
    ) -> Generator[CompletionChunk, None, None]:
        """The chunks of a server-sent-event stream; closing the generator closes the connection."""
        from httpx_sse import EventSource

        with _telemetry.call(self, *call, stream=True) as span:
            with span.active():
                response = self._send(request, stream=True)
            try:
                if not _is_event_stream(response):
                    response.read()
                    raise invalid(response, "is not an event stream")
                headers = _response_headers(response)
                for event in EventSource(response).iter_sse():
                    chunk = read(event, response, headers)
                    if chunk is not None:
                        yield span.chunk(chunk)
            except Exception as exc:
                if not is_transport_failure(exc):
                    raise
                raise connection_error(exc, response.request) from exc
            finally:
                response.close()


class AsyncClient(_ClientCore):
    """A client over an ``httpx.AsyncClient``, plus, by default, an aiohttp fast lane: ``await close()``.

    ``complete`` takes the fast lane when the client built its own pool, no proxy was configured in
    the environment, and no mock or tracer has replaced httpx's transport functions (checked on
    each call). Everything else (streams, a user's ``http_client``) goes through httpx.
    """

    _http: httpx.AsyncClient
    _lane: Lane | None = None
    complete: Callable[..., Awaitable[Completion]]  # each provider's, with its own keyword arguments

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
        if http_client is None:
            context = ssl_context()
            http_client = httpx.AsyncClient(limits=limits, verify=context, trust_env=True)
            if not proxy_in_env():  # with a proxy, httpx applies it (and NO_PROXY) to every request
                from ._aiohttp_lane import Lane  # here, not at import: aiohttp is slow to import

                self._lane = Lane(context, limits)
        self._http = http_client

    async def close(self) -> None:
        """Close the connection pools (shared with ``with_options`` copies)."""
        await self._http.aclose()
        if self._lane is not None:
            await self._lane.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def _retrying(self, attempt: Callable[[], Awaitable[T]]) -> T:
        """``await attempt()`` until it returns; its typed errors are retried as ``_retry`` says."""
        retries = 0
        while True:
            try:
                return await attempt()
            except APIError as error:
                delay = _retry.retry_or_raise(error, retries, self._max_retries)
            await _retry.asleep(delay)
            retries += 1

    async def _send(self, request: httpx.Request, *, stream: bool = False) -> httpx.Response:
        """The successful response to ``request``, retrying as ``_retry`` says; else the typed error."""

        async def attempt() -> httpx.Response:
            started = time.perf_counter()
            try:
                response = await self._http.send(request, stream=True, follow_redirects=False)
                if not stream or not 200 <= response.status_code < 300:
                    try:
                        await response.aread()
                    finally:
                        await response.aclose()
            except Exception as exc:
                if not is_transport_failure(exc):
                    raise
                raise self._transport_failed(request, started, exc) from exc
            return self._succeeded(request, response, started)

        return await self._retrying(attempt)

    def complete_many(
        self,
        model: str,
        prompts: Iterable[str] | AsyncIterable[str],
        *,
        concurrency: int = 16,
        ordered: bool = False,
        return_exceptions: bool = False,
        requests_per_minute: float | None = None,
        tokens_per_minute: float | None = None,
        **params: Any,
    ) -> AsyncBatchIterator:
        """``complete`` for each prompt, at most ``concurrency`` in flight, paced to the limits given.

        ``async for`` the results as they finish; ``.stats`` has the batch's figures.
        """
        from . import _batch

        return _batch.acomplete_many(
            self,
            model,
            prompts,
            concurrency=concurrency,
            ordered=ordered,
            return_exceptions=return_exceptions,
            requests_per_minute=requests_per_minute,
            tokens_per_minute=tokens_per_minute,
            **params,
        )

    async def _complete(self, kwargs: dict[str, Any], call: Called) -> Completion:
        with _telemetry.call(self, *call) as span:
            return span.done(await self._post(kwargs))

    async def _post(self, kwargs: dict[str, Any]) -> Completion:
        lane = self._lane
        if lane is None or httpx_is_watched():
            return self._completion(await self._send(self._request(kwargs)))
        from ._aiohttp_lane import encode_json
        from ._results import ResponseHeaders

        url = self._base_url + kwargs["url"]
        headers = self._headers | kwargs["headers"]
        content = encode_json(kwargs["json"])

        async def attempt() -> Completion:
            # The httpx request (which errors carry) is built only when something went wrong.
            started = time.perf_counter()
            try:
                reply = await lane.post(url, headers, content, self._timeout)
            except httpx.TransportError as exc:
                raise self._transport_failed(self._request(kwargs), started, exc) from exc
            _log_response("POST", url, reply.status, started, headers)
            if not 200 <= reply.status < 300:
                raise self._wire.status_error(reply.response(self._request(kwargs)))
            try:
                return self._wire.parse(reply.content, ResponseHeaders(reply.headers))
            except Malformed as exc:
                raise exc.at(reply.response(self._request(kwargs))) from None

        return await self._retrying(attempt)

    async def _one_chunk(self, kwargs: dict[str, Any], call: Called) -> AsyncGenerator[CompletionChunk, None]:
        from ._results import whole

        yield whole(await self._complete(kwargs, call))

    async def _sse(
        self, request: httpx.Request, read: ChunkReader, call: Called
    ) -> AsyncGenerator[CompletionChunk, None]:
        """The chunks of a server-sent-event stream; ``aclose()`` on the generator closes the connection."""
        from httpx_sse import EventSource

        with _telemetry.call(self, *call, stream=True) as span:
            with span.active():
                response = await self._send(request, stream=True)
            try:
                if not _is_event_stream(response):
                    await response.aread()
                    raise invalid(response, "is not an event stream")
                headers = _response_headers(response)
                async for event in EventSource(response).aiter_sse():
                    chunk = read(event, response, headers)
                    if chunk is not None:
                        yield span.chunk(chunk)
            except Exception as exc:
                if not is_transport_failure(exc):
                    raise
                raise connection_error(exc, response.request) from exc
            finally:
                await response.aclose()


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
