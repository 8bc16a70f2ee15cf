"""How the clients meet the network: pool limits, TLS context, proxies, User-Agent, header checks, and
whether something (a mock, a tracer) is watching httpx's transports.
"""

from __future__ import annotations

import functools
import os
import re
import sys
import types
import urllib.request
from collections.abc import Mapping
from typing import TYPE_CHECKING

import httpx

if TYPE_CHECKING:
    import ssl

__all__ = [
    "DEFAULT_LIMITS",
    "checked_headers",
    "checked_limits",
    "header_value",
    "httpx_is_watched",
    "proxy_in_env",
    "ssl_context",
    "user_agent",
]

DEFAULT_LIMITS = httpx.Limits(max_connections=None, max_keepalive_connections=1000, keepalive_expiry=5.0)
"""No cap on connections (``concurrency=N`` is N in flight; no thread waits for a pool slot), and
up to 1000 idle ones kept for the next requests of a large batch."""


@functools.cache
def user_agent() -> str:
    """``completion-clients/<version> httpx/<version>``, sent on every request, whichever the path."""
    from importlib.metadata import PackageNotFoundError, version  # not at import: it costs a few ms

    try:
        ours = version("completion-clients")
    except PackageNotFoundError:  # run from a checkout that was never installed
        ours = "0"
    return f"completion-clients/{ours} httpx/{httpx.__version__}"


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


_HOOKS = (
    ("httpx", "AsyncHTTPTransport", "handle_async_request"),  # pytest-httpx
    ("httpcore", "AsyncConnectionPool", "handle_async_request"),  # respx, OpenTelemetry
    ("httpx", "AsyncClient", "_transport_for_url"),  # respx's other mocker
    ("httpx", "AsyncClient", "send"),  # Sentry
)
"""The functions that HTTP mocks and httpx instrumentations replace to see requests."""
_originals: dict[tuple[str, str, str], object] = {}


def httpx_is_watched() -> bool:
    """True when a mock or an instrumentation has replaced one of httpx's (or httpcore's) transport functions.

    Each is compared with the original captured the first time its module was seen (httpx's at import);
    a module not imported yet cannot have been patched, and is not imported here (httpcore is slow to).
    """
    for key in _HOOKS:
        module = sys.modules.get(key[0])
        if module is None:
            continue
        hook = getattr(getattr(module, key[1]), key[2])
        original = _originals.get(key)
        if original is None:
            if type(hook) is not types.FunctionType or hook.__module__.partition(".")[0] != key[0]:
                return True  # already replaced before we first looked
            original = _originals.setdefault(key, hook)
        if hook is not original:
            return True
    return False


httpx_is_watched()  # capture httpx's own functions now, before a test tool can replace them


_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")


def header_value(value: str, argument: str) -> str:
    """``value``, refused with a ``ValueError`` naming ``argument`` if it cannot be an HTTP header value.

    A line break would end the header early; the value itself is never in the message (it may be a secret).
    """
    for char in value:
        if not " " <= char <= "~":
            control = char < " " or char == "\x7f"
            kind = "a control character (such as a line break)" if control else "a non-ASCII character"
            raise ValueError(
                f"{argument} must be printable ASCII to go in an HTTP header; it contains {kind}"
            )
    return value


def checked_headers(headers: Mapping[str, str] | None, argument: str = "default_headers") -> dict[str, str]:
    """``headers`` as a dict; ``ValueError`` naming ``argument`` and the header that cannot be sent."""
    if headers is None:
        return {}
    if not isinstance(headers, Mapping):
        raise ValueError(f"{argument} must be a mapping of header names to values; got {headers!r}")
    for name, value in headers.items():
        if not isinstance(name, str) or not _TOKEN.fullmatch(name):
            raise ValueError(f"{argument}: {name!r} is not a valid HTTP header name")
        if not isinstance(value, str):
            raise ValueError(f"{argument}[{name!r}] must be a string; got {type(value).__name__}")
        header_value(value, f"{argument}[{name!r}]")
    return dict(headers)


def checked_limits(limits: httpx.Limits | None, http_client: object) -> httpx.Limits:
    """The pool limits of a client's own pool (``DEFAULT_LIMITS`` if not given)."""
    if limits is not None and http_client is not None:
        raise ValueError("limits applies to the client's own pool: set it on your http_client instead")
    if limits is not None and not isinstance(limits, httpx.Limits):
        raise ValueError(f"limits must be an httpx.Limits; got {limits!r}")
    return DEFAULT_LIMITS if limits is None else limits
