"""Request options: what a client's constructor, ``with_options(...)`` and each call take, innermost
winning, and every default a client starts from.

``Options`` travels as one value from the call to the transport: each attempt's timeouts, the
retries, the deadline of the whole call, a stream's idle timeout, extra headers, query parameters
and body fields merged into the request (``extra_body``: the way to send a field the vendor shipped
before the next ``make regen``), the call's hooks (``wrapper.CallHooks``) and its response cache
(``cache``, read and written by ``wrapper.cache``'s hooks). ``Options.split`` is
the one place a call's keyword arguments are split into the request's parameters and its options,
merged over a client's and checked. ``RequestOptions`` is their keyword form, for typing;
``ClientOptions`` what the clients' constructors take besides credentials; ``RetryPolicy`` the value
of the ``retry`` option (what ``retries`` decides by).
For every option that adds something (``extra_*``, ``hooks``) or replaces a policy (``retry``), None
means none: nothing is added or replaced.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import math
import os
import random
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeAlias, TypedDict, TypeVar, cast

import httpx

from wrapper._generated.exceptions import APIConnectionError, APIStatusError

from .headers import checked_headers
from .hooks import HookFactory
from .transports.library import classes

if TYPE_CHECKING:
    import httpx2

__all__ = [
    "DEFAULT_LIMITS",
    "DEFAULT_MAX_RETRIES",
    "DEFAULT_STATUSES",
    "DEFAULT_TIMEOUT",
    "NAMES",
    "ClientOptions",
    "Options",
    "RequestOptions",
    "RetryPolicy",
    "StoreLike",
    "Timeout",
    "checked_limits",
    "constructor_signature",
]

Timeout: TypeAlias = "float | httpx.Timeout | httpx2.Timeout | None"
"""Each attempt's timeouts: seconds (None: no limit), or an ``httpx.Timeout`` (an ``httpx2.Timeout``)."""
H = TypeVar("H")
Query = Mapping[str, str | int | float | bool]

DEFAULT_TIMEOUT = httpx.Timeout(600.0, connect=5.0)
"""Completions can take minutes; connecting should not."""
DEFAULT_MAX_RETRIES = 2
DEFAULT_STATUSES = frozenset({408, 409, 429, *range(500, 600)})
"""Request timeout, conflict, too many requests, and every server error."""
DEFAULT_LIMITS = httpx.Limits(max_connections=None, max_keepalive_connections=1000, keepalive_expiry=5.0)
"""No cap on connections (``concurrency=N`` is N in flight; no thread waits for a pool slot), and
up to 1000 idle ones kept for the next requests of a large batch."""


def _statuses(value: Collection[int]) -> frozenset[int]:
    if isinstance(value, str | bytes) or not isinstance(value, Collection):
        raise ValueError(f"retry: statuses must be a collection of HTTP status codes; got {value!r}")
    for status in value:
        if isinstance(status, bool) or not isinstance(status, int) or not 100 <= status <= 599:
            raise ValueError(f"retry: statuses must be HTTP status codes (100-599); got {status!r}")
    return frozenset(value)


