"""The seam between the clients and the network: a request built once, handed to a transport.

A transport has one small interface: ``send`` a ``Request`` and return its ``Reply`` (status, raw
headers, the whole body), or ``stream`` it and return an ``httpx.Response`` whose body the caller
reads and closes. Transports raise httpx's transport exceptions and nothing else; retries, errors,
request ids, hooks, logging and redaction sit above the seam, in the clients' attempt loops. A
request carries its client's library (``library``): on httpx2, "httpx" here reads httpx2, whose
objects (``httpx2.Response``, ``httpx2.ReadTimeout``, ...) the transports build and raise instead.

Sync clients send through httpx (``httpx_transport``). Async clients have two transports, aiohttp's
(``aiohttp_transport``) and httpx's, and ``choice.AsyncTransports`` picks one on every call.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import NamedTuple, Protocol

import httpx

from .library import HTTPX, Http

__all__ = ["AsyncTransport", "ClientClosedError", "CommonHeaders", "PoolDefaults", "Reply", "Request"]


class ClientClosedError(RuntimeError):
    """A call on a closed client (closing one closes its ``with_options`` copies too): build a new one."""


class CommonHeaders(dict[str, str]):
    """The headers every plain call of a client sends (no ``extra_headers``, no stream), one object
    for the client and its ``with_options`` copies. A call sends these headers or more, never fewer.

    A transport over a pool of the client's own makes them the pool's default headers, then sends
    each request that carries them with no headers of its own (``PoolDefaults``): httpx merging a
    request's headers into its client's costs about a twentieth of a sync TLS request's CPU.
    """


class PoolDefaults:
    """The ``CommonHeaders`` a pool of a client's own took as its default headers: the first it was
    asked to send. A request that carries them goes with no headers of its own; any other request's
    go over them, and carry at least their names, so each request sends what it carries."""

    __slots__ = ("_take", "_taken")

    def __init__(self, take: Callable[[CommonHeaders], object]) -> None:
        self._take = take  # makes them the pool's defaults (its library's own defaults, these over them)
        self._taken: CommonHeaders | None = None

    def over(self, headers: Mapping[str, str]) -> Mapping[str, str] | None:
        """The headers to send with a request that carries ``headers``: None if they are the defaults."""
        if headers is self._taken:
            return None
        if self._taken is None and type(headers) is CommonHeaders:
            self._take(headers)
            self._taken = headers
            return None
        return headers


@dataclasses.dataclass(slots=True, eq=False)
class Request:
    """One HTTP request as the clients build it: method, URL, headers, body bytes, timeouts, and the
    HTTP library of the client that sends it.

    ``as_httpx()`` is the same request as a ``Request`` of that library (built on first use: the
    aiohttp transport needs one only for errors and streams, which carry it).
    """

    method: str
    url: str
    headers: Mapping[str, str]
    content: bytes
    timeout: httpx.Timeout
    library: Http = HTTPX
    _httpx: httpx.Request | None = dataclasses.field(default=None, init=False, repr=False)

    def within(self, seconds: float) -> Request:
        """The same request with every timeout cut to at most ``seconds`` (a deadline's time left)."""
        cut = {
            name: seconds if value is None else min(value, seconds)
            for name, value in self.timeout.as_dict().items()
        }
        return Request(self.method, self.url, self.headers, self.content, httpx.Timeout(**cut), self.library)

    def as_httpx(self) -> httpx.Request:
        if self._httpx is None:
            self._httpx = self.library.Request(
                self.method,
                self.url,
                headers=self.headers,
                content=self.content,
                extensions={"timeout": self.timeout.as_dict()},
            )
        return self._httpx


class Reply(NamedTuple):
    """A response with its body read: status, raw header pairs, the (decoded) body, and its request."""

    status: int
    headers: Sequence[tuple[bytes, bytes]]
    content: bytes
    request: httpx.Request | Request
    original: httpx.Response | None = None

    def response(self) -> httpx.Response:
        """The reply as a ``Response`` of the request's library (errors carry one): httpx's own when httpx
        sent it."""
        if self.original is not None:
            return self.original
        assert isinstance(self.request, Request)  # httpx's replies are sent with their ``original``
        request = self.request.as_httpx()
        headers = [(name, value) for name, value in self.headers if name.lower() != b"content-encoding"]
        return self.request.library.Response(
            self.status, headers=headers, content=self.content, request=request
        )


class AsyncTransport(Protocol):
    """What async clients send through: aiohttp's or httpx's.

    ``stream(request, idle)`` waits for the response within the request's read timeout, then for
    each piece of its body within ``idle`` seconds (None: the read timeout again).
    """

    async def send(self, request: Request) -> Reply: ...

    async def stream(self, request: Request, idle: float | None) -> httpx.Response: ...

    async def aclose(self) -> None: ...
