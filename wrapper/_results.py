"""What a completion call returns, the same for both providers: ``Completion`` and ``CompletionChunk``."""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

if TYPE_CHECKING:
    from generated.gradient.models import CompleteModelSuccess
    from generated.scale.models import CompletionResponse

__all__ = ["Completion", "CompletionChunk", "TokenLogprob", "whole"]


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
    parsed from the response (or stream event).
    """

    text: str
    finish_reason: str | None
    prompt_tokens: int | None
    response_tokens: int | None
    logprobs: tuple[TokenLogprob, ...] | None
    raw: CompletionResponse | CompleteModelSuccess = attrs.field(eq=False, repr=False)


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
        raw=completion.raw,
    )
