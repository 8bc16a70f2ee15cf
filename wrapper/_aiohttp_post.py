"""The async clients' fast lane: a POST straight through the default pool's aiohttp session.

httpx's request and response objects cost more per call than aiohttp itself, so a ``complete`` on
the default pool sends its bytes with aiohttp directly and builds the httpx objects (which errors
and debug logs carry) only when something goes wrong. Streams still go through httpx.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from typing import Any, NamedTuple

import aiohttp
import httpx
from httpx_aiohttp import AiohttpTransport
from httpx_aiohttp.transport import map_aiohttp_exceptions

__all__ = ["Reply", "encode_json", "post"]


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
    return aiohttp.ClientTimeout(sock_connect=connect, sock_read=read, connect=pool)


async def post(
    transport: AiohttpTransport, url: str, headers: Mapping[str, str], content: bytes, limits: httpx.Timeout
) -> Reply:
    """POST ``content`` on ``transport``'s session, within ``limits``; failures raised as httpx's errors."""
    if not isinstance(transport.client, aiohttp.ClientSession):
        transport.client = transport.get_client()  # as the transport does on its first request
    try:
        with map_aiohttp_exceptions():
            async with transport.client.post(
                url,
                data=content,
                headers=headers,
                timeout=_client_timeout(limits.connect, limits.read, limits.pool),
                allow_redirects=False,
            ) as response:
                return Reply(response.status, response.raw_headers, await response.read())
    except (aiohttp.ClientError, TimeoutError) as exc:  # what the mapping leaves: a garbled response, ...
        failure = httpx.TimeoutException if isinstance(exc, TimeoutError) else httpx.RemoteProtocolError
        raise failure(f"{type(exc).__name__}: {exc}") from exc
