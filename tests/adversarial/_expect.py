"""What the client contract says each answer must become: the error class per status and per Gradient type."""

from __future__ import annotations

from helpers import error_class_name, error_variants

from wrapper import errors

GRADIENT_TYPES: dict[str, type[errors.GradientError]] = {
    tag: getattr(errors, error_class_name(tag)) for tag in error_variants()
}
"""Gradient's typed 4XX bodies, by ``type``."""

STATUSES: dict[int, type[errors.APIStatusError]] = {
    400: errors.BadRequestError,
    401: errors.AuthenticationError,
    403: errors.PermissionDeniedError,
    404: errors.NotFoundError,
    408: errors.APIStatusError,
    409: errors.ConflictError,
    413: errors.APIStatusError,
    422: errors.UnprocessableEntityError,
    429: errors.RateLimitError,
    451: errors.APIStatusError,
    500: errors.InternalServerError,
    502: errors.InternalServerError,
    503: errors.InternalServerError,
    504: errors.InternalServerError,
    599: errors.InternalServerError,
}
"""The class an error status maps to when its body is not one of Gradient's typed ones."""

STATUS_FIRST = frozenset({401, 403, 408, 409, 429})
"""Statuses that tell the caller what to do (authenticate, wait, retry) whatever Gradient's body says: their
status class wins over the body's ``type``, so that ``except RateLimitError`` always works."""


def gradient_error_class(status: int, kind: str | None) -> type[errors.APIStatusError]:
    """The class of a Gradient error answer: ``status`` with a valid body of type ``kind`` (None: a
    variant without a ``type`` tag, which keeps its status's class)."""
    if status >= 500 or status in STATUS_FIRST or kind is None:
        return STATUSES[status]
    return GRADIENT_TYPES.get(kind, errors.GradientError)  # a type the spec does not name: GradientError


def is_gradient_error(exc: BaseException, status: int, kind: str | None) -> bool:
    """Whether ``exc`` is what a Gradient error answer must raise: its ``gradient_error_class`` by name and
    by ``isinstance``, and also the class of its status (a typed error is both)."""
    expected = gradient_error_class(status, kind)
    return (
        isinstance(exc, expected)
        and type(exc).__name__ == expected.__name__
        and isinstance(exc, STATUSES[status])
    )
