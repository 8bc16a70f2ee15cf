"""What the sync and async clients share: settings and options, building requests and reading answers.

A client builds each call's request once (``Request``: URL, headers, JSON body, timeouts), hands it
to a transport (``transports``) inside its attempt loop (``retries``), and turns what comes back into
a typed result or error; ``sync_client`` and ``async_client`` hold the I/O of each side. A provider
module (``wrapper.scale``, ``wrapper.gradient``) supplies its descriptor (``api.Api``) and a wire
(``wires``): how its endpoint's requests are built and its responses read, through the generated
client. The wire and the generated code are imported when the first client is built, not when the
module is imported.

Every request carries the same User-Agent and the client's ``default_headers``; redirects are
never followed.
"""

from __future__ import annotations

import copy
import json
import json.encoder
import logging
import os
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Self, Unpack, cast

import httpx

from wrapper._generated.exceptions import APIConnectionError, APIStatusError, APITimeoutError, NotFoundError

from .error_mapping import Malformed, connection_error, is_transport_failure, requested
from .headers import checked_headers, user_agent
from .hooks import CallInfo
from .insecure import warn_if_insecure
from .options import Options, RequestOptions, checked_limits, constructor_signature
from .raw import RAW, RawResponse
from .redact import redacted_headers, redacted_url
from .results import ResponseHeaders, routed
from .retries import Attempts, Target, hooks_of
from .settings import Connect, checked_arguments, checked_base_url, checked_http_client, credentials, from_env
from .transports import fork
from .transports.base import ClientClosedError, CommonHeaders, Reply, Request
from .transports.library import Http, classes
from .validate import check_encodable

if TYPE_CHECKING:
    from wrapper.apis import Api

    from .results import Completion, CompletionChunk

__all__ = [
    "ClientCore",
    "answered_completion",
    "chunks_failed",
    "is_event_stream",
    "replayed",
    "stream_failed",
    "target_request",
]

logger = logging.getLogger("wrapper")


def is_event_stream(response: httpx.Response) -> bool:
    content_type: str = response.headers.get("content-type", "")
    return content_type.partition(";")[0].strip() == "text/event-stream"


def _log_response(request: Request, status: int, started: float) -> None:
    if logger.isEnabledFor(logging.DEBUG):
        logger.debug(
            "%s %s -> %d in %.3fs; request headers %s",
            request.method,
            redacted_url(request.url),
            status,
            time.perf_counter() - started,
            redacted_headers({name.lower(): value for name, value in request.headers.items()}),
        )


_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)
"""Bodies as httpx encodes a ``json=`` argument, so that every transport sends the same bytes (one
encoder: ``json.dumps`` with these arguments builds one a call)."""
_make_c_encoder: Any = getattr(json.encoder, "c_make_encoder", None)  # None outside CPython
_C_ENCODER: Any = (
    None
    if _make_c_encoder is None
    else _make_c_encoder(
        None, _ENCODER.default, json.encoder.encode_basestring, None, ":", ",", False, False, False
    )
)
"""``_ENCODER``'s C encoder, made once: ``encode`` makes one a call, which cost half of a body's 1.5 us.
Made without the check for circular references, whose ``markers`` would be shared by every call."""


def _encoded(body: Mapping[str, Any]) -> bytes:
    """``body`` as UTF-8 JSON, as ``_ENCODER`` encodes it (its ``ValueError`` for a circular reference)."""
    if _C_ENCODER is not None:
        try:
            return "".join(_C_ENCODER(body, 0)).encode()
        except RecursionError:  # circular, or nested too deep: the plain encoder says which
            pass
    return _ENCODER.encode(body).encode()


def target_request(target: Target, *, prompt: str, stream: bool) -> Request:
    """A routed call's request to ``target`` (``Attempts.build``), its arguments checked now."""
    client: ClientCore = target.client
    return client._build(target.model, prompt, target.params, target.options, stream=stream)


def answered_completion(given: Completion | Sequence[CompletionChunk], target: Target | None) -> Completion:
    """The completion a hook answered a call with (a cache's hit), carrying a routed call's route."""
    completion = cast("Completion", given)
    return completion if target is None else routed(completion, target.route)


