"""What a completion call returns, the same for both providers: ``Completion`` and ``CompletionChunk``.

Both serialise: ``to_dict()`` (plain JSON types), ``to_json()``, and back with ``from_dict()``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar

import attrs

import wrapper._generated as _generated

if TYPE_CHECKING:
    from wrapper._generated.gradient.models import CompleteModelSuccess
    from wrapper._generated.scale.models import CompletionResponse

__all__ = [
    "NO_HEADERS",
    "Completion",
    "CompletionChunk",
    "Deferred",
    "ResponseHeaders",
    "TokenLogprob",
    "completion",
    "routed",
    "stream_chunk",
    "whole",
]

M = TypeVar("M")


class ResponseHeaders(Mapping[str, str]):
    """A response's headers: read-only, case-insensitive (repeated names joined with ", ", as httpx does).

    Built from the raw ``(name, value)`` byte pairs the transport gave, and only when first read:
    most callers never look, and the fast lane should not pay for them.
    """

    __slots__ = ("_map", "_raw")

    def __init__(self, raw: Iterable[tuple[bytes, bytes]]) -> None:
        self._raw = raw
        self._map: dict[str, str] | None = None

    def _items(self) -> dict[str, str]:
        if self._map is None:
            items: dict[str, str] = {}
            for name, value in self._raw:
                key, text = _decode(name).lower(), _decode(value)
                items[key] = f"{items[key]}, {text}" if key in items else text
            self._map = items
        return self._map

    def __getitem__(self, name: str) -> str:
        return self._items()[name.lower()]

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._items()

    def __iter__(self) -> Iterator[str]:
        return iter(self._items())

    def __len__(self) -> int:
        return len(self._items())

    def __repr__(self) -> str:
        return f"ResponseHeaders({self._items()!r})"


def _decode(value: bytes) -> str:
    try:
        return value.decode("ascii")
    except UnicodeDecodeError:
        return value.decode("latin-1")


Deferred = tuple[Callable[[Mapping[str, Any]], M], Mapping[str, Any]]
"""A generated model not built yet: ``(from_dict, data)``, built the first time ``raw`` is read.

Building it costs more than the rest of a result; a stream of thousands of chunks rarely reads it.
A plain tuple: made with no call of ours, once for each chunk of a stream.
"""


NO_HEADERS = ResponseHeaders(())
"""The headers of a result that came from no response (one built by hand)."""


@attrs.frozen
class TokenLogprob:
    """A generated token's log probability, and the most likely tokens at its position with theirs."""

    token: str
    logprob: float
    top_logprobs: tuple[tuple[str, float], ...]

    def to_dict(self) -> dict[str, Any]:
        """``{"token", "logprob", "top_logprobs": [{"token", "logprob"}, ...]}``, as ``Completion.to_dict()``
        writes each of its ``logprobs``."""
        top = [{"token": token, "logprob": value} for token, value in self.top_logprobs]
        return {"token": self.token, "logprob": self.logprob, "top_logprobs": top}


