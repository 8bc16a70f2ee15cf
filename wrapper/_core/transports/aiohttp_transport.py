"""The async clients' default transport: requests on an ``aiohttp`` session, failing as httpx fails.

httpx's async pool and request objects cost more per call than aiohttp itself under concurrency, so
a default async client sends with aiohttp, on the same TLS context and pool limits it would give
httpx. ``send`` builds no httpx object at all; ``stream`` hands back an ``httpx.Response`` whose body
is aiohttp's, so a stream is read (and its SSE parsed by httpx-sse) exactly as httpx's would be.

Both transports must read the same responses alike, so aiohttp is set to what httpx does: it asks
for the encodings httpx decodes and leaves bodies to httpx's decoders (an encoding neither asked
for nor known passes through, as in httpx); it reads heads as large as httpx's parser does. Its
timeouts are httpx's: the connect timeout bounds connecting, the host name's lookup included, and a
request waits for a free connection (``limits.max_connections``) up to the pool timeout, counted
here, not by aiohttp (whose wait for its pool counts toward its connect timeout).
Every aiohttp failure is raised as the httpx exception of the same kind, in words that do not
carry the HTTP status aiohttp's parser errors hold (one aiohttp would answer with as a server,
not one the server sent). On httpx2 (``library``), "httpx" reads httpx2 throughout: its exceptions,
responses, decoders and the encodings they read.
"""

from __future__ import annotations

import asyncio
import functools
import importlib
import io
import ssl
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any, cast

import aiohttp
import aiohttp.http_exceptions
import httpx
from aiohttp.client_proto import ResponseHandler

from .base import PoolDefaults, Reply, Request
from .library import Http, also

__all__ = ["AiohttpTransport"]

_LARGE = 1 << 20
"""Bodies above this go as a file object: aiohttp warns that writing them from bytes blocks the loop."""
_HEAD = 100 * 1024
"""The largest response head httpx reads (httpcore's limit for h11); aiohttp's default is 8,190
bytes a line, so a header a little over 8 KiB failed on one transport only."""


@functools.lru_cache(maxsize=32)
def _client_timeout(connect: float | None, read: float | None) -> aiohttp.ClientTimeout:
    """httpx's timeouts in aiohttp's terms: its ``connect`` bounds the lookup and connecting (aiohttp's
    pool is uncapped: the transport waits for a free connection itself). Kept for the next request
    with the same timeouts (most are): building one costs 2 us."""
    return aiohttp.ClientTimeout(connect=connect, sock_read=read)


def _httpx_error(library: Http, exc: Exception) -> httpx.TransportError:
    """``library``'s exception for an aiohttp (or asyncio) failure, the one httpx raises in that case."""
    kind: type[httpx.TransportError]
    if isinstance(exc, aiohttp.ConnectionTimeoutError):  # connecting, the host name's lookup included
        kind = library.ConnectTimeout
    elif isinstance(exc, TimeoutError):  # aiohttp's read timeout, or the wait for a stream's response
        kind = library.ReadTimeout
    elif isinstance(exc, aiohttp.ClientConnectorError):  # refused, DNS, TLS handshake and certificate
        kind = library.ConnectError
    elif isinstance(exc, aiohttp.ClientOSError | aiohttp.ClientPayloadError):  # reset, cut mid-body
        kind = library.ReadError
    else:  # disconnected before answering, a garbled status line or header, ...
        kind = library.RemoteProtocolError
    error = kind(_described(exc))
    error.__cause__ = exc
    return error


def _described(exc: Exception) -> str:
    """What went wrong, in aiohttp's words less the status its parser's errors carry ("400, message=")."""
    cause = exc.__cause__
    if isinstance(exc, aiohttp.ClientPayloadError) and isinstance(
        cause, aiohttp.http_exceptions.HttpProcessingError
    ):
        return f"the response body broke off: {cause.message}"
    if isinstance(exc, aiohttp.ClientResponseError | aiohttp.http_exceptions.HttpProcessingError):
        return exc.message
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _decoded(library: Http, headers: Sequence[tuple[bytes, bytes]], content: bytes) -> bytes:
    """``content`` decoded as its Content-Encoding says, by ``library``'s decoders (its
    ``DecodingError`` if it does not decode)."""
    return library.Response(200, headers=headers, content=content).content


