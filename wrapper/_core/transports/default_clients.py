"""``DefaultHttpxClient`` and ``DefaultAsyncHttpxClient``: the pool a client would build, with your changes.

A client given ``http_client=httpx.Client()`` gets httpx's defaults (at most 100 connections, no
CA bundle from ``SSL_CERT_DIR``), not the package's. These build the pool the clients build for
themselves (no cap on connections, up to 1000 idle ones kept, the TLS context that honours
``SSL_CERT_FILE`` and ``SSL_CERT_DIR``, the environment's proxies; for sync clients the transport
that hands each request a connection of its own in constant time), then apply the keyword arguments
given, which are ``httpx.Client``'s (``httpx.AsyncClient``'s)::

    http_client = DefaultHttpxClient(proxy="http://proxy.internal:3128", verify="/etc/ssl/corp-ca.pem")
    scale = Scale(http_client=http_client)

``verify`` also takes the path of a CA bundle (a PEM file or a directory of them), which httpx
itself no longer does. The client's own ``timeout`` applies to its calls whatever the pool's is.
An async client given an ``http_client`` sends everything through it, never through its faster
aiohttp pool: pass one when you need httpx's features (a proxy, auth, event hooks, mounts).
``DefaultHttpx2Client`` and ``DefaultAsyncHttpx2Client`` are the same on httpx2 (its classes, its
TLS defaults), loaded on first use. Named as in openai-python and the other Stainless SDKs, so their
users find them.
"""

from __future__ import annotations

import functools
import inspect
import os
import ssl
from typing import TYPE_CHECKING, Any

import httpx

from ..options import checked_limits
from .environment import proxy_in_env, ssl_context
from .library import HTTPX, Http, httpx2
from .sync_pool import CheckoutTransport

__all__ = ["DefaultAsyncHttpx2Client", "DefaultAsyncHttpxClient", "DefaultHttpx2Client", "DefaultHttpxClient"]

_OWN_TRANSPORT = frozenset({"transport", "mounts", "proxy", "http1", "http2"})
"""Keywords that shape the transport httpx builds itself: given one, httpx builds it (with our limits
and TLS context) instead of the sync clients' checkout transport."""


def _options(name: str, base: type[object], library: Http, kwargs: dict[str, Any]) -> dict[str, Any]:
    """``kwargs`` over the package's pool defaults; ``ValueError`` naming an option that is not ``base``'s
    (``library``'s ``Client`` or ``AsyncClient``) or whose value cannot be used."""
    keywords = frozenset(inspect.signature(base.__init__).parameters) - {"self"}  # not restated here
    unknown = sorted(set(kwargs) - keywords)
    if unknown:
        raise ValueError(
            f"{name}: {', '.join(map(repr, unknown))} is not a keyword argument of "
            f"{library.__name__}.{base.__name__} (those are: {', '.join(sorted(keywords))})"
        )
    if "cert" in kwargs:  # httpx would load it into the TLS context every default pool shares
        raise ValueError(
            f"{name}: cert is deprecated by httpx; load the client certificate into a TLS context of "
            "your own (ctx = ssl.create_default_context(); ctx.load_cert_chain(...)) and pass verify=ctx"
        )
    options = dict(kwargs)
    options["limits"] = checked_limits(kwargs.get("limits"), None)
    http1, http2 = kwargs.get("http1", True), kwargs.get("http2", False)
    options["verify"] = _verify(kwargs.get("verify", True), name, library, http1=http1, http2=http2)
    options.setdefault("trust_env", True)
    return options


def _verify(verify: object, name: str, library: Http, *, http1: bool, http2: bool) -> ssl.SSLContext:
    """``verify`` as a TLS context: True is the default pools' context (one of its own for HTTP/2: see
    ``ssl_context``), a path a CA bundle."""
    if isinstance(verify, ssl.SSLContext):
        return verify
    if verify is True:
        return ssl_context(library, http1=http1, http2=http2)
    if verify is False:
        return library.create_ssl_context(verify=False)
    if isinstance(verify, str | os.PathLike):
        path = os.fspath(verify)
        if not os.path.exists(path):
            raise ValueError(
                f"{name}: verify: no CA bundle at {path!r} (give a PEM file or a directory of them)"
            )
        try:
            if os.path.isdir(path):
                return ssl.create_default_context(capath=path)
            return ssl.create_default_context(cafile=path)
        except ssl.SSLError as exc:
            raise ValueError(f"{name}: verify: {path!r} is not a PEM CA bundle ({exc})") from None
    raise ValueError(
        f"{name}: verify must be True, False, an ssl.SSLContext or the path of a CA bundle; got {verify!r}"
    )


@functools.cache
def _classes(library: Http) -> tuple[type[httpx.Client], type[httpx.AsyncClient]]:
    """The default sync and async client classes of ``library``: its ``Client`` and ``AsyncClient``."""
    suffix = "" if library is HTTPX else "2"
    sync_name, async_name = f"DefaultHttpx{suffix}Client", f"DefaultAsyncHttpx{suffix}Client"

    class DefaultClient(library.Client):  # type: ignore[name-defined,misc]
        def __init__(self, **kwargs: Any) -> None:
            options = _options(sync_name, library.Client, library, kwargs)
            # httpx applies the environment's proxies only to a transport of its own making.
            env_proxy = options["trust_env"] and proxy_in_env()
            if not env_proxy and not _OWN_TRANSPORT & set(kwargs):
                options["transport"] = CheckoutTransport(options["limits"], options["verify"], library)
            super().__init__(**options)

    class DefaultAsyncClient(library.AsyncClient):  # type: ignore[name-defined,misc]
        def __init__(self, **kwargs: Any) -> None:
            super().__init__(**_options(async_name, library.AsyncClient, library, kwargs))

    DefaultClient.__name__ = DefaultClient.__qualname__ = sync_name
    DefaultAsyncClient.__name__ = DefaultAsyncClient.__qualname__ = async_name
    return DefaultClient, DefaultAsyncClient


if TYPE_CHECKING:
    import httpx2 as _httpx2_types

    DefaultHttpxClient = httpx.Client
    """An ``httpx.Client`` with the pool defaults of the package's sync clients (see the module)."""
    DefaultAsyncHttpxClient = httpx.AsyncClient
    """An ``httpx.AsyncClient`` with the pool defaults of the package's async clients (see the module)."""
    DefaultHttpx2Client = _httpx2_types.Client
    """An ``httpx2.Client`` with the pool defaults of the package's sync clients (see the module)."""
    DefaultAsyncHttpx2Client = _httpx2_types.AsyncClient
    """An ``httpx2.AsyncClient`` with the pool defaults of the package's async clients (see the module)."""
else:
    DefaultHttpxClient, DefaultAsyncHttpxClient = _classes(HTTPX)

    def __getattr__(name: str) -> Any:
        """``DefaultHttpx2Client``, ``DefaultAsyncHttpx2Client``: built (and httpx2 imported) on first use."""
        if name in ("DefaultHttpx2Client", "DefaultAsyncHttpx2Client"):
            return _classes(httpx2())[name == "DefaultAsyncHttpx2Client"]
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
