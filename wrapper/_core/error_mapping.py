"""Turning transport failures and error responses into ``wrapper.errors`` classes."""

from __future__ import annotations

import errno
import json
import socket
import ssl
from typing import Any, TypeVar

import httpx

from wrapper._generated.exceptions import (
    APIConnectionError,
    APIResponseValidationError,
    APIStatusError,
    APITimeoutError,
    AuthenticationError,
    BadRequestError,
    ConflictError,
    InternalServerError,
    NotFoundError,
    PermissionDeniedError,
    RateLimitError,
    UnprocessableEntityError,
    excerpt,
    scrub,
)

from .redact import redacted_url, scrub_chain
from .transports.library import classes

T = TypeVar("T")

STATUS_CLASSES: dict[int, type[APIStatusError]] = {
    400: BadRequestError,
    401: AuthenticationError,
    403: PermissionDeniedError,
    404: NotFoundError,
    409: ConflictError,
    422: UnprocessableEntityError,
    429: RateLimitError,
}
_EXCERPT = 500


def is_transport_failure(exc: BaseException) -> bool:
    """True for what a transport raises when no usable response arrived: httpx's (or httpx2's) transport
    errors (the aiohttp lane raises those too), and a body that does not decode as its Content-Encoding
    says."""
    return isinstance(exc, classes("TransportError") + classes("DecodingError"))


_TIMED_OUT = {
    "connect": "connect timeout: no connection to {where} within {seconds}; check base_url and the network, "
    "or raise the connect timeout",
    "read": "read timeout: {where} sent nothing for {seconds}",
    "write": "write timeout: the request could not be sent to {where} within {seconds}",
    "pool": "pool timeout: no connection to {where} came free within {seconds} "
    "(as many as the pool's limits allow were busy)",
}
"""What each of httpx's timeouts (``httpx.Timeout``'s fields) says when it runs out."""
_PHASES = (
    ("ConnectTimeout", "connect"),
    ("ReadTimeout", "read"),
    ("WriteTimeout", "write"),
    ("PoolTimeout", "pool"),
)
"""Each timeout's exception class, by name in httpx and httpx2."""


def timeout_phase(exc: BaseException | None) -> str | None:
    """Which timeout ``exc`` (httpx's or httpx2's) ran out: ``connect``, ``read``, ``write`` or ``pool``;
    None if none."""
    if not isinstance(exc, classes("TimeoutException")):
        return None
    return next((phase for kind, phase in _PHASES if isinstance(exc, classes(kind))), None)


def connection_error(exc: Exception, request: httpx.Request) -> APIConnectionError:
    """The ``APIConnectionError`` (``APITimeoutError`` for a timeout) for a transport failure.

    It reads the same whichever transport met the failure: where, what happened (which timeout ran
    out, after how many seconds) and what to check. Nothing in it looks like an HTTP status: none
    came.
    """
    url = request.url
    where = f"{url.host}:{url.port or {'http': 80, 'https': 443}.get(url.scheme, '')}"
    phase = timeout_phase(exc)
    detail = str(exc) or type(exc).__name__
    if phase is not None:
        seconds = request.extensions.get("timeout", {}).get(phase)
        message = _TIMED_OUT[phase].format(where=where, seconds=_seconds(seconds))
    elif isinstance(exc, classes("ConnectError")):
        reason = _reason(exc)
        check = next(
            (advice for start, advice in _CHECKS if reason.startswith(start)),
            "check base_url, and that the server is up and reachable",
        )
        message = f"cannot connect to {where} ({reason}): {check}"
    elif isinstance(exc, classes("DecodingError")):
        message = f"the response from {where} could not be decoded: {detail}"
    else:  # reset, cut mid-body, a garbled status line or header, ...
        message = f"the connection to {where} failed: {detail}"
    error = (APITimeoutError if phase is not None else APIConnectionError)(message, request=request)
    scrub_chain(exc, request.headers)  # the traceback shows it: it may quote what the server sent
    error.__cause__ = exc
    return error


_NAME_MISMATCH = (62, 64)
"""OpenSSL's verify codes for a certificate that names another host (X509_V_ERR_HOSTNAME_MISMATCH) or
address (X509_V_ERR_IP_ADDRESS_MISMATCH)."""
_CHECKS = (
    (
        "TLS certificate not trusted",
        "set SSL_CERT_FILE to the CA bundle that signed the server's certificate",
    ),
    (
        "TLS certificate of another host",
        "base_url's host must be one the certificate names (a CA bundle would not change that)",
    ),
)
"""What to check for a failure to connect, by how its reason starts (the network, by default)."""


