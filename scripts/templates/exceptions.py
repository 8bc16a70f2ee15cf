"""The exception tree every client raises, and the helpers its messages and retries need.

Hand-written: ``make regen`` copies this template from ``scripts/templates/exceptions.py`` to
``generated/exceptions.py``, where the per-``type`` ``GradientError`` subclasses generated from
the spec (``generated/gradient/exceptions.py``) subclass its bases. ``wrapper.errors`` is the
public namespace for both. ``APIError`` is the root. A request that never got a complete answer
raises ``APIConnectionError`` (``APITimeoutError`` when it ran out of time, ``IncompleteStreamError``
when a stream's body ended before its final chunk); an answer with an error status raises the
``APIStatusError`` subclass for its status, or for Gradient's typed 4XX bodies the
``GradientError`` subclass named after the body's ``type``, which is also the status class of the
status it came with (``with_status_class``); a success whose body is not what the spec promises
raises ``APIResponseValidationError``. Messages never contain the credentials the request carried,
as sent or escaped (``scrub``, ``excerpt``). ``InsecureConnectionWarning`` is the one warning.
"""

from __future__ import annotations

import functools
import json
import re
import time
from collections.abc import Callable, Mapping
from datetime import UTC
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import quote, quote_plus

import httpx

if TYPE_CHECKING:
    from wrapper._generated.gradient.models import FlaggedContentError as _FlaggedContentBody

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
    "IncompleteStreamError",
    "InsecureConnectionWarning",
    "InternalServerError",
    "NotFoundError",
    "PayloadValidationError",
    "PermissionDeniedError",
    "RagError",
    "RateLimitError",
    "UnknownModelError",
    "UnprocessableEntityError",
]

SENSITIVE_HEADERS = frozenset({"authorization", "proxy-authorization", "x-api-key", "cookie"})
REDACTED = "<redacted>"
MIN_SECRET = 6

ValidationErrorItem = tuple[tuple[int | str, ...], str, str]
"""One entry of a 422 body: ``(loc, msg, type)``."""


def scrub(text: str, headers: Mapping[str, str]) -> str:
    """``text`` with every credential sent in ``headers`` (a bearer token on its own, too) replaced,
    as sent and in the forms a message may quote it: JSON- or repr-escaped (once or twice over) and
    URL-encoded.

    Values shorter than ``MIN_SECRET`` are left alone: no real credential is that short, and
    replacing every "t" of a message because a test passed ``access_token="t"`` would garble it.
    """
    secrets = frozenset(
        secret
        for name in SENSITIVE_HEADERS
        if (value := headers.get(name))
        for secret in (value, value.rpartition(" ")[2])
        if len(secret) >= MIN_SECRET
    )
    return _pattern(secrets).sub(REDACTED, text) if secrets else text


def excerpt(text: str, headers: Mapping[str, str], limit: int) -> str:
    """``text`` scrubbed, then cut to ``limit`` characters (``...`` marking a cut): scrubbing first, so
    that no part of a credential the cut would split survives."""
    text = scrub(text, headers)
    return text if len(text) <= limit else text[:limit] + "..."


_ESCAPES: tuple[Callable[[str], str], ...] = (
    lambda s: json.dumps(s)[1:-1],
    lambda s: s.replace("/", "\\/"),  # JSON may escape a slash
    lambda s: repr(s)[1:-1],
    lambda s: s.replace("\\", "\\\\").replace("'", "\\'"),  # repr of a text with both quotes
    lambda s: s.replace("\\", "\\\\").replace('"', '\\"'),
    lambda s: quote(s, safe=""),
    lambda s: quote(s),  # a path keeps its slashes
    lambda s: quote_plus(s, safe=""),
    lambda s: re.sub("%[0-9A-F]{2}", lambda m: m[0].lower(), quote(s, safe="")),
)
"""The ways a message may quote a text: JSON, ``repr`` and percent-encoding (either case of hex)."""


@functools.lru_cache(maxsize=64)
def _pattern(secrets: frozenset[str]) -> re.Pattern[str]:
    """A pattern matching each of ``secrets`` in every form ``_ESCAPES`` gives, twice over, longest first."""
    forms = set(secrets)
    for _ in range(2):
        forms |= {escape(form) for form in forms for escape in _ESCAPES}
    return re.compile("|".join(map(re.escape, sorted(forms, key=len, reverse=True))))


