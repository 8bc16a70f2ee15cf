"""Request options: what a client's constructor, ``with_options(...)`` and each call take, innermost winning.

``Options`` travels as one value from the call to the transport: each attempt's timeouts, the
retries, the deadline of the whole call, a stream's idle timeout, and extra headers, query
parameters and body fields merged into the request (``extra_body``: the way to send a field the
vendor shipped before the next ``make regen``). ``RequestOptions`` is its keyword form, for typing.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable, Mapping
from typing import Any, TypedDict, cast

import httpx

from wrapper._core.transports.network import checked_headers

from .retry_policy import RetryPolicy

__all__ = ["NAMES", "Options", "RequestOptions", "Timeout", "split"]

Timeout = float | httpx.Timeout | None
Query = Mapping[str, str | int | float | bool]


class RequestOptions(TypedDict, total=False):
    """The options each call and ``with_options`` take (a client's constructor: all but ``extra_*``)."""

    timeout: Timeout
    """Each attempt's timeouts: seconds (None: no limit) or an ``httpx.Timeout``."""
    max_retries: int
    """How many times a failed attempt is retried (0: never)."""
    retry: RetryPolicy
    """Which failures are retried and how long to wait first."""
    deadline: float | None
    """Seconds for the whole call, every attempt and wait included (None: no deadline)."""
    stream_idle_timeout: float | None
    """The longest wait for a stream's next piece once its response has begun (None: the read timeout)."""
    extra_headers: Mapping[str, str]
    """Headers added to the request (they win over the client's, never over its credentials)."""
    extra_query: Query
    """Query parameters added to the URL."""
    extra_body: Mapping[str, object]
    """Fields merged into the JSON body, over the ones the keyword arguments set."""


NAMES = frozenset(RequestOptions.__annotations__)


def _positive(value: object) -> bool:
    return not isinstance(value, bool) and isinstance(value, int | float) and 0 < value <= math.inf


def checked_timeout(timeout: object) -> httpx.Timeout:
    """``timeout`` as an ``httpx.Timeout``; ``ValueError`` unless None, a number > 0 or an httpx.Timeout."""
    if isinstance(timeout, httpx.Timeout):
        for name, value in timeout.as_dict().items():
            if value is not None and not _positive(value):
                raise ValueError(
                    f"timeout: httpx.Timeout's {name} must be None or a number > 0; got {value!r}"
                )
        return timeout
    if timeout is not None and not _positive(timeout):
        raise ValueError(
            f"timeout must be None (no limit), a number of seconds > 0 or an httpx.Timeout; got {timeout!r}"
        )
    return httpx.Timeout(timeout)  # type: ignore[arg-type]


def _retries(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"max_retries must be an integer >= 0; got {value!r}")
    return value


def _seconds_or_none(name: str, value: object) -> float | None:
    if value is not None and not _positive(value):
        raise ValueError(f"{name} must be None or a number of seconds > 0; got {value!r}")
    return None if value is None else float(value)  # type: ignore[arg-type]


def _policy(value: object) -> RetryPolicy:
    if not isinstance(value, RetryPolicy):
        raise ValueError(f"retry must be a wrapper.RetryPolicy; got {value!r}")
    return value


def _query(value: object) -> dict[str, Any]:
    if not isinstance(value, Mapping) or not all(isinstance(key, str) for key in value):
        raise ValueError(f"extra_query must be a mapping with string keys; got {value!r}")
    for key, item in value.items():
        if not isinstance(item, str | int | float | bool):
            raise ValueError(f"extra_query[{key!r}] must be a string, number or boolean; got {item!r}")
    return dict(value)


def _body(value: object) -> dict[str, Any]:
    if not isinstance(value, Mapping) or not all(isinstance(key, str) for key in value):
        raise ValueError(f"extra_body must be a mapping with string keys; got {value!r}")
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"extra_body must hold only values JSON can encode ({exc})") from None
    return dict(value)


def _headers(value: object) -> dict[str, str]:
    if not isinstance(value, Mapping):
        raise ValueError(f"extra_headers must be a mapping of header names to values; got {value!r}")
    return checked_headers(value, "extra_headers")


_CHECKS: dict[str, Callable[[Any], Any]] = {
    "timeout": checked_timeout,
    "max_retries": _retries,
    "retry": _policy,
    "deadline": lambda value: _seconds_or_none("deadline", value),
    "stream_idle_timeout": lambda value: _seconds_or_none("stream_idle_timeout", value),
    "extra_headers": _headers,
    "extra_query": _query,
    "extra_body": _body,
}
_MERGED = ("extra_headers", "extra_query", "extra_body")


@dataclasses.dataclass(frozen=True)
class Options:
    """The options in force for a call (a client's, with ``with_options`` and the call's on top)."""

    timeout: httpx.Timeout
    max_retries: int
    retry: RetryPolicy = dataclasses.field(default_factory=RetryPolicy)
    deadline: float | None = None
    stream_idle_timeout: float | None = None
    extra_headers: Mapping[str, str] = dataclasses.field(default_factory=dict)
    extra_query: Query = dataclasses.field(default_factory=dict)
    extra_body: Mapping[str, object] = dataclasses.field(default_factory=dict)

    def merged(self, given: Mapping[str, Any]) -> Options:
        """These options with ``given`` on top, each checked (``ValueError`` naming it); ``extra_*`` merge
        key by key. An unknown name is a ``ValueError`` listing the options."""
        if not given:
            return self
        changes: dict[str, Any] = {}
        for name, value in given.items():
            check = _CHECKS.get(name)
            if check is None:
                raise ValueError(f"unknown option {name!r}; the options are {', '.join(sorted(NAMES))}")
            value = check(value)
            changes[name] = (
                {**cast(Mapping[str, Any], getattr(self, name)), **value} if name in _MERGED else value
            )
        return dataclasses.replace(self, **changes)


def split(kwargs: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A call's keyword arguments as (the request's parameters, its options)."""
    if NAMES.isdisjoint(kwargs):
        return dict(kwargs), {}
    params = {name: value for name, value in kwargs.items() if name not in NAMES}
    return params, {name: value for name, value in kwargs.items() if name in NAMES}