def _seconds(value: float | None) -> str:
    """``0.5 s``: a timeout as a message gives it, to the millisecond (a deadline's cut leaves 0.49987...)."""
    return "no time limit" if value is None else f"{round(value, 3):g} s"


def _reason(exc: BaseException) -> str:
    """Why a connection failed, from the operating system's error under ``exc`` (httpx's or aiohttp's)."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        current = todo.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        wrapped = getattr(current, "os_error", None)  # aiohttp's connection errors hold the system's
        if isinstance(wrapped, OSError):
            todo.append(wrapped)
            continue
        if isinstance(current, ssl.SSLCertVerificationError):
            if current.verify_code in _NAME_MISMATCH:
                return f"TLS certificate of another host: {current.verify_message}"
            return f"TLS certificate not trusted: {current.verify_message}"
        if isinstance(current, ssl.SSLError):
            return f"TLS failed: {current.reason or current}"
        if isinstance(current, socket.gaierror):
            return "host name not found"
        if (
            isinstance(current, ConnectionRefusedError)
            or getattr(current, "errno", None) == errno.ECONNREFUSED
        ):
            return "connection refused"
        if isinstance(current, OSError) and current.strerror:
            return current.strerror.lower()
        todo += [current.__cause__, current.__context__, getattr(current, "os_error", None)]
    return str(exc) or type(exc).__name__


def text_of(response: httpx.Response) -> str:
    """The response's text; a body that is not in the charset it declares is read as UTF-8."""
    try:
        return response.text
    except UnicodeError:  # e.g. "charset=utf-16" on a body without a BOM
        return response.content.decode("utf-8", "replace")


def body_of(response: httpx.Response) -> Any:
    """The response's JSON, or its text when it is not JSON."""
    try:
        return json.loads(response.content)
    except (ValueError, RecursionError):  # RecursionError: nested deeper than Python's stack allows
        return text_of(response)


def status_class(status: int) -> type[APIStatusError]:
    """The class of an error response with ``status``: its own (``STATUS_CLASSES``), ``InternalServerError``
    for 5xx, else ``APIStatusError``."""
    return InternalServerError if status >= 500 else STATUS_CLASSES.get(status, APIStatusError)


def status_error(
    response: httpx.Response, body: Any, *, detail: str | None = None, status: int | None = None
) -> APIStatusError:
    """The status class's error for an error response, its message naming the status and the body.

    ``status`` overrides the response's (for an error event inside a stream that began with 200).
    """
    status = response.status_code if status is None else status
    cls = status_class(status)
    if 300 <= status < 400:  # never followed: the request's credentials would go with it
        where = response.headers.get("location")
        shown = body if isinstance(body, str) else json.dumps(body) if detail is None else detail
        detail = f"redirect{f' to {where}' if where else ''} not followed" + (f"; {shown}" if shown else "")
    error = cls(status_message(response, status, body, detail), response=response, body=body)
    error.status_code = status
    return error


def requested(error: APIStatusError, hint: str | None = None) -> APIStatusError:
    """``error`` with its request's method and URL (``redacted_url``) after its message, then ``hint``.

    Which request got the answer is the first thing to check: a wrong ``base_url`` shows in the URL.
    """
    request = error.request
    message = f"{error.message} ({request.method} {redacted_url(request.url)})"
    error.message = scrub(f"{message}; {hint}" if hint else message, request.headers)
    error.args = (error.message,)
    return error


def status_message(response: httpx.Response, status: int, body: Any, detail: str | None = None) -> str:
    """``HTTP <status>: <detail>``, the detail (the body, unless given) scrubbed and cut to an excerpt."""
    if detail is None:
        detail = body if isinstance(body, str) else json.dumps(body)
    detail = excerpt(detail, response.request.headers, _EXCERPT)
    return f"HTTP {status}: {detail}" if detail else f"HTTP {status}"


def invalid(response: httpx.Response, what: str, event: str | None = None) -> APIResponseValidationError:
    """The error for a successful response (or a stream ``event``) that is not what the spec promises."""
    text = text_of(response) if event is None else event
    shown = scrub(text, response.request.headers)[:_EXCERPT]  # scrubbed before the cut: no part survives
    return APIResponseValidationError(
        f"HTTP {response.status_code} response {what}: {shown!r}", response=response, text=text
    )


class Malformed(Exception):
    """A body (or stream event) that is not what the spec promises; ``at`` names the response it came in."""

    def __init__(self, what: str) -> None:
        super().__init__(what)
        self.what = what

    def at(self, response: httpx.Response, event: str | None = None) -> APIResponseValidationError:
        """The ``APIResponseValidationError`` for this body in ``response``."""
        return invalid(response, self.what, event)
