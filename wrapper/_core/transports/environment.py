"""What the environment says of the network: the TLS contexts of the clients' own pools (with
``SSL_CERT_FILE`` and ``SSL_CERT_DIR``), and whether it configures a proxy."""

from __future__ import annotations

import functools
import os
import urllib.request
from typing import TYPE_CHECKING

from .library import HTTPX, Http

if TYPE_CHECKING:
    import ssl

__all__ = ["proxy_in_env", "ssl_context"]


def ssl_context(library: Http = HTTPX, *, http1: bool = True, http2: bool = False) -> ssl.SSLContext:
    """A TLS context of ``library``'s defaults, honouring ``SSL_CERT_FILE`` and ``SSL_CERT_DIR``, shared by
    the pools of the same library and HTTP versions.

    httpcore sets the ALPN protocols of the context it is given on each connection, ``h2`` among them
    with ``http2=True``: a context shared with an HTTP/2 client would make every other pool offer h2
    (and an h2 server's first frame then read as a garbled HTTP/1.1 status line). So each setting of
    ``http1``/``http2`` has its own context; HTTP/1.1's offers ``http/1.1`` alone from the start, as
    aiohttp's connections, which set no ALPN, must.
    """
    return _ssl_context(
        library, http1, http2, os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR")
    )


@functools.lru_cache(maxsize=16)
def _ssl_context(
    library: Http, http1: bool, http2: bool, cert_file: str | None, cert_dir: str | None
) -> ssl.SSLContext:
    """One context per library, HTTP versions and CA setting: loading a CA bundle costs tens of ms."""
    context = library.create_ssl_context()
    if not http2:
        context.set_alpn_protocols(["http/1.1"])
    return context


def proxy_in_env() -> bool:
    """True when the environment (or the system) configures an HTTP, HTTPS or all-protocol proxy."""
    proxies = urllib.request.getproxies()
    return any(proxies.get(scheme) for scheme in ("http", "https", "all"))