@attrs.frozen
class _Result:
    """The fields shared by ``Completion`` and ``CompletionChunk``.

    Token counts and ``logprobs`` are None where the API does not report them (Gradient never does;
    Scale reports logprobs only when asked with ``logprobs=True``). ``raw`` is the generated model
    parsed from the response (or stream event), built the first time it is read. ``headers`` and
    ``request_id`` describe the HTTP response the result came in (a stream's chunks share theirs).
    ``route`` names the route that served it when a router (``wrapper.router``) sent the call, else None.
    ``cached`` is True for a result a response cache (``wrapper.cache``) gave instead of the server.
    """

    text: str
    finish_reason: str | None
    prompt_tokens: int | None
    response_tokens: int | None
    logprobs: tuple[TokenLogprob, ...] | None
    _raw: CompletionResponse | CompleteModelSuccess | Deferred[CompletionResponse] = attrs.field(
        eq=False, repr=False, alias="raw"
    )
    _headers: ResponseHeaders = attrs.field(default=NO_HEADERS, eq=False, repr=False, alias="headers")
    route: str | None = attrs.field(default=None, eq=False, repr=False, kw_only=True)
    cached: bool = attrs.field(default=False, eq=False, repr=False, kw_only=True)

    @property
    def headers(self) -> Mapping[str, str]:
        """The final response's headers: read-only, case-insensitive."""
        return self._headers

    @property
    def request_id(self) -> str | None:
        """The response's ``x-request-id`` header (quote it to the vendor's support); None when absent."""
        return self._headers.get("x-request-id")

    @property
    def raw(self) -> CompletionResponse | CompleteModelSuccess:
        """The generated model of the response (or stream event) this result was read from."""
        raw = self._raw
        if isinstance(raw, tuple):  # a Deferred
            from_dict, data = raw
            raw = from_dict(data)
            object.__setattr__(self, "_raw", raw)  # frozen to callers; filled in once, here
        return raw

    def to_dict(self) -> dict[str, Any]:
        """The result as plain JSON types, for a cache, a log line or a queue; ``from_dict`` reads it back.

        Keys: ``text``, ``finish_reason``, ``prompt_tokens``, ``response_tokens``, ``logprobs`` (None,
        or a list of ``{"token", "logprob", "top_logprobs": [{"token", "logprob"}, ...]}``),
        ``request_id``, ``route`` (the router's route that served it, or None), ``cached`` (whether a
        response cache gave it), ``raw`` (the generated
        model's own ``to_dict()``: the body as the API sent it) and ``raw_type`` (the generated class
        ``raw`` is rebuilt with, as ``generated.<api>.models.<Class>`` whichever version wrote it).
        Headers are left out: they describe one HTTP exchange (dates, cookies, rate-limit counters), not
        the result.
        """
        raw = self.raw
        return {
            "text": self.text,
            "finish_reason": self.finish_reason,
            "prompt_tokens": self.prompt_tokens,
            "response_tokens": self.response_tokens,
            "logprobs": None if self.logprobs is None else [lp.to_dict() for lp in self.logprobs],
            "request_id": self.request_id,
            "route": self.route,
            "cached": self.cached,
            "raw": raw.to_dict(),
            "raw_type": _raw_type(type(raw)),
        }

    def to_json(self, *, indent: int | None = 2) -> str:
        """``to_dict()`` as a JSON string (``indent=None``: on one line, as JSON Lines want)."""
        import json  # here, not at import: results are built far more often than serialised

        return json.dumps(self.to_dict(), indent=indent, ensure_ascii=False)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        """The result ``to_dict()`` gave (``json.loads`` of ``to_json()`` too); ``ValueError`` naming a
        field that is missing or of the wrong type.

        ``raw`` is rebuilt now by its generated class; ``headers`` hold only the ``x-request-id`` the
        dict kept. ``route`` and ``cached`` may be missing (a dict written before results had them).
        """
        where = f"{cls.__name__}.from_dict"
        if not isinstance(data, Mapping):
            raise ValueError(f"{where} needs a mapping such as to_dict() returns; got {type(data).__name__}")
        text = _field(data, "text", str, where, optional=False)
        finish_reason = _field(data, "finish_reason", str, where)
        prompt_tokens = _field(data, "prompt_tokens", int, where)
        response_tokens = _field(data, "response_tokens", int, where)
        request_id = _field(data, "request_id", str, where)
        route = _field(data, "route", str, where) if "route" in data else None
        cached = _field(data, "cached", bool, where, optional=False) if "cached" in data else False
        raw = _field(data, "raw", Mapping, where, optional=False)
        logprobs = _field(data, "logprobs", list, where)
        headers = (
            NO_HEADERS if request_id is None else ResponseHeaders(((b"x-request-id", request_id.encode()),))
        )
        return cls(
            text,
            finish_reason,
            prompt_tokens,
            response_tokens,
            None if logprobs is None else tuple(_logprob(item, where) for item in logprobs),
            raw=_raw_model(_field(data, "raw_type", str, where, optional=False), raw, where),
            headers=headers,
            route=route,
            cached=cached,
        )


_KINDS = {str: "a string", int: "an integer", bool: "true or false", list: "a list", Mapping: "a mapping"}


def _field(data: Mapping[str, Any], name: str, kind: type, where: str, *, optional: bool = True) -> Any:
    """``data[name]``, checked to be a ``kind`` (or None when ``optional``); ``ValueError`` naming it."""
    if name not in data:
        raise ValueError(f"{where}: the {name!r} key is missing")
    value = data[name]
    if value is None and optional:
        return None
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        rule = _KINDS[kind] + (" or None" if optional else "")
        raise ValueError(f"{where}: {name!r} must be {rule}; got {value!r}")
    return value