class _Protocol(ResponseHandler):
    """aiohttp's connection protocol, its read timeout (``sock_read``) kept by one timer a connection.

    aiohttp cancels its timer and arms a new one on every read: two or three a request, which cost a
    request about 3 us of CPU (a tenth of the client's own cost over aiohttp's). Here a read only moves
    the time by which the next must come (``_due``); the armed timer, when it fires, arms itself again
    for that time, or times the read out if it has passed. Armed again earlier only for a request with
    a shorter timeout; cancelled when the connection closes.
    """

    _due = 0.0
    """The loop time by which data must come; 0: nothing is being read."""

    def _reschedule_timeout(self) -> None:
        timeout = self._read_timeout
        if not timeout:
            self._due = 0.0
            return
        self._due = due = self._loop.time() + timeout
        handle = self._read_timeout_handle
        if handle is None or handle.when() > due:
            if handle is not None:
                handle.cancel()
            self._read_timeout_handle = self._loop.call_at(due, self._timer_fired)

    def _drop_timeout(self) -> None:
        self._due = 0.0  # the timer stays armed for the connection's next response

    def _timer_fired(self) -> None:
        self._read_timeout_handle = None
        due = self._due
        if not due:
            return
        if self._loop.time() < due:
            self._read_timeout_handle = self._loop.call_at(due, self._timer_fired)
        else:
            self._on_read_timeout()

    def _disarm(self) -> None:
        handle, self._read_timeout_handle = self._read_timeout_handle, None
        if handle is not None:
            handle.cancel()

    def close(self) -> None:
        super().close()
        self._disarm()

    def abort(self) -> None:
        super().abort()
        self._disarm()

    def connection_lost(self, exc: BaseException | None) -> None:
        super().connection_lost(exc)
        self._disarm()


class _Connector(aiohttp.TCPConnector):
    """aiohttp's pool, handing out no connection that received anything while it was idle, its
    connections timing their reads with one timer each (``_Protocol``).

    aiohttp drops a connection with bytes left over when its response ends, but it goes on reading
    a pooled one: a response the server writes unasked while the connection is idle is queued, and
    the next request on it would take that as its answer (aiohttp#13656). Such a connection, or one
    that failed while idle, is closed when it is taken, and another is used.
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._factory = cast(
            "functools.partial[ResponseHandler]", functools.partial(_Protocol, loop=self._loop)
        )

    async def connect(  # aiohttp's signature
        self,
        req: aiohttp.ClientRequest,
        traces: list[Any],
        timeout: aiohttp.ClientTimeout,  # noqa: ASYNC109
    ) -> aiohttp.connector.Connection:
        while True:
            connection = await super().connect(req, traces, timeout)
            protocol = connection.protocol
            if protocol is None or not protocol.should_close:
                return connection
            connection.close()


class _Body(httpx.AsyncByteStream):
    """A streamed aiohttp response body as httpx reads one; closing it releases the connection.

    With ``idle``, each piece must come within that many seconds (aiohttp's own read timeout is
    then off for the request: it would time the first byte and the gaps alike).
    """

    def __init__(
        self,
        library: Http,
        response: aiohttp.ClientResponse,
        idle: float | None,
        release: Callable[[], None] | None,
    ) -> None:
        self._library = library
        self._response = response
        self._idle = idle
        self._release = release  # the pool slot the stream holds, if the pool is capped

    async def __aiter__(self) -> AsyncIterator[bytes]:
        content = self._response.content
        try:
            if self._idle is None:
                async for data in content.iter_any():
                    yield data
                return
            while True:
                async with asyncio.timeout(self._idle):
                    data = await content.readany()
                if not data:
                    return
                yield data
        except aiohttp.ClientError as exc:  # aiohttp's own read timeout among them
            raise _httpx_error(self._library, exc) from exc
        except TimeoutError:
            raise self._library.ReadTimeout(f"no data for {self._idle} s") from None

    async def aclose(self) -> None:
        if self._response.content.is_eof():
            self._response.release()  # read to the end: the connection goes back to the pool
        else:
            self._response.close()  # left early: the connection is closed, so the server stops
        release, self._release = self._release, None
        if release is not None:
            release()


@functools.cache
def _accept_encoding(library: Http) -> str:
    """The encodings ``library``'s decoders read (httpx2 reads zstd too), as its clients ask for them."""
    encodings: str = importlib.import_module(f"{library.__name__}._client").ACCEPT_ENCODING
    return encodings


