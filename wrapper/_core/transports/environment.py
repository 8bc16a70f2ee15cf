"""What the environment says of the network: the TLS context of the clients' own pools (with
``SSL_CERT_FILE`` and ``SSL_CERT_DIR``), and whether it configures a proxy."""

from __future__ import annotations

import functools
import os
import urllib.request
from typing import TYPE_CHECKING

import httpx

if TYPE_CHECKING:
    import ssl

__all__ = ["proxy_in_env", "ssl_context"]


def ssl_context() -> ssl.SSLContext:
    """The TLS context of the default pools: httpx's, honouring ``SSL_CERT_FILE`` and ``SSL_CERT_DIR``."""
    return _ssl_context(os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))


@functools.lru_cache(maxsize=4)
def _ssl_context(cert_file: str | None, cert_dir: str | None) -> ssl.SSLContext:
    """One context per CA setting: loading a CA bundle costs tens of milliseconds."""
    return httpx.create_ssl_context(trust_env=True)


def proxy_in_env() -> bool:
    """True when the environment (or the system) configures an HTTP, HTTPS or all-protocol proxy."""
    proxies = urllib.request.getproxies()
    return any(proxies.get(scheme) for scheme in ("http", "https", "all"))
