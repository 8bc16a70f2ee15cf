"""How the clients meet the network: pool limits, TLS contexts, proxies, User-Agent, header checks, and
whether something (a mock, a tracer) is watching httpx's (or httpx2's) transports.
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

from .library import HTTPX, Http, classes, core_name

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
def user_agent(library: Http = HTTPX) -> str:
    """``completion-clients/<version> httpx/<version>`` (``httpx2/<version>`` on httpx2), sent on every
    request, whichever the path."""
    from importlib.metadata import PackageNotFoundError, version  # not at import: it costs a few ms

    try:
        ours = version("completion-clients")
    except PackageNotFoundError:  # run from a checkout that was never installed
        ours = "0"
    return f"completion-clients/{ours} {library.__name__}/{library.__version__}"


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
    """
    for key in _hooks(library):
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


def checked_limits(limits: object, http_client: object) -> httpx.Limits:
    """The pool limits of a client's own pool (``DEFAULT_LIMITS`` if not given), an ``httpx.Limits``
    (an ``httpx2.Limits`` is taken as the same)."""
    if limits is not None and http_client is not None:
        raise ValueError("limits applies to the client's own pool: set it on your http_client instead")
    if limits is None:
        return DEFAULT_LIMITS
    if not isinstance(limits, classes("Limits")):
        raise ValueError(f"limits must be an httpx.Limits (or httpx2.Limits); got {limits!r}")
    if isinstance(limits, httpx.Limits):
        return limits
    return httpx.Limits(
        max_connections=limits.max_connections,
        max_keepalive_connections=limits.max_keepalive_connections,
        keepalive_expiry=limits.keepalive_expiry,
    )