def _logprob(item: Any, where: str) -> TokenLogprob:
    """One ``logprobs`` entry of a ``to_dict()`` back as a ``TokenLogprob``."""
    rule = 'each logprobs item must be {"token": str, "logprob": number, "top_logprobs": [...]}'
    try:
        top = tuple((_token(t), _number(t["logprob"])) for t in item["top_logprobs"])
        return TokenLogprob(_token(item), _number(item["logprob"]), top)
    except (KeyError, TypeError, ValueError):
        raise ValueError(f"{where}: {rule} (top_logprobs items too); got {item!r}") from None


def _token(item: Mapping[str, Any]) -> str:
    token = item["token"]
    if not isinstance(token, str):
        raise TypeError(token)
    return token


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(value)
    return float(value)


_RAW_TYPE_ROOT = "generated"
"""The first name of a ``raw_type``: the generated tree's own (``generated/`` in the repository), not the
package it is installed in, so that a result saved by one version loads in another wherever it lives."""


def _raw_type(model: type) -> str:
    """``generated.<api>.models.<Class>``: the class by its models package (which re-exports each class),
    under the generated tree's own name."""
    package = model.__module__.rpartition(".")[0].removeprefix(_generated.__name__)
    return f"{_RAW_TYPE_ROOT}{package}.{model.__qualname__}"


def _raw_model(raw_type: str, raw: Mapping[str, Any], where: str) -> Any:
    """``raw`` parsed by the generated class named ``raw_type``, looked up in the installed generated tree
    only (never in another package, such as an application's own ``generated``)."""
    from importlib import import_module

    module, _, name = raw_type.rpartition(".")
    root, _, inside = module.partition(".")
    try:
        if root != _RAW_TYPE_ROOT or not inside:
            raise ImportError(module)
        from_dict = getattr(import_module(f"{_generated.__name__}.{inside}"), name).from_dict
    except (ImportError, AttributeError):
        raise ValueError(
            f"{where}: 'raw_type' must name a generated model class, as to_dict() writes; got {raw_type!r}"
        ) from None
    try:
        return from_dict(raw)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ValueError(f"{where}: 'raw' does not match {name} ({type(exc).__name__}: {exc})") from None


@attrs.frozen
class Completion(_Result):
    """A finished completion: the generated ``text`` and what the API said about it."""


@attrs.frozen
class CompletionChunk(_Result):
    """A piece of a streamed completion: ``text`` is the delta; the last carries finish reason and counts."""


R = TypeVar("R", Completion, CompletionChunk)

_SETTERS = tuple(getattr(_Result, field.name).__set__ for field in attrs.fields(_Result))
"""The slots of a result's fields, in order: text, ..., raw, headers, route, cached."""


def _built(cls: type[R]) -> Callable[..., R]:
    """``cls(text, finish_reason, prompt_tokens, response_tokens, logprobs, raw, headers)`` (not routed,
    not cached), made in half the time attrs' ``__init__`` takes, which sets each field of a frozen class
    through ``object.__setattr__``: a completion's, and each chunk's of a stream."""
    (text_, finish_, prompt_, response_, logprobs_, raw_, headers_, route_, cached_) = _SETTERS

    def build(
        text: str,
        finish_reason: str | None,
        prompt_tokens: int | None,
        response_tokens: int | None,
        logprobs: tuple[TokenLogprob, ...] | None,
        raw: CompletionResponse | CompleteModelSuccess | Deferred[CompletionResponse],
        headers: ResponseHeaders,
    ) -> R:
        result = object.__new__(cls)
        text_(result, text)
        finish_(result, finish_reason)
        prompt_(result, prompt_tokens)
        response_(result, response_tokens)
        logprobs_(result, logprobs)
        raw_(result, raw)
        headers_(result, headers)
        route_(result, None)
        cached_(result, False)
        return result

    return build


completion = _built(Completion)
stream_chunk = _built(CompletionChunk)


def whole(completion: Completion) -> CompletionChunk:
    """A finished completion as one chunk: the "stream" of an API that does not stream."""
    return CompletionChunk(
        completion.text,
        completion.finish_reason,
        completion.prompt_tokens,
        completion.response_tokens,
        completion.logprobs,
        raw=completion._raw,
        headers=completion._headers,
        route=completion.route,
        cached=completion.cached,
    )


def routed(result: R, route: str) -> R:
    """``result`` saying the route that served it (a routed call's)."""
    return attrs.evolve(result, route=route)