@dataclasses.dataclass(frozen=True, repr=False)
class RetryPolicy:
    """Which failures are retried and how long to wait: ``retry=RetryPolicy(...)`` on a client or a call.

    The defaults are the clients' behaviour when no policy is given. The wait is the server's
    ``retry-after-ms`` / ``Retry-After`` when it gives one (up to ``max_retry_after`` seconds),
    otherwise exponential backoff from ``initial_backoff`` up to ``max_backoff`` seconds, with up to
    ``jitter`` of it taken off at random so that clients that failed together do not retry together.
    A response's ``x-should-retry: true`` or ``false`` overrides the status rule, as the vendors' own
    SDKs do. How many times is ``max_retries``, a separate option.
    """

    statuses: Collection[int] = DEFAULT_STATUSES
    """Statuses that are retried (``x-should-retry`` from the server overrides this)."""
    initial_backoff: float = 0.5
    """Seconds before the first retry, doubled for each one after it."""
    max_backoff: float = 8.0
    """The longest backoff."""
    jitter: float = 0.25
    """The largest share of a backoff taken off at random (0: none, 1: up to all of it)."""
    max_retry_after: float = 60.0
    """The longest ``Retry-After`` honoured: a longer one is cut to this."""
    connection_errors: bool = True
    """Whether connection errors and timeouts are retried."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "statuses", _statuses(self.statuses))
        for name in ("initial_backoff", "max_backoff", "max_retry_after"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < math.inf:
                raise ValueError(f"retry: {name} must be a number of seconds >= 0; got {value!r}")
        if self.max_backoff < self.initial_backoff:
            raise ValueError(
                f"retry: max_backoff ({self.max_backoff!r}) must not be below initial_backoff "
                f"({self.initial_backoff!r})"
            )
        if (
            isinstance(self.jitter, bool)
            or not isinstance(self.jitter, int | float)
            or not 0 <= self.jitter <= 1
        ):
            raise ValueError(f"retry: jitter must be a number from 0 to 1; got {self.jitter!r}")
        if not isinstance(self.connection_errors, bool):
            raise ValueError(
                f"retry: connection_errors must be True or False; got {self.connection_errors!r}"
            )

    def __repr__(self) -> str:
        statuses = "DEFAULT_STATUSES" if self.statuses == DEFAULT_STATUSES else repr(sorted(self.statuses))
        return (
            f"RetryPolicy(statuses={statuses}, initial_backoff={self.initial_backoff!r}, "
            f"max_backoff={self.max_backoff!r}, jitter={self.jitter!r}, "
            f"max_retry_after={self.max_retry_after!r}, connection_errors={self.connection_errors!r})"
        )

    def retries(self, error: BaseException) -> bool:
        """Whether ``error`` is worth another attempt: the server's ``x-should-retry`` first, then the
        statuses, and connection errors and timeouts as ``connection_errors`` says."""
        if isinstance(error, APIConnectionError):
            return self.connection_errors
        if isinstance(error, APIStatusError):
            should: str = error.response.headers.get("x-should-retry", "").strip().lower()
            if should in ("true", "false"):
                return should == "true"
            return error.status_code in self.statuses
        return False

    def retry_after(self, error: BaseException) -> float | None:
        """The seconds the server asked ``error``'s caller to wait (``retry-after-ms``, ``Retry-After``),
        cut to ``max_retry_after``; None when it asked none. What a retry waits, and a pacer's pause."""
        after = error.retry_after if isinstance(error, APIStatusError) else None
        return None if after is None else min(max(after, 0.0), self.max_retry_after)

    def backoff(self, retries: int, retry_after: float | None) -> float:
        """Seconds before retry ``retries + 1``: the server's ``retry_after`` if given, else the backoff."""
        if retry_after is not None:
            return min(max(retry_after, 0.0), self.max_retry_after)
        backoff = min(self.initial_backoff * 2.0**retries, self.max_backoff)
        return backoff * (1.0 - self.jitter * random.random())


class StoreLike(Protocol):
    """What the ``cache`` option takes besides a path or URL: a store (``wrapper.cache.Store``)."""

    def load(self, key: str) -> bytes | None: ...

    def save(self, key: str, value: bytes) -> None: ...


class _Policy(TypedDict, total=False):
    """The options a client's constructor, ``with_options`` and each call all take."""

    timeout: Timeout
    """Each attempt's timeouts: seconds (None: no limit) or an ``httpx.Timeout`` (default: 600 s, and
    5 s to connect)."""
    max_retries: int
    """How many times a failed attempt is retried (0: never; default: 2)."""
    retry: RetryPolicy | None
    """Which failures are retried and how long to wait first (None: the policy in force, at first
    ``RetryPolicy()``)."""
    deadline: float | None
    """Seconds for the whole call, every attempt and wait included (None: no deadline, the default)."""
    stream_idle_timeout: float | None
    """The longest wait for a stream's next piece once its response has begun (None: the read timeout)."""
    hooks: Sequence[HookFactory] | None
    """Hook factories added to the client's, each called once per call (``wrapper.CallHooks``)."""
    cache: str | os.PathLike[str] | StoreLike | None
    """A response cache (``wrapper.cache``): an SQLite file's path, a ``redis://`` URL or a store (None:
    none, the default; on a call, none for that call)."""
    cache_read: bool
    """Whether a call may be answered from the cache (False: refresh, its answer replaces the entry)."""
    cache_write: bool
    """Whether a call's answer is stored in the cache."""
    cache_sample: int
    """Which sample of a request that samples the call is, in the cache's key (default 0: ``complete_many``
    numbers identical prompts itself, so that n of them are n samples)."""


