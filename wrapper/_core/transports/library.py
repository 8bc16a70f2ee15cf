"""The HTTP library a client speaks: httpx, or httpx2 (httpx's maintained continuation, the same API
under another name).

A client given an ``http_client`` speaks that client's library. A client's own pools speak the one
``COMPLETION_CLIENTS_HTTP`` names when the client is built: ``httpx`` (unset: the default) or
``httpx2`` (the ``httpx2`` extra). The transports build the requests, responses and streams of the
client's library and raise its exceptions, so what a caller sees (a raw response, an error's cause,
a mock's request) is of the library it chose. httpx2 is imported only when asked for, or when a
client of its is given: a process that never does never loads it.
"""

from __future__ import annotations

import functools
import importlib
import os
import ssl
import sys
from types import ModuleType
from typing import Any, Protocol, TypeVar, cast

import httpx

__all__ = [
    "HTTPX",
    "HTTP_LIBRARY_ENV",
    "Http",
    "also",
    "chosen",
    "classes",
    "core",
    "core_name",
    "httpx2",
    "library_of",
    "loaded",
]

HTTP_LIBRARY_ENV = "COMPLETION_CLIENTS_HTTP"
"""The environment variable that names the HTTP library of the clients' own pools: ``httpx`` or ``httpx2``."""
_CORES = {"httpx": "httpcore", "httpx2": "httpcore2"}


class Http(Protocol):
    """What the package uses of an HTTP library: names httpx and httpx2 both have (the module is one)."""

    __name__: str
    __version__: str
    Client: type[httpx.Client]
    AsyncClient: type[httpx.AsyncClient]
    HTTPTransport: type[httpx.HTTPTransport]
    URL: type[httpx.URL]
    Request: type[httpx.Request]
    Response: type[httpx.Response]
    SyncByteStream: type[httpx.SyncByteStream]
    AsyncByteStream: type[httpx.AsyncByteStream]
    HTTPError: type[httpx.HTTPError]
    TransportError: type[httpx.TransportError]
    DecodingError: type[httpx.DecodingError]
    ConnectError: type[httpx.ConnectError]
    ReadError: type[httpx.ReadError]
    RemoteProtocolError: type[httpx.RemoteProtocolError]
    ConnectTimeout: type[httpx.ConnectTimeout]
    ReadTimeout: type[httpx.ReadTimeout]
    WriteTimeout: type[httpx.WriteTimeout]
    PoolTimeout: type[httpx.PoolTimeout]

    def create_ssl_context(self, verify: ssl.SSLContext | str | bool = True) -> ssl.SSLContext: ...

    def __hash__(self) -> int: ...  # a module is: caches are keyed by library


HTTPX: Http = httpx


def chosen() -> Http:
    """The library ``COMPLETION_CLIENTS_HTTP`` names (httpx when unset): the one a client's own pools speak.

    ``ValueError`` for another name; ``ModuleNotFoundError`` saying which extra to install when httpx2
    is named but not installed.
    """
    name = os.environ.get(HTTP_LIBRARY_ENV, "").strip() or "httpx"
    if name == "httpx":
        return HTTPX
    if name == "httpx2":
        return httpx2()
    raise ValueError(
        f"{HTTP_LIBRARY_ENV} must be 'httpx' or 'httpx2' (the HTTP library of the clients' own pools); "
        f"got {name!r}"
    )


@functools.cache
def httpx2() -> Http:
    """httpx2, imported now; ``ModuleNotFoundError`` naming the extra to install if it is not installed."""
    try:
        return cast(Http, importlib.import_module("httpx2"))
    except ImportError:  # no package index has completion-clients: name the extra's package itself
        hint = "httpx2 is not installed: pip install 'httpx2' (the httpx2 extra)"
        raise ModuleNotFoundError(hint, name="httpx2") from None


def loaded() -> tuple[Http, ...]:
    """httpx, and httpx2 once something imported it: the libraries a client can have been given."""
    other = sys.modules.get("httpx2")
    return (HTTPX,) if other is None or other is httpx else (HTTPX, cast(Http, other))


def library_of(client: object, *, asynchronous: bool) -> Http | None:
    """The library of ``client`` (its ``Client``, or ``AsyncClient`` if ``asynchronous``); None if neither."""
    for library in loaded():
        if isinstance(client, library.AsyncClient if asynchronous else library.Client):
            return library
    return None


def classes(name: str) -> tuple[type[Any], ...]:
    """The class ``name`` (``"ReadTimeout"``, ``"Timeout"``, ...) of every library loaded (``isinstance``)."""
    return tuple(getattr(library, name) for library in loaded())


T = TypeVar("T")


_SUBCLASSES: dict[tuple[type[Any], type[Any]], type[Any]] = {}


def also(cls: type[T], base: type[Any]) -> type[T]:
    """``cls``, or (made once per pair) a subclass of it that is a ``base`` too: httpx2's responses read
    only httpx2's stream classes (``also(_Body, library.AsyncByteStream)``)."""
    if issubclass(cls, base):
        return cls
    made = _SUBCLASSES.get((cls, base))
    if made is None:
        made = _SUBCLASSES.setdefault((cls, base), type(cls.__name__, (cls, base), {}))
    return made


def core_name(library: Http) -> str:
    """The name of ``library``'s httpcore: ``httpcore`` or ``httpcore2``."""
    return _CORES[library.__name__]


def core(library: Http) -> Any:
    """``library``'s httpcore, imported now (httpx imports it with its first transport, not before)."""
    module: ModuleType = importlib.import_module(core_name(library))
    return module
