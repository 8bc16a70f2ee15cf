"""The hand-written exception tree: the status classes and the bases of Gradient's typed errors.

``wrapper.errors`` is the public namespace: it re-exports these and the per-tag ``GradientError``
subclasses that ``make regen`` writes to ``generated/gradient/exceptions.py`` from the spec.
``APIError`` is the root. A request that never got a complete answer raises ``APIConnectionError``
(``APITimeoutError`` when it ran out of time); an answer with an error status raises the
``APIStatusError`` subclass for its status, or for Gradient's typed 4XX bodies the ``GradientError``
subclass named after the body's ``type``; a success whose body is not what the spec promises
raises ``APIResponseValidationError``. Arguments the spec forbids raise ``ValueError`` before any
request is sent. Messages never contain the credentials the request carried.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import httpx

from ._redact import scrub

if TYPE_CHECKING:
    from generated.gradient.models import FlaggedContentError as _FlaggedContentBody

__all__ = [
    "APIConnectionError",
    "APIError",
    "APIResponseValidationError",
    "APIStatusError",
    "APITimeoutError",
    "AuthenticationError",
    "BadRequestError",
    "ConflictError",
    "ContentFlaggedError",
    "GradientError",
    "InternalServerError",
    "NotFoundError",
    "PermissionDeniedError",
    "RagError",
    "RateLimitError",
    "UnknownModelError",
    "UnprocessableEntityError",
]

ValidationErrorItem = tuple[tuple[int | str, ...], str, str]
"""One entry of a 422 body: ``(loc, msg, type)``."""


class APIError(Exception):
    """Base class of every error about an API call; ``.request`` is the request it was about."""

    message: str
    request: httpx.Request

    def __init__(self, message: str, *, request: httpx.Request) -> None:
        self.message = scrub(message, request.headers)
        self.request = request
        super().__init__(self.message)


class APIConnectionError(APIError):
    """No complete response arrived: the connection could not be made, or broke before the end."""


class APITimeoutError(APIConnectionError):
    """The request ran out of time (the client's ``timeout``) before the response was complete."""


class APIResponseValidationError(APIError):
    """A successful response (or stream event) that is not what the spec promises; ``.text`` holds it raw."""

    def __init__(self, message: str, *, response: httpx.Response, text: str) -> None:
        super().__init__(message, request=response.request)
        self.response = response
        self.status_code = response.status_code
        self.text = text


class APIStatusError(APIError):
    """The API answered with an error status; ``.body`` is its parsed JSON (or its text if not JSON)."""

    def __init__(self, message: str, *, response: httpx.Response, body: Any) -> None:
        super().__init__(message, request=response.request)
        self.response = response
        self.status_code = response.status_code
        self.body = body
        self.request_id: str | None = response.headers.get("x-request-id")

    @property
    def retry_after(self) -> float | None:
        """Seconds the server asked to wait (``retry-after-ms``, ``Retry-After``); None if it did not say."""
        from ._retry import parse_retry_after

        return parse_retry_after(self.response.headers)


class BadRequestError(APIStatusError):
    """HTTP 400: the API rejected the request as malformed."""


class AuthenticationError(APIStatusError):
    """HTTP 401: the credentials are missing or wrong."""


class PermissionDeniedError(APIStatusError):
    """HTTP 403: the credentials may not do this."""


class NotFoundError(APIStatusError):
    """HTTP 404: no such model or deployment (or a wrong base URL)."""


class ConflictError(APIStatusError):
    """HTTP 409: the request conflicts with the resource's state; retried."""


class UnprocessableEntityError(APIStatusError):
    """HTTP 422: the request was well-formed but invalid; ``.errors`` lists ``(loc, msg, type)``."""

    def __init__(self, message: str, *, response: httpx.Response, body: Any) -> None:
        super().__init__(message, response=response, body=body)
        self.errors: list[ValidationErrorItem] = []


class RateLimitError(APIStatusError):
    """HTTP 429: too many requests; retried after the server's ``Retry-After``."""


class InternalServerError(APIStatusError):
    """HTTP 5xx: the service failed; retried."""


class GradientError(APIStatusError):
    """A Gradient 4XX answer with a typed body: ``.type`` is its ``type``, ``.raw`` the generated model."""

    # A ``type`` the spec does not name (a service newer than this client) raises GradientError itself,
    # with ``.raw`` None; each type the spec names has its subclass in generated/gradient/exceptions.py.
    def __init__(
        self, message: str, *, response: httpx.Response, body: Any, type: str, raw: Any = None
    ) -> None:
        super().__init__(message, response=response, body=body)
        self.type = type
        self.raw = raw


class ContentFlaggedError(GradientError):
    """The input or output was flagged by content moderation; ``.samples`` are the flagged texts."""

    raw: _FlaggedContentBody

    @property
    def samples(self) -> list[str]:
        """The flagged pieces of text."""
        return [item.sample for item in self.raw.payload.flagged_content]


class _PayloadValidationError(GradientError):
    """A Gradient error that carries the service's validation error about the request."""

    @property
    def validation_error(self) -> Any:
        """The service's structured validation error, or None."""
        return self.raw.payload.to_dict().get("validationError")

    @property
    def formatted_validation_error(self) -> Any:
        """The same as readable text, or None."""
        return self.raw.payload.to_dict().get("formattedValidationError")


class RagError(GradientError):
    """Base class of the errors about a ``rag_collection``."""


class UnknownModelError(GradientError):
    """Base class of the errors about an unknown model id."""