def replayed(
    given: Completion | Sequence[CompletionChunk], target: Target | None, attempts: Attempts, streams: bool
) -> tuple[httpx.Response, CompletionChunk, list[CompletionChunk]]:
    """A stream a hook answered (a cache's hit): a stand-in for its response (a ``Response`` of the client's
    HTTP library: status 200, the request, the ``x-request-id`` the chunks came with), its first chunk and
    the others."""
    chunks = list(cast("Sequence[CompletionChunk]", given))
    if target is not None:
        chunks = [routed(chunk, target.route) for chunk in chunks]
        streams = target.client.API.streams
    request = attempts.request
    assert request is not None
    headers = [("content-type", "text/event-stream" if streams else "application/json")]
    if chunks[0].request_id is not None:
        headers.append(("x-request-id", chunks[0].request_id))
    response = request.library.Response(200, headers=headers, request=request.as_httpx())
    return response, chunks[0], chunks[1:]


def chunks_failed(response: httpx.Response, exc: Exception, options: Options) -> Exception:
    """The typed error for a failure while reading a stream's events (an idle stream's says so)."""
    if isinstance(exc, APIStatusError):  # an error event
        return requested(exc)
    idle = options.stream_idle_timeout
    if isinstance(exc, classes("ReadTimeout")) and idle is not None:
        return APITimeoutError(
            f"the stream sent nothing for {idle:g} s (stream_idle_timeout)", request=response.request
        )
    return connection_error(exc, response.request) if is_transport_failure(exc) else exc


def stream_failed(response: httpx.Response, exc: Exception, attempts: Attempts) -> Exception:
    """The error that ends a stream after its first chunk (never retried): as ``chunks_failed``, a
    connection error saying how many attempts were made and that the stream had begun."""
    error = chunks_failed(response, exc, attempts.sending)
    if isinstance(error, APIConnectionError) and error is not exc:
        return attempts.gave_up(error, begun=True)
    return error