class AiohttpTransport:
    """An aiohttp session, opened in the running loop on first use; never follows a redirect. Its
    responses and errors are ``library``'s."""

    def __init__(self, ssl_context: ssl.SSLContext, limits: httpx.Limits, library: Http) -> None:
        self._ssl = ssl_context
        self._limits = limits
        self._library = library
        self._session: aiohttp.ClientSession | None = None
        self._defaults: PoolDefaults  # the open session's default headers, set by ``_open``
        # The pool's cap: a slot per request in flight, a stream's held until its body is closed.
        cap = limits.max_connections
        self._slots = None if cap is None else asyncio.Semaphore(cap)

    def _open(self) -> aiohttp.ClientSession:
        connector = _Connector(
            limit=0,  # no cap in aiohttp: ``_slots`` holds it
            limit_per_host=0,
            ssl=self._ssl,
            keepalive_timeout=self._limits.keepalive_expiry,
        )
        # trust_env off: a client uses this transport only when no proxy is configured.
        self._session = aiohttp.ClientSession(
            connector=connector,
            trust_env=False,
            headers={"Accept-Encoding": _accept_encoding(self._library)},
            auto_decompress=False,  # httpx's decoders read the body (``_decoded``)
            max_line_size=_HEAD,
            max_field_size=_HEAD,
            max_headers=_HEAD // 4,  # as many as fit in a head of that size ("a:\r\n")
        )
        self._defaults = PoolDefaults(self._session.headers.update)
        return self._session

    def _request(self, request: Request, read: float | None) -> aiohttp.client._RequestContextManager:
        session = self._session or self._open()
        timeout = request.timeout
        return session.request(
            request.method,
            request.url,
            data=request.content if len(request.content) <= _LARGE else io.BytesIO(request.content),
            headers=self._defaults.over(request.headers),
            timeout=_client_timeout(timeout.connect, read),
            allow_redirects=False,
        )

    async def _slot(self, slots: asyncio.Semaphore, request: Request) -> Callable[[], None]:
        """A slot of the capped pool (its ``release``), waited for up to the pool timeout. A free one is
        taken at once, with no timer: arming one and cancelling it cost a request 7 us of CPU."""
        if not slots.locked():
            await slots.acquire()  # returns without waiting
            return slots.release
        try:
            async with asyncio.timeout(request.timeout.pool):
                await slots.acquire()
        except TimeoutError:
            raise self._library.PoolTimeout("no connection came free within the pool timeout") from None
        return slots.release

    async def send(self, request: Request) -> Reply:
        slots = self._slots
        release = None if slots is None else await self._slot(slots, request)
        try:
            async with self._request(request, request.timeout.read) as response:
                content = await response.read()
                if "Content-Encoding" in response.headers:
                    content = _decoded(self._library, response.raw_headers, content)
                return Reply(response.status, response.raw_headers, content, request)
        except (TimeoutError, aiohttp.ClientError) as exc:
            raise _httpx_error(self._library, exc) from exc
        finally:
            if release is not None:
                release()

    async def stream(self, request: Request, idle: float | None) -> httpx.Response:
        read = request.timeout.read
        slots = self._slots
        release = None if slots is None else await self._slot(slots, request)
        try:
            if idle is None:
                response = await self._request(request, read)
            else:  # the wait for the response timed here, its body's gaps by ``_Body``
                async with asyncio.timeout(read):
                    response = await self._request(request, None)
        except BaseException as exc:
            if release is not None:
                release()
            if isinstance(exc, TimeoutError | aiohttp.ClientError):
                raise _httpx_error(self._library, exc) from exc
            raise
        # The body as it came: httpx decodes it as its Content-Encoding says, as for its own responses.
        library = self._library
        return library.Response(
            response.status,
            headers=response.raw_headers,
            stream=also(_Body, library.AsyncByteStream)(library, response, idle, release),
            request=request.as_httpx(),
        )

    async def aclose(self) -> None:
        """Close the session and its connections."""
        session, self._session = self._session, None
        if session is not None:
            await session.close()
