"""What a completion call returns, the same for both providers: ``Completion`` and ``CompletionChunk``."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import attrs

if TYPE_CHECKING:
    from generated.gradient.models import CompleteModelSuccess
    from generated.scale.models import CompletionResponse

__all__ = [
    "NO_HEADERS",
    "Completion",
    "CompletionChunk",
    "Deferred",
    "ResponseHeaders",
    "TokenLogprob",
    "whole",
]

M = TypeVar("M")


class Deferred(Generic[M]):
    """A generated model not built yet: ``from_dict(data)``, run the first time ``raw`` is read.

    Building it costs more than the rest of a result; a stream of thousands of chunks rarely reads it.
    """

    __slots__ = ("data", "from_dict")

    def __init__(self, from_dict: Callable[[Mapping[str, Any]], M], data: Mapping[str, Any]) -> None:
        self.from_dict = from_dict
        self.data = data


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


NO_HEADERS = ResponseHeaders(())
"""The headers of a result that came from no response (one built by hand)."""


@attrs.frozen
class TokenLogprob:
    """A generated token's log probability, and the most likely tokens at its position with theirs."""

    token: str
    logprob: float
    top_logprobs: tuple[tuple[str, float], ...]


@attrs.frozen
class _Result:
    """The fields shared by ``Completion`` and ``CompletionChunk``.

    Token counts and ``logprobs`` are None where the API does not report them (Gradient never does;
    Scale reports logprobs only when asked with ``logprobs=True``). ``raw`` is the generated model
    parsed from the response (or stream event), built the first time it is read. ``headers`` and
    ``request_id`` describe the HTTP response the result came in (a stream's chunks share theirs).
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
        if isinstance(raw, Deferred):
            raw = raw.from_dict(raw.data)
            object.__setattr__(self, "_raw", raw)  # frozen to callers; filled in once, here
        return raw


@attrs.frozen
class Completion(_Result):
    """A finished completion: the generated ``text`` and what the API said about it."""


@attrs.frozen
class CompletionChunk(_Result):
    """A piece of a streamed completion: ``text`` is the delta; the last carries finish reason and counts."""


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
    )
