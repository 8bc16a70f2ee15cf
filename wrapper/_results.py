"""What a completion call returns, the same for both providers: ``Completion`` and ``CompletionChunk``."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import attrs

if TYPE_CHECKING:
    from generated.gradient.models import CompleteModelSuccess
    from generated.scale.models import CompletionResponse

__all__ = ["Completion", "CompletionChunk", "Deferred", "TokenLogprob", "whole"]

M = TypeVar("M")


class Deferred(Generic[M]):
    """A generated model not built yet: ``from_dict(data)``, run the first time ``raw`` is read.

    Building it costs more than the rest of a result; a stream of thousands of chunks rarely reads it.
    """

    __slots__ = ("data", "from_dict")

    def __init__(self, from_dict: Callable[[Mapping[str, Any]], M], data: Mapping[str, Any]) -> None:
        self.from_dict = from_dict
        self.data = data


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
    parsed from the response (or stream event), built the first time it is read.
    """

    text: str
    finish_reason: str | None
    prompt_tokens: int | None
    response_tokens: int | None
    logprobs: tuple[TokenLogprob, ...] | None
    _raw: CompletionResponse | CompleteModelSuccess | Deferred[CompletionResponse] = attrs.field(
        eq=False, repr=False, alias="raw"
    )

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
    )
