"""An async client's choice of transport, made in one place (``AsyncTransports.pick``) on every call:
the user's ``http_client`` if given; else httpx when a proxy is configured or something watches httpx
(a mock, a tracer: ``httpx_is_watched``); else aiohttp, which is several times faster under
concurrency. The client's own pools are opened per event loop (``loop_pools``). On httpx2 (the
``library`` of the client's own pools), "httpx" reads httpx2 throughout.
"""

from __future__ import annotations

import functools
import ssl
import sys
import threading
import types
from collections.abc import Callable
from typing import TYPE_CHECKING

import httpx

from .base import AsyncTransport, ClientClosedError
from .httpx_transport import AsyncHttpxTransport
from .library import HTTPX, Http, core_name
from .loop_pools import PerLoop

if TYPE_CHECKING:
    from .aiohttp_transport import AiohttpTransport

__all__ = ["AsyncTransports"]


_HOOKS = (
    ("", "AsyncHTTPTransport", "handle_async_request"),  # pytest-httpx, httpx2-pytest
    ("core", "AsyncConnectionPool", "handle_async_request"),  # respx, pytest-httpx2, OpenTelemetry
    ("", "AsyncClient", "_transport_for_url"),  # respx's other mocker
    ("", "AsyncClient", "send"),  # Sentry
)
"""The functions that HTTP mocks and instrumentations replace to see requests: in httpx (httpx2), or in
its httpcore ("core": httpcore, httpcore2)."""
_originals: dict[tuple[str, str, str], object] = {}


@functools.cache
def _hooks(library: Http) -> tuple[tuple[str, str, str], ...]:
    """``_HOOKS`` of ``library``: (module name, class, function)."""
    return tuple(
        (core_name(library) if where else library.__name__, cls, function) for where, cls, function in _HOOKS
    )


def httpx_is_watched(library: Http = HTTPX) -> bool:
    """True when a mock or an instrumentation has replaced one of ``library``'s (or its httpcore's)
    transport functions.

    Each is compared with the original captured the first time its module was seen (httpx's at import);
    a module not imported yet cannot have been patched, and is not imported here (httpcore is slow to).
    The classes seen are kept (``_looked``): a call looks up their functions, and whether a module not
    seen yet is imported now.
    """
    looked = _looked.get(library)
    if looked is None:
        return _look(library)
    seen, unseen = looked
    for name in unseen:
        if name in sys.modules:
            return _look(library)
    for owner, function, original in seen:  # noqa: SIM110  (any() of a generator costs a call 0.3 us more)
        if getattr(owner, function) is not original:
            return True
    return False


_looked: dict[Http, tuple[list[tuple[type, str, object]], set[str]]] = {}
"""Each library's hooked classes seen so far (with their functions' names and originals), and the
modules not imported when it was last looked at."""


def _look(library: Http) -> bool:
    """``httpx_is_watched``, looking each class up in its module (kept in ``_looked`` if none is watched)."""
    seen, unseen = [], set()
    for key in _hooks(library):
        module = sys.modules.get(key[0])
        if module is None:
            unseen.add(key[0])
            continue
        owner = getattr(module, key[1])
        hook = getattr(owner, key[2])
        original = _originals.get(key)
        if original is None:
            if type(hook) is not types.FunctionType or hook.__module__.partition(".")[0] != key[0]:
                return True  # already replaced before we first looked
            original = _originals.setdefault(key, hook)
        if hook is not original:
            return True
        seen.append((owner, key[2], original))
    _looked[library] = (seen, unseen)
    return False


httpx_is_watched()  # capture httpx's own functions now, before a test tool can replace them


class AsyncTransports:
    """An async client's transports, and the choice between them on each call (``pick``).

    With ``http_client`` given, always that client. Otherwise the client's own pools, one of each
    kind per event loop, built with ``limits`` and ``verify`` on ``library``: httpx when ``proxy``
    (configured in the environment when the client was built) or while a mock or tracer watches
    ``library``, else aiohttp.
    """

    def __init__(
        self,
        http_client: httpx.AsyncClient | None,
        *,
        library: Http,
        limits: httpx.Limits,
        verify: Callable[[], ssl.SSLContext],
        proxy: bool,
    ) -> None:
        self._user = None if http_client is None else AsyncHttpxTransport(http_client)
        self._library = library
        self._proxy = proxy
        self._lock = threading.Lock()
        self._closed = False
        if http_client is None:
            verify()  # the pools' TLS context, loaded now (it is cached): a CA bundle takes tens of ms

        def own_httpx() -> AsyncHttpxTransport:
            return AsyncHttpxTransport(library.AsyncClient(limits=limits, verify=verify(), trust_env=True))

        def own_aiohttp() -> AiohttpTransport:
            from .aiohttp_transport import AiohttpTransport  # loaded ahead (async_client.load_ahead)

            return AiohttpTransport(verify(), limits, library)

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
        return self._httpx if self._proxy or httpx_is_watched(self._library) else self._aiohttp

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
