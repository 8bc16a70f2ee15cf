"""The async clients' default transport: requests on an ``aiohttp`` session, failing as httpx fails.

httpx's async pool and request objects cost more per call than aiohttp itself under concurrency, so
a default async client sends with aiohttp, on the same TLS context and pool limits it would give
httpx. ``send`` builds no httpx object at all; ``stream`` hands back an ``httpx.Response`` whose body
is aiohttp's, so a stream is read (and its SSE parsed by httpx-sse) exactly as httpx's would be.
Every aiohttp failure is raised as the httpx exception of the same kind, so both transports fail alike.
"""

from __future__ import annotations

import asyncio
import functools
import io
import ssl
from collections.abc import AsyncIterator

import aiohttp
import httpx

from ._transport import Reply, Request

__all__ = ["AiohttpTransport"]

_LARGE = 1 << 20
"""Bodies above this go as a file object: aiohttp warns that writing them from bytes blocks the loop."""


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
    message = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    kind: type[httpx.TransportError]
    if isinstance(exc, aiohttp.ConnectionTimeoutError):
        kind = httpx.ConnectTimeout
    elif isinstance(exc, aiohttp.SocketTimeoutError):
        kind = httpx.ReadTimeout
    elif isinstance(exc, TimeoutError):  # aiohttp's ``connect``: waiting for a connection of the pool
        kind = httpx.PoolTimeout
    elif isinstance(exc, aiohttp.ClientConnectorError):  # refused, DNS, TLS handshake and certificate
        kind = httpx.ConnectError
    elif isinstance(exc, aiohttp.ClientOSError | aiohttp.ClientPayloadError):  # reset, cut mid-body
        kind = httpx.ReadError
    else:  # disconnected before answering, a garbled status line or header, ...
        kind = httpx.RemoteProtocolError
    error = kind(message)
    error.__cause__ = exc
    return error


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
        except TimeoutError:
            raise httpx.ReadTimeout(f"no data for {self._idle:g} s") from None
        except aiohttp.ClientError as exc:
            raise _httpx_error(exc) from exc

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
        )
        # trust_env off: a client uses this transport only when no proxy is configured.
        self._session = aiohttp.ClientSession(connector=connector, trust_env=False, auto_decompress=True)
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
        try:
            async with self._request(request, request.timeout.read) as response:
                return Reply(response.status, response.raw_headers, await response.read(), request)
        except (TimeoutError, aiohttp.ClientError) as exc:
            raise _httpx_error(exc) from exc

    async def stream(self, request: Request, idle: float | None) -> httpx.Response:
        read = request.timeout.read
        try:
            if idle is None:
                response = await self._request(request, read)
            else:  # the wait for the response timed here, its body's gaps by ``_Body``
                async with asyncio.timeout(read):
                    response = await self._request(request, None)
        except (TimeoutError, aiohttp.ClientError) as exc:
            raise _httpx_error(exc) from exc
        # aiohttp decompresses the body: the encoding header would make httpx decode it again.
        headers = [
            (name, value) for name, value in response.raw_headers if name.lower() != b"content-encoding"
        ]
        return httpx.Response(
            response.status, headers=headers, stream=_Body(response, idle), request=request.as_httpx()
        )

    async def aclose(self) -> None:
        """Close the session and its connections."""
        session, self._session = self._session, None
        if session is not None:
            await session.close()
