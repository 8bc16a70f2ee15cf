"""The seam between the clients and the network: a request built once, handed to a transport.

A transport has one small interface: ``send`` a ``Request`` and return its ``Reply`` (status, raw
headers, the whole body), or ``stream`` it and return an ``httpx.Response`` whose body the caller
reads and closes. Transports raise httpx's transport exceptions and nothing else; retries, errors,
request ids, telemetry, logging and redaction sit above the seam, in the clients' attempt loops.

Sync clients send through httpx (``HttpxTransport``). Async clients have two transports, and
``AsyncTransports.pick`` is the one place that chooses, on every call: the user's ``http_client``
if given; else httpx when a proxy is configured or something watches httpx (a mock, a tracer:
``_network.httpx_is_watched``); else aiohttp (``_aiohttp_transport``), which is several times faster
under concurrency. The async pools are opened per event loop (``_loops``).
"""

from __future__ import annotations

import json
import os
import ssl
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

import httpx

from . import fork as _fork
from .loop_pools import PerLoop
from .network import httpx_is_watched

if TYPE_CHECKING:
    from .aiohttp_transport import AiohttpTransport

__all__ = [
    "AsyncHttpxTransport",
    "AsyncTransport",
    "AsyncTransports",
    "ClientClosedError",
    "HttpxTransport",
    "Reply",
    "Request",
    "encode_json",
]


class ClientClosedError(RuntimeError):
    """A call on a closed client (closing one closes its ``with_options`` copies too): build a new one."""


def encode_json(body: Any) -> bytes:
    """``body`` as httpx encodes a ``json=`` argument, so every transport sends the same bytes."""
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