class ClientCore:
    """Settings, options and the parts of a call that do no I/O, for sync and async clients alike."""

    API: Api
    _pool_closed: Callable[[], bool]
    _derived = False
    """True for a ``with_options`` copy: the pool is its parent's, and closing the copy leaves it open."""
    _closed_alone = False

    def _configure(
        self, connect: Connect, given: Mapping[str, Any], *, asynchronous: bool
    ) -> tuple[Any, httpx.Limits]:
        """The settings of a client of ``self.API`` from its constructor's keyword arguments (``given``:
        credentials and ``ClientOptions``, a ``TypeError`` for one the class does not take); ``connect``
        is its API's module's. Returns what its pool is built from: the ``http_client`` given (an httpx
        or httpx2 ``Client``, ``AsyncClient`` if ``asynchronous``), checked, and the connection limits;
        ``_library`` is the HTTP library the client speaks (``transports.library``)."""
        from .logs import setup_logging  # SGP_CLIENT_LOG, GRADIENT_LOG: read on an API's first client

        api = self.API
        checked_arguments(api, type(self).__name__, given)
        arguments = dict(given)
        http_client, limits = arguments.pop("http_client", None), arguments.pop("limits", None)
        self._library: Http = checked_http_client(http_client, asynchronous=asynchronous)
        limits = checked_limits(limits, http_client)
        setup_logging(api.log_env)
        self._wire, self._credentials = connect(credentials(api, arguments))
        base_url = from_env(arguments.pop("base_url", None), api.base_url_env, "base_url")
        self._base_url = checked_base_url(base_url or api.default_base_url, api)
        self._headers = {
            "User-Agent": user_agent(self._library),
            **checked_headers(arguments.pop("default_headers", None)),
        }
        self._common: dict[tuple[tuple[str, str], ...], CommonHeaders] = {}  # shared with copies
        self._options = Options(hooks=api.hooks).merged(arguments)
        warn_if_insecure(self._base_url, http_client)
        return http_client, limits

    _HTTP_CLIENT: str
    """The kind of ``http_client`` the side's clients take (``ClientOptions``' ``H``), shown in signatures."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """An API's client class shows each of its constructor's arguments (``help``, ``inspect``)."""
        super().__init_subclass__(**kwargs)
        if "API" in cls.__dict__:
            credentials = (credential.keyword for credential in cls.API.credentials)
            cls.__signature__ = constructor_signature(credentials, cls._HTTP_CLIENT)  # type: ignore[attr-defined]

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
        this client's. ``ValueError`` names a bad option, ``TypeError`` an unknown one.

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

    def _attempts(
        self, options: Options, model: str, prompt: str, params: Mapping[str, Any], *, stream: bool
    ) -> Attempts:
        """A call's attempts, with the hooks its options' factories give it."""
        if options.cache is None and not any(options.hooks):  # no factory, or none on (``HookFactory``)
            return Attempts(options, stream=stream)
        started = time.monotonic()
        deadline = None if options.deadline is None else started + options.deadline
        hooks = hooks_of(options, CallInfo(self, model, prompt, params, stream, None, deadline, options))
        return Attempts(options, hooks, stream=stream, started=started)

    def _stream_call(
        self, model: str, prompt: str, kwargs: Mapping[str, Any]
    ) -> tuple[Request, Callable[[], Attempts]]:
        """A stream's request (its arguments checked now) and what makes its attempts once it is opened."""
        params, options = self._options.split(kwargs)
        request = self._build(model, prompt, params, options, stream=True)

        def attempts() -> Attempts:
            made = self._attempts(options, model, prompt, params, stream=True)
            made.request = request
            return made

        return request, attempts

    def _build(
        self, model: str, prompt: str, params: Mapping[str, Any], options: Options, *, stream: bool
    ) -> Request:
        """The request of one call (arguments checked now); ``ClientClosedError`` on a closed client."""
        if self._closed():
            raise ClientClosedError(f"this {type(self).__name__} client is closed: build a new one")
        if fork.pid != os.getpid():  # a child forked by C code that ran no fork hooks: run them now
            fork.missed()
        streams = stream and self.API.streams
        try:
            kwargs = self._wire.request(model, prompt, params, stream=streams)
            url = self._base_url + kwargs["url"]
            if options.extra_query:
                url = str(httpx.URL(url).copy_merge_params(options.extra_query))
            body = {**kwargs["json"], **options.extra_body} if options.extra_body else kwargs["json"]
            content = _encoded(body)
        except UnicodeEncodeError:  # a lone surrogate somewhere: say in which argument
            extra = {"extra_query": options.extra_query, "extra_body": options.extra_body}
            check_encodable({"model": model, "prompt": prompt, **params, **extra})
            raise
        if options.extra_headers or streams:
            headers = {**self._headers, **options.extra_headers, **self._credentials, **kwargs["headers"]}
            if streams:
                headers["Accept"] = "text/event-stream"
        else:
            headers = self._common_headers(kwargs["headers"])
        return Request(kwargs["method"].upper(), url, headers, content, options.timeout, self._library)

    def _common_headers(self, wire: Mapping[str, str]) -> CommonHeaders:
        """The headers of a plain call whose request builder gave ``wire``: one object while they are
        the same (``CommonHeaders``)."""
        key = tuple(wire.items())
        headers = self._common.get(key)
        if headers is None:
            headers = self._common[key] = CommonHeaders({**self._headers, **self._credentials, **wire})
        return headers

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

    def _result(self, reply: Reply, route: str | None = None) -> Completion | RawResponse:
        """The completion in ``reply`` (its ``RawResponse`` inside ``with_raw_response``), carrying the
        ``route`` that served it (a routed call's)."""
        try:
            completion = self._wire.parse(reply.content, ResponseHeaders(reply.headers))
        except Malformed as exc:
            raise exc.at(reply.response()) from None
        if route is not None:
            completion = routed(completion, route)
        return RawResponse(reply.response(), completion) if RAW.get() else completion

    def _failed(self, request: Request, started: float, exc: Exception) -> Exception:
        """The typed error for what a transport raised (re-raised as is if it is not a transport failure)."""
        if not is_transport_failure(exc):
            return exc
        elapsed = time.perf_counter() - started
        error = connection_error(exc, request.as_httpx())  # scrubs exc of the credentials, first
        if logger.isEnabledFor(logging.DEBUG):
            logger.debug(
                "%s %s failed after %.3fs: %r", request.method, redacted_url(request.url), elapsed, exc
            )
        return error

    def _stream_opened(self, response: httpx.Response, request: Request, started: float) -> httpx.Response:
        """The stream's response, its status checked."""
        reply = Reply(response.status_code, response.headers.raw, b"", response.request, response)
        self._checked(reply, request, started)
        return response