class RequestOptions(_Policy, total=False):
    """The options each call and ``with_options`` take (a client's constructor: all but ``extra_*``)."""

    extra_headers: Mapping[str, str] | None
    """Headers added to the request (they win over the client's, never over its credentials)."""
    extra_query: Query | None
    """Query parameters added to the URL."""
    extra_body: Mapping[str, object] | None
    """Fields merged into the JSON body, over the ones the keyword arguments set."""


class ClientOptions(_Policy, Generic[H], total=False):
    """What the clients of every API take besides their credentials: ``Scale(api_key=..., **options)``;
    ``H`` is the client's kind of ``http_client`` (``httpx.Client | httpx2.Client``; an async client's
    ``httpx.AsyncClient | httpx2.AsyncClient``).

    Left out, ``base_url`` comes from the API's environment variable, else its default.
    """

    base_url: str | None
    """The URL the endpoint paths are appended to."""
    limits: httpx.Limits | httpx2.Limits | None
    """The connection pool's size (default: no cap on connections, 1000 kept alive for 5 s)."""
    default_headers: Mapping[str, str] | None
    """Headers sent on every request."""
    http_client: H | None
    """The pool to send with instead of the client's own (a proxy's, custom TLS): closed on ``close()``."""


NAMES = frozenset(RequestOptions.__annotations__)
"""The request options' names."""
CLIENT_NAMES = frozenset(ClientOptions.__annotations__)
"""What a client's constructor takes besides its credentials."""


def _positive(value: object) -> bool:
    return not isinstance(value, bool) and isinstance(value, int | float) and 0 < value <= math.inf


def checked_timeout(timeout: object) -> httpx.Timeout:
    """``timeout`` as an ``httpx.Timeout``; ``ValueError`` unless None, a number > 0 or an httpx.Timeout
    (or an httpx2.Timeout, taken as the same)."""
    if isinstance(timeout, classes("Timeout")):
        phases = timeout.as_dict()
        for name, value in phases.items():
            if value is not None and not _positive(value):
                raise ValueError(
                    f"timeout: httpx.Timeout's {name} must be None or a number > 0; got {value!r}"
                )
        return timeout if isinstance(timeout, httpx.Timeout) else httpx.Timeout(**phases)
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


def _policy(value: object) -> RetryPolicy | None:
    if value is not None and not isinstance(value, RetryPolicy):
        raise ValueError(f"retry must be a wrapper.RetryPolicy (or None: the policy in force); got {value!r}")
    return value


def _query(value: object) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(isinstance(key, str) for key in value):
        raise ValueError(f"extra_query must be a mapping with string keys; got {value!r}")
    for key, item in value.items():
        if not isinstance(item, str | int | float | bool):
            raise ValueError(f"extra_query[{key!r}] must be a string, number or boolean; got {item!r}")
    return dict(value)


def _body(value: object) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(isinstance(key, str) for key in value):
        raise ValueError(f"extra_body must be a mapping with string keys; got {value!r}")
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"extra_body must hold only values JSON can encode ({exc})") from None
    return dict(value)


def _hooks(value: object) -> tuple[HookFactory, ...]:
    if value is None:
        return ()
    if isinstance(value, str | bytes) or not isinstance(value, Sequence) or not all(map(callable, value)):
        raise ValueError(
            f"hooks must be a sequence of hook factories (a CallHooks subclass, say); got {value!r}"
        )
    return tuple(value)


