"""Requests through httpx: ``HttpxTransport`` (the sync clients') and ``AsyncHttpxTransport`` (an async
client's when it was given an ``http_client``, a proxy is configured, or a mock or tracer watches httpx).
httpx's own transport, auth, event hooks and default headers apply; a connection with bytes left over
after its response is not pooled (``reuse``). An httpx2 client is used alike: the same API, and the
responses and errors it gives are its own.
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable, Mapping

import httpx

from . import fork
from .base import PoolDefaults, Reply, Request
from .library import HTTPX, Http, also, library_of
from .reuse import AsyncSettled, Settled
from .sync_pool import CheckoutTransport

__all__ = ["AsyncHttpxTransport", "HttpxTransport", "reply_of"]


@functools.lru_cache(maxsize=256)
def _url(library: Http, url: str) -> httpx.URL:
    """``url`` parsed by ``library`` once: a client calls the same few URLs, and parsing one costs a
    quarter of httpx's ``build_request`` (a ``URL`` is immutable, so it is shared)."""
    return library.URL(url)


def _built(
    client: httpx.Client | httpx.AsyncClient, request: Request, headers: Mapping[str, str] | None
) -> httpx.Request:
    """``request`` as ``client`` builds it: with its default headers, cookies and query parameters, and
    ``headers`` over them (None: the client's defaults are the request's headers already).

    The timeouts go as a tuple, which httpx and httpx2 both take (an ``httpx.Timeout`` is not an
    ``httpx2.Timeout``).
    """
    timeout = request.timeout
    return client.build_request(
        request.method,
        _url(request.library, request.url),
        content=request.content,
        headers=headers,
        timeout=(timeout.connect, timeout.read, timeout.write, timeout.pool),
    )


def _idle(response: httpx.Response, idle: float | None) -> httpx.Response:
    """``response`` with its body's reads timed by ``idle`` (httpcore reads the read timeout from the
    request's extensions when the body is first read, after the headers)."""
    if idle is not None:
        extensions = response.request.extensions
        extensions["timeout"] = {**extensions.get("timeout", {}), "read": idle}
    return response


def reply_of(response: httpx.Response) -> Reply:
    """A response whose body has been read, as a ``Reply``."""
    return Reply(response.status_code, response.headers.raw, response.content, response.request, response)


class HttpxTransport:
    """Requests through an ``httpx.Client``: its transport, auth, event hooks and default headers apply.

    ``own`` builds the client again, for a client's own pool: a forked child releases the one it
    inherited and builds its own (``wrapper._core.transports.fork``). A client you pass is yours to rebuild.
    An own pool is closed when this transport is collected, quietly: its sockets would each warn
    (``ResourceWarning``) if collected open. A client you pass is yours to close.

    An own pool takes a client's ``CommonHeaders`` as its default headers (``PoolDefaults``), so httpx
    has no headers to merge for most requests. A client you pass keeps its defaults.
    """

    def __init__(self, client: httpx.Client, own: Callable[[], httpx.Client] | None = None) -> None:
        self.client = client
        self._own = own
        self._defaults = self._pool_defaults()
        self._settled = _settler(client)
        self._owned = [client]  # what to close when collected: held by the finalizer, not through self
        if own is not None:
            fork.register(self)
            weakref.finalize(self, _close, self._owned)

    def after_fork(self) -> None:
        if self._own is not None and not self.client.is_closed:
            inherited, self.client = self.client, self._own()
            self._settled, self._defaults = _settler(self.client), self._pool_defaults()
            self._owned[0] = self.client
            fork.release(inherited)

    def send(self, request: Request) -> Reply:
        response = self.stream(request, None)
        try:
            response.read()
        finally:
            response.close()
        return reply_of(response)

    def stream(self, request: Request, idle: float | None) -> httpx.Response:
        """The response, its body to read: a connection with bytes left over after it is not pooled."""
        client, defaults = self.client, self._defaults
        headers = request.headers if defaults is None else defaults.over(request.headers)
        response = client.send(_built(client, request, headers), stream=True, follow_redirects=False)
        assert isinstance(response.stream, request.library.SyncByteStream)
        if self._settled is not None:
            response.stream = self._settled(response.stream)
        return _idle(response, idle)

    def close(self) -> None:
        self.client.close()

    def _pool_defaults(self) -> PoolDefaults | None:
        """The own pool's default headers (None for a client you pass)."""
        if self._own is None:
            return None
        client = self.client
        return PoolDefaults(lambda headers: setattr(client, "headers", headers))


def _settler(client: httpx.Client) -> Callable[[httpx.SyncByteStream], Settled] | None:
    """What wraps a response's body so that its connection is not pooled if bytes were left over after
    it (``reuse``); None if the client's transport checks that itself (``CheckoutTransport``)."""
    if isinstance(getattr(client, "_transport", None), CheckoutTransport):
        return None
    library = library_of(client, asynchronous=False) or HTTPX
    return also(Settled, library.SyncByteStream)  # httpx2's responses read only its streams


def _close(owned: list[httpx.Client]) -> None:
    owned[0].close()


class AsyncHttpxTransport:
    """Requests through an ``httpx.AsyncClient``, as ``HttpxTransport`` does for sync ones."""

    def __init__(self, client: httpx.AsyncClient) -> None:
        self.client = client
        library = library_of(client, asynchronous=True) or HTTPX
        self._settled = also(AsyncSettled, library.AsyncByteStream)

    async def send(self, request: Request) -> Reply:
        response = await self.stream(request, None)
        try:
            await response.aread()
        finally:
            await response.aclose()
        return reply_of(response)

    async def stream(self, request: Request, idle: float | None) -> httpx.Response:
        """The response, its body to read: a connection with bytes left over after it is not pooled."""
        client = self.client
        response = await client.send(
            _built(client, request, request.headers), stream=True, follow_redirects=False
        )
        assert isinstance(response.stream, request.library.AsyncByteStream)
        response.stream = self._settled(response.stream)
        return _idle(response, idle)

    async def aclose(self) -> None:
        await self.client.aclose()
