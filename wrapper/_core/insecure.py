"""``InsecureConnectionWarning`` for a client whose credentials would cross the network unprotected.

Two cases, checked when the client is built: a plain ``http://`` base URL, and an ``http_client`` (your
own, or ``DefaultHttpxClient(verify=False)``) that does not verify the server's TLS certificate or its
host name. Neither is warned about for a loopback host (the sandbox, a local proxy or tunnel): the
credentials do not leave the machine. The warning points at the line that built the client, and
Python's default filter shows it once for each such line; filter it by its class to silence it.
"""

from __future__ import annotations

import ipaddress
import ssl
import warnings

import httpx

from wrapper._generated.exceptions import InsecureConnectionWarning

from .logs import _caller_level
from .redact import redacted_url

__all__ = ["warn_if_insecure"]


def warn_if_insecure(base_url: str, http_client: httpx.Client | httpx.AsyncClient | None) -> None:
    """Warn (``InsecureConnectionWarning``) if the credentials sent to ``base_url`` through ``http_client``
    (None: the client's own pool, which always verifies) would go unencrypted or to an unverified server."""
    url = httpx.URL(base_url)
    if _is_loopback(url.host):
        return
    if url.scheme == "http":
        problem = (
            f"base_url {redacted_url(url)!r} is plain http:// to another host: the credentials every "
            "request carries cross the network unencrypted; use https://"
        )
    elif http_client is not None and not _verifies(http_client):
        problem = (
            f"http_client does not verify TLS certificates (verify=False): the credentials sent to "
            f"{url.host} would go to whoever answers in its place; give verify= the CA bundle that signed "
            "its certificate"
        )
    else:
        return
    warnings.warn(problem, InsecureConnectionWarning, stacklevel=_caller_level())


def _is_loopback(host: str) -> bool:
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_unspecified  # 0.0.0.0 and :: reach this machine too


def _verifies(http_client: httpx.Client | httpx.AsyncClient) -> bool:
    """False if a transport of ``http_client`` has a TLS context that skips the certificate or host check.

    httpx keeps the context inside its transports (httpcore's pool; the sync clients' checkout transport
    keeps its own): a transport it cannot see into (a mock, your own) counts as verifying.
    """
    transports = [getattr(http_client, "_transport", None), *getattr(http_client, "_mounts", {}).values()]
    for transport in transports:
        context = getattr(getattr(transport, "_pool", None), "_ssl_context", None)
        context = context if context is not None else getattr(transport, "_verify", None)
        if isinstance(context, ssl.SSLContext) and (
            context.verify_mode == ssl.CERT_NONE or not context.check_hostname
        ):
            return False
    return True