class Request:
    """One HTTP request as the clients build it: method, URL, headers, body bytes, timeouts.

    ``as_httpx()`` is the same request as an ``httpx.Request`` (built on first use: the aiohttp
    transport needs one only for errors and streams, which carry it).
    """

    __slots__ = ("_httpx", "content", "headers", "method", "timeout", "url")

    def __init__(
        self, method: str, url: str, headers: Mapping[str, str], content: bytes, timeout: httpx.Timeout
    ) -> None:
        self.method = method
        self.url = url
        self.headers = headers
        self.content = content
        self.timeout = timeout
        self._httpx: httpx.Request | None = None

    def within(self, seconds: float) -> Request:
        """The same request with every timeout cut to at most ``seconds`` (a deadline's time left)."""
        cut = {
            name: seconds if value is None else min(value, seconds)
            for name, value in self.timeout.as_dict().items()
        }
        return Request(self.method, self.url, self.headers, self.content, httpx.Timeout(**cut))

    def as_httpx(self) -> httpx.Request:
        if self._httpx is None:
            self._httpx = httpx.Request(
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
        """The reply as an ``httpx.Response`` (errors carry one): httpx's own when httpx sent it."""
        if self.original is not None:
            return self.original
        request = self.request if isinstance(self.request, httpx.Request) else self.request.as_httpx()
        headers = [(name, value) for name, value in self.headers if name.lower() != b"content-encoding"]
        return httpx.Response(self.status, headers=headers, content=self.content, request=request)


class AsyncTransport(Protocol):
    """What async clients send through: aiohttp's or httpx's.

    ``stream(request, idle)`` waits for the response within the request's read timeout, then for
    each piece of its body within ``idle`` seconds (None: the read timeout again).
    """

    async def send(self, request: Request) -> Reply: ...

    async def stream(self, request: Request, idle: float | None) -> httpx.Response: ...

    async def aclose(self) -> None: ...


def _built(client: httpx.Client | httpx.AsyncClient, request: Request) -> httpx.Request:
    """``request`` as ``client`` builds it: with its default headers, cookies and query parameters."""
    return client.build_request(
        request.method, request.url, content=request.content, headers=request.headers, timeout=request.timeout
    )


def _idle(response: httpx.Response, idle: float | None) -> httpx.Response:
    """``response`` with its body's reads timed by ``idle`` (httpcore reads the read timeout from the
    request's extensions when the body is first read, after the headers)."""
    if idle is not None:
        extensions = response.request.extensions
        extensions["timeout"] = {**extensions.get("timeout", {}), "read": idle}
    return response


def _reply(response: httpx.Response) -> Reply:
    return Reply(response.status_code, response.headers.raw, response.content, response.request, response)


class HttpxTransport:
    """Requests through an ``httpx.Client``: its transport, auth, event hooks and default headers apply.

    ``own`` builds the client again, for a client's own pool: a forked child releases the one it
    inherited and builds its own (``wrapper._core.transports.fork``). A client you pass is yours to rebuild.
    """

    def __init__(self, client: httpx.Client, own: Callable[[], httpx.Client] | None = None) -> None:
        self.client = client
        self._own = own
        self._pid = os.getpid()
        if own is not None:
            _fork.register(self)

    def after_fork(self) -> None:
        if self._own is not None and not self.client.is_closed:
            inherited, self.client = self.client, self._own()
            _fork.release(inherited)
        self._pid = os.getpid()  # last: should building fail, the next call tries again

    def _client(self) -> httpx.Client:
        if self._pid != os.getpid():  # forked without running the fork hooks
            self.after_fork()
        return self.client

    def send(self, request: Request) -> Reply:
        client = self._client()
        return _reply(client.send(_built(client, request), follow_redirects=False))

    def stream(self, request: Request, idle: float | None) -> httpx.Response:
        client = self._client()
        return _idle(client.send(_built(client, request), stream=True, follow_redirects=False), idle)

    def close(self) -> None:
        self.client.close()


class AsyncHttpxTransport:
    """Requests through an ``httpx.AsyncClient``, as ``HttpxTransport`` does for sync ones."""

    def __init__(self, client: httpx.AsyncClient) -> None:
        self.client = client

    async def send(self, request: Request) -> Reply:
        response = await self.client.send(_built(self.client, request), stream=True, follow_redirects=False)
        try:
            await response.aread()
        finally:
            await response.aclose()
        return _reply(response)

    async def stream(self, request: Request, idle: float | None) -> httpx.Response:
        response = await self.client.send(_built(self.client, request), stream=True, follow_redirects=False)
        return _idle(response, idle)

    async def aclose(self) -> None:
        await self.client.aclose()


def _load_ahead(*, own: bool, httpx_async: bool) -> None:
    """Import now, as an async client is built, what its first call would import inside the event loop.

    There, importing aiohttp (some 80 modules, for the client's own pools) blocked the loop for 0.2 to
    0.5 s, and asyncio's debug mode reported it; httpx's async pool imports its anyio backend on its
    first connection. The modules load once per process: later clients find them loaded.
    """
    if own:
        import wrapper._core.transports.aiohttp_transport  # noqa: F401
    if httpx_async:
        import anyio._backends._asyncio  # noqa: F401  (what anyio.connect_tcp imports)
        import httpcore._backends.anyio  # noqa: F401  (what httpcore's AutoBackend imports)


class AsyncTransports:
    """An async client's transports, and the choice between them on each call (``pick``).

    With ``http_client`` given, always that client. Otherwise the client's own pools, one of each
    kind per event loop, built with ``limits`` and ``verify``: httpx when ``proxy`` (configured in
    the environment when the client was built) or while a mock or tracer watches httpx, else aiohttp.
    """

    def __init__(
        self,
        http_client: httpx.AsyncClient | None,
        *,
        limits: httpx.Limits,
        verify: Callable[[], ssl.SSLContext],
        proxy: bool,
    ) -> None:
        self._user = None if http_client is None else AsyncHttpxTransport(http_client)
        self._proxy = proxy
        self._lock = threading.Lock()
        self._closed = False
        _load_ahead(own=http_client is None, httpx_async=http_client is not None or proxy)
        if http_client is None:
            verify()  # the pools' TLS context, loaded now (it is cached): a CA bundle takes tens of ms

        def own_httpx() -> AsyncHttpxTransport:
            return AsyncHttpxTransport(httpx.AsyncClient(limits=limits, verify=verify(), trust_env=True))

        def own_aiohttp() -> AiohttpTransport:
            from .aiohttp_transport import AiohttpTransport  # imported by _load_ahead already

            return AiohttpTransport(verify(), limits)

        self._httpx: PerLoop[AsyncHttpxTransport] = PerLoop(own_httpx)
        self._aiohttp: PerLoop[AiohttpTransport] = PerLoop(own_aiohttp)

    @property
    def closed(self) -> bool:
        return self._closed

    def _choice(self) -> AsyncHttpxTransport | PerLoop[AsyncHttpxTransport] | PerLoop[AiohttpTransport]:
        """The one decision: the user's client, else the pools of httpx or of aiohttp, as the module says."""
        if self._closed:
            raise ClientClosedError("the client is closed: build a new one to make more calls")
        if self._user is not None:
            return self._user
        return self._httpx if self._proxy or httpx_is_watched() else self._aiohttp

    def ready(self) -> AsyncTransport | None:
        """``pick()``'s transport when no waiting is needed (its pool is open in this loop), else None."""
        choice = self._choice()
        return choice if isinstance(choice, AsyncHttpxTransport) else choice.ready()

    async def pick(self) -> AsyncTransport:
        """The transport for the call being made; ``ClientClosedError`` once the client is closed."""
        choice = self._choice()
        return choice if isinstance(choice, AsyncHttpxTransport) else await choice.get()

    async def aclose(self) -> None:
        """Refuse further calls; close the pools (those of other loops as soon as their loop runs)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        if self._user is not None:
            await self._user.aclose()
        await self._httpx.aclose()
        await self._aiohttp.aclose()
