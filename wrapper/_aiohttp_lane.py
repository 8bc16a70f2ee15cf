"""The async clients' fast lane for ``complete``: one POST on an ``aiohttp`` session of their own.

httpx's async pool and request objects cost more per call than aiohttp itself under concurrency,
so a default async client posts ``complete`` requests with aiohttp, on the same TLS context and
pool limits as its httpx pool, and builds httpx objects only for errors. Every aiohttp failure is
raised as the httpx exception of the same kind, so both lanes fail alike.
"""

from __future__ import annotations

import functools
import io
import json
import ssl
from collections.abc import Mapping
from typing import Any, NamedTuple

import aiohttp
import httpx

__all__ = ["Lane", "Reply", "encode_json"]

_LARGE = 1 << 20
"""Bodies above this go as a file object: aiohttp warns that writing them from bytes blocks the loop."""


class Reply(NamedTuple):
    """A response as aiohttp gave it: status, raw headers and the whole (decompressed) body."""

    status: int
    headers: tuple[tuple[bytes, bytes], ...]
    content: bytes

    def response(self, request: httpx.Request) -> httpx.Response:
        """The same response as an ``httpx.Response`` to ``request`` (the body is already decoded)."""
        headers = [(name, value) for name, value in self.headers if name.lower() != b"content-encoding"]
        return httpx.Response(self.status, headers=headers, content=self.content, request=request)


def encode_json(body: Any) -> bytes:
    """``body`` as httpx encodes a ``json=`` argument, so both lanes send the same bytes."""
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


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
    return kind(message)


class Lane:
    """An aiohttp session of one async client, opened in the running loop on first use."""

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
        # trust_env off: the client takes this lane only when no proxy is configured.
        self._session = aiohttp.ClientSession(connector=connector, trust_env=False, auto_decompress=True)
        return self._session

    async def post(
        self, url: str, headers: Mapping[str, str], content: bytes, timeouts: httpx.Timeout
    ) -> Reply:
        """POST ``content`` within ``timeouts``, failing with httpx's exceptions; never follows a redirect."""
        session = self._session or self._open()
        try:
            async with session.post(
                url,
                data=content if len(content) <= _LARGE else io.BytesIO(content),
                headers=headers,
                timeout=_client_timeout(timeouts.connect, timeouts.read, timeouts.pool),
                allow_redirects=False,
            ) as response:
                return Reply(response.status, response.raw_headers, await response.read())
        except (TimeoutError, aiohttp.ClientError) as exc:
            raise _httpx_error(exc) from exc

    async def aclose(self) -> None:
        """Close the session and its connections (it is opened again if the lane is used again)."""
        session, self._session = self._session, None
        if session is not None:
            await session.close()
