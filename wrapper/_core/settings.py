"""A client's settings: its credentials and base URL from the arguments or the environment, checked
(the API's descriptor names them), and the module-level default client.
"""

from __future__ import annotations

import atexit
import importlib
import os
import re
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

import httpx

from .headers import header_value
from .options import CLIENT_NAMES
from .redact import redacted_url
from .transports import fork
from .transports.library import Http, chosen, library_of

if TYPE_CHECKING:
    from wrapper.apis import Api

    from .wires import Wire

__all__ = [
    "Connect",
    "DefaultClient",
    "checked_arguments",
    "checked_base_url",
    "checked_http_client",
    "credentials",
    "from_env",
    "lazy_attribute",
    "required",
]

Connect = Callable[[Mapping[str, str]], "tuple[Wire, dict[str, str]]"]
"""An API's module's: its wire and the headers that authenticate, from the client's credentials."""


def checked_arguments(api: Api, cls: str, arguments: Mapping[str, Any]) -> None:
    """``TypeError`` for a constructor argument that is neither a credential of ``api`` nor an option."""
    known = CLIENT_NAMES | {credential.keyword for credential in api.credentials}
    for name in arguments:
        if name not in known:
            raise TypeError(f"{cls}() got an unexpected keyword argument {name!r}")


def credentials(api: Api, arguments: dict[str, Any]) -> dict[str, str]:
    """The credentials given in ``arguments`` (taken out of them), else from their environment variables,
    each checked as a header value; ``ValueError`` naming a required one neither gives."""
    found = {}
    for credential in api.credentials:
        given = arguments.pop(credential.keyword, None)
        if credential.required:
            found[credential.keyword] = required(
                given, env=credential.env, argument=credential.keyword, client=api.name.title()
            )
        elif value := from_env(given, credential.env, credential.keyword):
            found[credential.keyword] = header_value(value, f"{credential.keyword} (or {credential.env})")
    return found


def from_env(value: object, env: str, argument: str, default: str | None = None) -> str | None:
    """``value`` if given, else the environment variable ``env`` if set and not empty, else ``default``.

    A given value that is not a string is a ``ValueError`` naming ``argument`` and its type (never the
    value: it may be a credential).
    """
    if value is None:
        return os.environ.get(env) or default
    if not isinstance(value, str):
        raise ValueError(f"{argument} must be a string (or None: from {env}); got {type(value).__name__}")
    return value


def required(value: str | None, *, env: str, argument: str, client: str) -> str:
    """A credential from the argument or the environment; ``ValueError`` naming both when neither is set."""
    value = from_env(value, env, argument)
    if not value:
        raise ValueError(
            f"{client} needs {argument}: pass {argument}=... or set the {env} environment variable"
        )
    return header_value(value, f"{argument} (or {env})")


def checked_base_url(base_url: str, api: Api) -> str:
    """``base_url`` without its trailing slash; ``ValueError`` unless an http(s) URL with a host, and
    nothing after its path (``refuse_base_url_extras``)."""
    try:
        url = httpx.URL(base_url)
    except httpx.InvalidURL:
        url = None
    if url is None or url.scheme not in ("http", "https") or not url.host:
        raise ValueError(
            f"base_url must be an http:// or https:// URL with a host, such as {api.default_base_url!r}; "
            f"got {_USERINFO.sub('//<redacted>@', base_url)!r}"
        )
    refuse_base_url_extras(base_url, url, api)
    return base_url.rstrip("/")


_USERINFO = re.compile(r"//[^/?#]*@")
"""The user info of a URL (which may hold a password), as a message must not show it."""


def refuse_base_url_extras(base_url: str, url: httpx.URL, api: Api) -> None:
    """``ValueError`` for a base URL with user info (``user:password@``), a query (``?``) or a fragment
    (``#``): the first would go out as Basic auth (replacing Gradient's bearer token), the others would
    end the path the endpoint's is appended to. The message never shows the user info."""
    name = f"base_url (or {api.base_url_env})"
    if url.userinfo:
        raise ValueError(
            f"{name} must not hold credentials (user:password@ before the host): they would go out as "
            f"Basic auth, which this API does not take (its credentials are the arguments "
            f"{', '.join(c.keyword for c in api.credentials)}); give it as "
            f"{str(url.copy_with(userinfo=b'')).rstrip('/')!r}"
        )
    if "?" in base_url or "#" in base_url:
        shown = redacted_url(url) + ("#..." if url.fragment else "")
        raise ValueError(
            f"{name} must not have a query (?...) or a fragment (#...): the endpoint's path is appended "
            f"to it, and would come after them; pass query parameters as extra_query={{...}}; got {shown!r}"
        )


def checked_http_client(http_client: object, *, asynchronous: bool) -> Http:
    """The HTTP library of ``http_client`` (an httpx or httpx2 ``Client``, ``AsyncClient`` for an async
    client), or the one ``COMPLETION_CLIENTS_HTTP`` names for a client's own pools (None given);
    ``ValueError`` for anything else."""
    if http_client is None:
        return chosen()
    library = library_of(http_client, asynchronous=asynchronous)
    if library is None:
        cls = "AsyncClient" if asynchronous else "Client"
        raise ValueError(
            f"http_client must be an httpx.{cls} or an httpx2.{cls}; got {type(http_client).__name__}"
        )
    return library


class _Closable(Protocol):
    def close(self) -> None: ...


C = TypeVar("C", bound=_Closable)


class DefaultClient(Generic[C]):
    """The client behind a module's ``complete``/``stream``: built from the environment on first use.

    A forked child keeps it: the client drops the pool it inherited (``transports.fork``).
    """

    def __init__(self, factory: Callable[[], C]) -> None:
        self._factory = factory
        self._client: C | None = None
        self._lock = threading.Lock()
        fork.register(self)

    def after_fork(self) -> None:
        self._lock = threading.Lock()  # a thread of the parent may have held it at the fork

    def get(self) -> C:
        """The client, built on the first call (thread-safe) and closed when the interpreter exits."""
        client = self._client
        if client is None:
            with self._lock:
                if self._client is None:
                    self._client = self._factory()
                    atexit.register(self.close)
                client = self._client
        return client

    def close(self) -> None:
        """Close and forget the client; the next ``get()`` builds a new one."""
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
            atexit.unregister(self.close)
            client.close()


def lazy_attribute(name: str, module: str) -> Callable[[str], Any]:
    """A module's ``__getattr__`` giving ``name``, imported from ``module`` on first use (the import of
    the module that uses it stays light)."""

    def __getattr__(attribute: str) -> Any:
        if attribute != name:
            raise AttributeError(f"no attribute {attribute!r}")
        return getattr(importlib.import_module(module), name)

    return __getattr__
