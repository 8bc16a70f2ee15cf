"""``AllRoutesFailedError``: what a router raises when no route could serve a request."""

from __future__ import annotations

from collections.abc import Mapping

from wrapper.errors import APIError

__all__ = ["AllRoutesFailedError"]


class AllRoutesFailedError(APIError):
    """Every route failed a request, as many times as ``max_retries`` allows: ``errors`` holds each
    route's last answer by its name (the message says them all); ``__cause__`` is the last answer."""

    errors: Mapping[str, APIError]

    def __init__(self, errors: Mapping[str, APIError], last: APIError, attempts: int) -> None:
        answers = "; ".join(f"{name}: {type(error).__name__}: {error}" for name, error in errors.items())
        plural = "s" if attempts != 1 else ""
        super().__init__(
            f"every route failed ({attempts} attempt{plural}); each route's last answer: {answers}",
            request=last.request,
        )
        self.errors = dict(errors)