def parse_retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds from ``retry-after-ms``, or ``Retry-After`` in seconds or as an HTTP date; None if neither.

    A value that cannot be read, or is out of range (negative, not finite, a date or zone offset
    no clock can hold), counts as not given: the caller's backoff applies.
    """
    value = headers.get("retry-after-ms")
    if value is not None:
        seconds = _seconds(value)
        if seconds is not None:
            return seconds / 1000.0
    value = headers.get("retry-after")
    if value is None:
        return None
    seconds = _seconds(value)
    if seconds is not None:
        return seconds
    try:
        when = parsedate_to_datetime(value)
        if when.tzinfo is None:  # "-0000": UTC with no claim about the local zone
            when = when.replace(tzinfo=UTC)
        return max(when.timestamp() - time.time(), 0.0)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None


def _seconds(value: str) -> float | None:
    try:
        seconds = float(value)
    except ValueError:
        return None
    return seconds if 0.0 <= seconds < float("inf") else None


class APIError(Exception):
    """Base class of every error about an API call; ``.request`` is the request it was about."""

    message: str
    request: httpx.Request

    def __init__(self, message: str, *, request: httpx.Request) -> None:
        self.message = scrub(message, request.headers)
        self.request = request
        super().__init__(self.message)

    def __reduce__(self) -> tuple[Any, ...]:
        # Rebuilt from its attributes, not through __init__ (whose keyword arguments are not in
        # ``args``), so that an error pickles: Ray sends them between processes. A class made by
        # ``with_status_class`` is pickled as the two classes it joins.
        cls = type(self)
        return _unpickle, (cls.__dict__.get("_joins", cls), self.args, self.__dict__)


def _unpickle(
    cls: type[APIError] | tuple[type[GradientError], type[APIStatusError]],
    args: tuple[Any, ...],
    state: dict[str, Any],
) -> APIError:
    made = with_status_class(*cls) if isinstance(cls, tuple) else cls
    error = made.__new__(made, *args)
    error.__dict__.update(state)
    return error


class APIConnectionError(APIError):
    """No complete response arrived: the connection could not be made, or broke before the end."""


class APITimeoutError(APIConnectionError):
    """The request ran out of time (the client's ``timeout``) before the response was complete."""


class IncompleteStreamError(APIConnectionError):
    """A stream ended before its final chunk (none carried a finish reason); ``.text`` is what came."""

    def __init__(self, message: str, *, request: httpx.Request, text: str) -> None:
        super().__init__(message, request=request)
        self.text = text


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
    """Content moderation flagged the input or output; ``.samples`` (and the message) hold the texts."""

    SHOWN_SAMPLES = 5
    SHOWN_SAMPLE = 60
    """The message shows the first ``SHOWN_SAMPLES`` samples, each cut to ``SHOWN_SAMPLE`` characters."""
    raw: _FlaggedContentBody

    def __init__(
        self, message: str, *, response: httpx.Response, body: Any, type: str, raw: Any = None
    ) -> None:
        if raw is not None:
            message = f"{message} (flagged: {self._shown(_samples(raw), response.request.headers)})"
        super().__init__(message, response=response, body=body, type=type, raw=raw)

    @property
    def samples(self) -> list[str]:
        """The flagged pieces of text."""
        return _samples(self.raw)

    @classmethod
    def _shown(cls, samples: list[str], headers: Mapping[str, str]) -> str:
        shown = [repr(excerpt(sample, headers, cls.SHOWN_SAMPLE)) for sample in samples[: cls.SHOWN_SAMPLES]]
        more = len(samples) - len(shown)
        return ", ".join(shown) + (f" and {more} more" if more else "")


def _samples(raw: _FlaggedContentBody) -> list[str]:
    """The flagged texts (a sample that is not text, as a malformed body may send, is left out)."""
    return [item.sample for item in raw.payload.flagged_content if isinstance(item.sample, str)]


class PayloadValidationError(GradientError):
    """Base class of the Gradient errors that carry the service's validation error about the request."""

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


G = TypeVar("G", bound=GradientError)
_JOINED: dict[tuple[type[GradientError], type[APIStatusError]], type[GradientError]] = {}


def with_status_class(cls: type[G], status_class: type[APIStatusError]) -> type[G]:
    """``cls``, a typed Gradient error, that is also ``status_class``: the class to raise for a body of
    its ``type`` that came with a status of that class.

    Gradient's spec lets every typed body come with any 4XX status, so which status class a typed
    error belongs to is known only from its response: ``ContentFlaggedError`` answered with 400 is
    also a ``BadRequestError``, ``UnknownBaseModelError`` with 404 a ``NotFoundError``, and
    ``except`` by either catches it. The class made for each pair (once) has ``cls``'s name,
    docstring and module, so tracebacks, ``repr`` and pickles read as ``cls``.
    """
    if issubclass(cls, status_class):
        return cls
    key = (cls, status_class)
    joined = _JOINED.get(key)
    if joined is None:
        namespace = {"__module__": cls.__module__, "__qualname__": cls.__qualname__, "__doc__": cls.__doc__}
        joined = _JOINED.setdefault(key, type(cls.__name__, key, {**namespace, "_joins": key}))
    return joined  # type: ignore[return-value]


class InsecureConnectionWarning(UserWarning):
    """A client's credentials would cross the network unprotected (plain ``http://``, unverified TLS)."""
