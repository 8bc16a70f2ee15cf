"""The async clients' default transport: requests on an ``aiohttp`` session, failing as httpx fails.

httpx's async pool and request objects cost more per call than aiohttp itself under concurrency, so
a default async client sends with aiohttp, on the same TLS context and pool limits it would give
httpx. ``send`` builds no httpx object at all; ``stream`` hands back an ``httpx.Response`` whose body
is aiohttp's, so a stream is read (and its SSE parsed by httpx-sse) exactly as httpx's would be.

Both transports must read the same responses alike, so aiohttp is set to what httpx does: it asks
for the encodings httpx decodes and leaves bodies to httpx's decoders (an encoding neither asked
for nor known passes through, as in httpx); it reads heads as large as httpx's parser does; a host
name's lookup is bounded by the connect timeout (aiohttp bounds it only by the whole connection's).
Every aiohttp failure is raised as the httpx exception of the same kind, in words that do not
carry the HTTP status aiohttp's parser errors hold (one aiohttp would answer with as a server,
not one the server sent).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import io
import socket
import ssl
from collections.abc import AsyncIterator, Sequence

import aiohttp
import aiohttp.abc
import aiohttp.http_exceptions
import httpx
from httpx._client import ACCEPT_ENCODING  # the encodings httpx's decoders read

from ._transport import Reply, Request

__all__ = ["AiohttpTransport"]

_LARGE = 1 << 20
"""Bodies above this go as a file object: aiohttp warns that writing them from bytes blocks the loop."""
_HEAD = 100 * 1024
"""The largest response head httpx reads (httpcore's limit for h11); aiohttp's default is 8,190
bytes a line, so a header a little over 8 KiB failed on one transport only."""
_CONNECT: contextvars.ContextVar[float | None] = contextvars.ContextVar("connect_timeout", default=None)
"""The connect timeout of the request being sent, for the resolver (which aiohttp calls in its task)."""


@functools.lru_cache(maxsize=16)
def _client_timeout(connect: float | None, read: float | None, pool: float | None) -> aiohttp.ClientTimeout:
    """httpx's timeouts in aiohttp's terms: its ``connect`` is waiting for the pool, then connecting."""
    return aiohttp.ClientTimeout(
        sock_connect=connect,
        sock_read=read,
        connect=None if pool is None or connect is None else pool + connect,
    )


def _httpx_error(exc: Exception) -> httpx.TransportError:
    """The httpx exception for an aiohttp (or asyncio) failure, the one httpx raises in that case."""
    kind: type[httpx.TransportError]
    if isinstance(exc, aiohttp.ConnectionTimeoutError):  # connecting, its lookup, or waiting for the pool
        kind = httpx.ConnectTimeout
    elif isinstance(exc, TimeoutError):  # aiohttp's read timeout, or the wait for a stream's response
        kind = httpx.ReadTimeout
    elif isinstance(exc, aiohttp.ClientConnectorError):  # refused, DNS, TLS handshake and certificate
        kind = httpx.ConnectError
    elif isinstance(exc, aiohttp.ClientOSError | aiohttp.ClientPayloadError):  # reset, cut mid-body
        kind = httpx.ReadError
    else:  # disconnected before answering, a garbled status line or header, ...
        kind = httpx.RemoteProtocolError
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


class _Resolver(aiohttp.abc.AbstractResolver):
    """aiohttp's resolver, each lookup bounded by the connect timeout of the request it is for."""

    def __init__(self) -> None:
        self._resolver = aiohttp.DefaultResolver()

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[aiohttp.abc.ResolveResult]:
        async with asyncio.timeout(_CONNECT.get()):  # aiohttp reports it as its connection timeout
            return await self._resolver.resolve(host, port, family)

    async def close(self) -> None:
        await self._resolver.close()


def _decoded(headers: Sequence[tuple[bytes, bytes]], content: bytes) -> bytes:
    """``content`` decoded as its Content-Encoding says, by httpx's decoders (``httpx.DecodingError``
    if it does not decode)."""
    return httpx.Response(200, headers=headers, content=content).content


class _Body(httpx.AsyncByteStream):
    """A streamed aiohttp response body as httpx reads one; closing it releases the connection.

    With ``idle``, each piece must come within that many seconds (aiohttp's own read timeout is
    then off for the request: it would time the first byte and the gaps alike).
    """

    def __init__(self, response: aiohttp.ClientResponse, idle: float | None) -> None:
        self._response = response
        self._idle = idle

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
            raise _httpx_error(exc) from exc
        except TimeoutError:
            raise httpx.ReadTimeout(f"no data for {self._idle} s") from None

    async def aclose(self) -> None:
        if self._response.content.is_eof():
            self._response.release()  # read to the end: the connection goes back to the pool
        else:
            self._response.close()  # left early: the connection is closed, so the server stops


class AiohttpTransport:
    """An aiohttp session, opened in the running loop on first use; never follows a redirect."""

    def __init__(self, ssl_context: ssl.SSLContext, limits: httpx.Limits) -> None:
        self._ssl = ssl_context
        self._limits = limits
        self._session: aiohttp.ClientSession | None = None

    def _open(self) -> aiohttp.ClientSession:
        connector = aiohttp.TCPConnector(
            limit=self._limits.max_connections or 0,  # 0: no cap, as httpx's None
            limit_per_host=0,
            ssl=self._ssl,
            keepalive_timeout=self._limits.keepalive_expiry,
            resolver=_Resolver(),
        )
        # trust_env off: a client uses this transport only when no proxy is configured.
        self._session = aiohttp.ClientSession(
            connector=connector,
            trust_env=False,
            headers={"Accept-Encoding": ACCEPT_ENCODING},
            auto_decompress=False,  # httpx's decoders read the body (``_decoded``)
            max_line_size=_HEAD,
            max_field_size=_HEAD,
            max_headers=_HEAD // 4,  # as many as fit in a head of that size ("a:\r\n")
        )
        return self._session

    def _request(self, request: Request, read: float | None) -> aiohttp.client._RequestContextManager:
        session = self._session or self._open()
        timeout = request.timeout
        return session.request(
            request.method,
            request.url,
            data=request.content if len(request.content) <= _LARGE else io.BytesIO(request.content),
            headers=request.headers,
            timeout=_client_timeout(timeout.connect, read, timeout.pool),
            allow_redirects=False,
        )

    async def send(self, request: Request) -> Reply:
        token = _CONNECT.set(request.timeout.connect)
        try:
            async with self._request(request, request.timeout.read) as response:
                content = await response.read()
                if "Content-Encoding" in response.headers:
                    content = _decoded(response.raw_headers, content)
                return Reply(response.status, response.raw_headers, content, request)
        except (TimeoutError, aiohttp.ClientError) as exc:
            raise _httpx_error(exc) from exc
        finally:
            _CONNECT.reset(token)

    async def stream(self, request: Request, idle: float | None) -> httpx.Response:
        read = request.timeout.read
        token = _CONNECT.set(request.timeout.connect)
        try:
            if idle is None:
                response = await self._request(request, read)
            else:  # the wait for the response timed here, its body's gaps by ``_Body``
                async with asyncio.timeout(read):
                    response = await self._request(request, None)
        except (TimeoutError, aiohttp.ClientError) as exc:
            raise _httpx_error(exc) from exc
        finally:
            _CONNECT.reset(token)
        # The body as it came: httpx decodes it as its Content-Encoding says, as for its own responses.
        return httpx.Response(
            response.status,
            headers=response.raw_headers,
            stream=_Body(response, idle),
            request=request.as_httpx(),
        )

    async def aclose(self) -> None:
        """Close the session and its connections."""
        session, self._session = self._session, None
        if session is not None:
            await session.close()