def _cache(value: object) -> object:
    if value is None or (isinstance(value, str | os.PathLike) and str(value)):
        return value
    if callable(getattr(value, "load", None)) and callable(getattr(value, "save", None)):
        return value  # a store (wrapper.cache.Store, or one of its kind)
    raise ValueError(  # the value is not shown: a Redis URL may hold a password
        "cache must be a string or a path (an SQLite file's path, a redis:// URL) or a store from "
        f"wrapper.cache; got {type(value).__name__}"
    )


def _flag(name: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be True or False; got {value!r}")
    return value


def _sample(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"cache_sample must be an integer >= 0; got {value!r}")
    return value


def _headers(value: object) -> dict[str, str]:
    if value is None:
        return {}
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
    "hooks": _hooks,
    "cache": _cache,
    "cache_read": lambda value: _flag("cache_read", value),
    "cache_write": lambda value: _flag("cache_write", value),
    "cache_sample": _sample,
}
_MERGED = ("extra_headers", "extra_query", "extra_body")


@dataclasses.dataclass(frozen=True)
class Options:
    """The options in force for a call (a client's, with ``with_options`` and the call's on top)."""

    timeout: httpx.Timeout = dataclasses.field(default_factory=lambda: DEFAULT_TIMEOUT)
    max_retries: int = DEFAULT_MAX_RETRIES
    retry: RetryPolicy = dataclasses.field(default_factory=RetryPolicy)
    deadline: float | None = None
    stream_idle_timeout: float | None = None
    extra_headers: Mapping[str, str] = dataclasses.field(default_factory=dict)
    extra_query: Query = dataclasses.field(default_factory=dict)
    extra_body: Mapping[str, object] = dataclasses.field(default_factory=dict)
    hooks: tuple[HookFactory, ...] = ()
    cache: object = None
    cache_read: bool = True
    cache_write: bool = True
    cache_sample: int = 0

    def merged(self, given: Mapping[str, Any]) -> Options:
        """These options with ``given`` on top, each checked (``ValueError`` naming it); ``extra_*`` merge
        key by key and ``hooks`` add to these. An unknown name is a ``TypeError`` listing the options, as
        Python's for a function's unexpected keyword (and as a call's unknown keyword is)."""
        if not given:
            return self
        changes: dict[str, Any] = {}
        for name, value in given.items():
            check = _CHECKS.get(name)
            if check is None:
                raise TypeError(f"unknown option {name!r}; the options are {', '.join(sorted(NAMES))}")
            value = check(value)
            if name in _MERGED:
                value = {**cast(Mapping[str, Any], getattr(self, name)), **value}
            elif name == "hooks":
                value = self.hooks + value
            elif value is None and name == "retry":
                continue
            changes[name] = value
        return dataclasses.replace(self, **changes)

    def split(self, kwargs: Mapping[str, Any]) -> tuple[dict[str, Any], Options]:
        """A call's keyword arguments as the request's parameters and the options in force for it: these
        with the call's request options on top (``merged``: each checked, ``ValueError`` naming it). The
        parameters are the API's to check (``TypeError`` for a keyword it does not have)."""
        if NAMES.isdisjoint(kwargs):
            return dict(kwargs), self
        params = {name: value for name, value in kwargs.items() if name not in NAMES}
        return params, self.merged({name: value for name, value in kwargs.items() if name in NAMES})


def constructor_signature(credentials: Iterable[str], http_client: str) -> inspect.Signature:
    """The signature a client class shows (``help``, ``inspect``): its API's ``credentials`` and the
    ``ClientOptions`` (``http_client`` of the type named), each with its type and default, keyword-only."""
    defaults = Options()
    annotations: dict[str, Any] = {name: "str | None" for name in credentials}
    for name, annotation in ClientOptions.__annotations__.items():
        annotations[name] = getattr(annotation, "__forward_arg__", annotation)
    annotations["http_client"] = f"{http_client} | None"
    return inspect.Signature(
        [
            inspect.Parameter(
                name, inspect.Parameter.KEYWORD_ONLY, default=getattr(defaults, name, None), annotation=kind
            )
            for name, kind in annotations.items()
        ],
        return_annotation="None",
    )


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
