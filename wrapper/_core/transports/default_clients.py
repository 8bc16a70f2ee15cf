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
Named as in openai-python and the other Stainless SDKs, so their users find them.
"""

from __future__ import annotations

import inspect
import os
import ssl
from typing import TYPE_CHECKING, Any

import httpx

from ..options import checked_limits
from .environment import proxy_in_env, ssl_context
from .sync_pool import CheckoutTransport

__all__ = ["DefaultAsyncHttpxClient", "DefaultHttpxClient"]

_OWN_TRANSPORT = frozenset({"transport", "mounts", "proxy", "http1", "http2"})
"""Keywords that shape the transport httpx builds itself: given one, httpx builds it (with our limits
and TLS context) instead of the sync clients' checkout transport."""


_KEYWORDS = {
    cls: frozenset(inspect.signature(cls.__init__).parameters) - {"self"}
    for cls in (httpx.Client, httpx.AsyncClient)
}
"""The keyword arguments each httpx client class takes (read from httpx, not restated)."""


def _options(cls: type[httpx.Client | httpx.AsyncClient], kwargs: dict[str, Any]) -> dict[str, Any]:
    """``kwargs`` over the package's pool defaults; ``ValueError`` naming an option that is not httpx's
    or whose value cannot be used."""
    name = "DefaultHttpxClient" if cls is httpx.Client else "DefaultAsyncHttpxClient"
    unknown = sorted(set(kwargs) - _KEYWORDS[cls])
    if unknown:
        raise ValueError(
            f"{name}: {', '.join(map(repr, unknown))} is not a keyword argument of httpx.{cls.__name__} "
            f"(those are: {', '.join(sorted(_KEYWORDS[cls]))})"
        )
    if "cert" in kwargs:  # httpx would load it into the TLS context every default pool shares
        raise ValueError(
            f"{name}: cert is deprecated by httpx; load the client certificate into a TLS context of "
            "your own (ctx = ssl.create_default_context(); ctx.load_cert_chain(...)) and pass verify=ctx"
        )
    options = dict(kwargs)
    options["limits"] = checked_limits(kwargs.get("limits"), None)
    options["verify"] = _verify(kwargs.get("verify", True), name)
    options.setdefault("trust_env", True)
    return options


def _verify(verify: object, name: str) -> ssl.SSLContext:
    """``verify`` as a TLS context: True is the default pools' context, a path a CA bundle."""
    if isinstance(verify, ssl.SSLContext):
        return verify
    if verify is True:
        return ssl_context()
    if verify is False:
        return httpx.create_ssl_context(verify=False)
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


class _DefaultHttpxClient(httpx.Client):
    def __init__(self, **kwargs: Any) -> None:
        options = _options(httpx.Client, kwargs)
        # httpx applies the environment's proxies only to a transport of its own making.
        env_proxy = options["trust_env"] and proxy_in_env()
        if not env_proxy and not _OWN_TRANSPORT & set(kwargs):
            options["transport"] = CheckoutTransport(options["limits"], options["verify"])
        super().__init__(**options)


class _DefaultAsyncHttpxClient(httpx.AsyncClient):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**_options(httpx.AsyncClient, kwargs))


if TYPE_CHECKING:
    DefaultHttpxClient = httpx.Client
    """An ``httpx.Client`` with the pool defaults of the package's sync clients (see the module)."""
    DefaultAsyncHttpxClient = httpx.AsyncClient
    """An ``httpx.AsyncClient`` with the pool defaults of the package's async clients (see the module)."""
else:
    DefaultHttpxClient = _DefaultHttpxClient
    DefaultAsyncHttpxClient = _DefaultAsyncHttpxClient
