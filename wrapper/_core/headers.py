"""The headers the clients send: the User-Agent every request carries, and the checks a header given
by the caller (``default_headers``, ``extra_headers``, a credential) must pass before it is sent."""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping

from .transports.library import HTTPX, Http

__all__ = ["checked_headers", "header_value", "user_agent"]


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
