"""The keyword arguments of scale's ``create_completion``: ``ScaleParams``, their rules.

Written by scripts/regen.py from specs/scale.yaml and scripts/overrides.py; never edited by hand.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal, Required, TypedDict

__all__ = ["KEYWORDS", "PROMPT", "ScaleParams"]


class ModelRequestParameters(TypedDict, total=False):
    """The ``ModelRequestParameters`` object of the spec."""

    bindings: Required[Mapping[str, str | int | float | bool]]


class ScaleParams(TypedDict, total=False):
    """The optional fields of ``create_completion``'s request body, as snake_case keyword arguments.

    ``None`` means "not given": only the fields given are sent.

    Keyword arguments:

    - ``chat_template`` (``str``): The chat template to use for the completion. Currently only supported for
      llmengine chat models.
    - ``chat_template_kwargs`` (``Mapping[str, object]``): Additional keyword arguments for the chat
      template. Currently only supported for llmengine chat models.
    - ``frequency_penalty`` (``float``): Penalize tokens based on how much they have already appeared in the
      text. Positive values encourage the model to generate new tokens and negative values encourage the
      model to repeat tokens. Available for models provided by LLM Engine and OpenAI.
    - ``logprobs`` (``bool``): Whether to return logprobs. Currently only supported for llmengine chat
      models.
    - ``max_tokens`` (``int``): The maximum number of tokens to generate in the completion. The token count
      of your prompt plus max_tokens cannot exceed the model's context length. If not, specified, max_tokens
      will be determined based on the model used:

        | Model API family | Model API default | EGP applied default |
        | --- | --- | --- |
        | OpenAI Completions | [`16`](https://platform.openai.com/docs/api-reference/completions/create#max_tokens) | `context window - prompt size` |
        | OpenAI Chat Completions | [`context window - prompt size`](https://platform.openai.com/docs/api-reference/chat/create#max_tokens) | `context window - prompt size` |
        | LLM Engine | [`max_new_tokens`](https://github.com/scaleapi/launch-python-client/blob/207adced1c88c1c2907266fa9dd1f1ff3ec0ea5b/launch/client.py#L2910) parameter is required | `100` |
        | Anthropic Claude 2 | [`max_tokens_to_sample`](https://docs.anthropic.com/claude/reference/complete_post) parameter is required | `10000` |

    - ``model_request_parameters`` (``ModelRequestParameters``)
    - ``presence_penalty`` (``float``): Penalize tokens based on if they have already appeared in the text.
      Positive values encourage the model to generate new tokens and negative values encourage the model to
      repeat tokens. Available for models provided by LLM Engine and OpenAI.
    - ``reasoning_effort`` (``Literal['low', 'medium', 'high']``): The reasoning effort to use for the
      completion. Currently only supported for openai models.
    - ``stop_sequences`` (``Sequence[str]``): At most 4 items. List of up to 4 sequences where the API will
      stop generating further tokens. The returned text will not contain the stop sequence.
    - ``temperature`` (``float``): 0 <= temperature <= 2. What sampling temperature to use, between [0, 2].
      Higher values like 1.8 will make the output more random, while lower values like 0.2 will make it more
      focused and deterministic. Setting temperature=0.0 will enable fully deterministic (greedy)
      sampling.NOTE: The temperature parameter range for some model is limited to [0, 1] if the given value
      is above the available range, it defaults to the max value. Temperature is ignored for OpenAI
      reasoning models. Server default: 0.2.
    - ``top_k`` (``float``): Sample from the k most likely next tokens at each step. Lower k focuses on
      higher probability tokens. Available for models provided by Google and LLM Engine.
    - ``top_logprobs`` (``int``): Number of top logprobs to return. Currently only supported for llmengine
      chat models.
    - ``top_p`` (``float``): The cumulative probability cutoff for token selection. Lower values mean
      sampling from a smaller, more top-weighted nucleus. Available for models provided by Google, LLM
      Engine, and OpenAI.
    """

    chat_template: str | None
    """The chat template to use for the completion. Currently only supported for llmengine chat models."""

    chat_template_kwargs: Mapping[str, object] | None
    """Additional keyword arguments for the chat template. Currently only supported for llmengine chat models."""

    frequency_penalty: float | None
    """Penalize tokens based on how much they have already appeared in the text. Positive values encourage the model to generate new tokens and negative values encourage the model to repeat tokens. Available for models provided by LLM Engine and OpenAI."""

    logprobs: bool | None
    """Whether to return logprobs. Currently only supported for llmengine chat models."""

    max_tokens: int | None
    """The maximum number of tokens to generate in the completion. The token count of your prompt plus max_tokens cannot exceed the model's context length. If not, specified, max_tokens will be determined based on the model used:

| Model API family | Model API default | EGP applied default |
| --- | --- | --- |
| OpenAI Completions | [`16`](https://platform.openai.com/docs/api-reference/completions/create#max_tokens) | `context window - prompt size` |
| OpenAI Chat Completions | [`context window - prompt size`](https://platform.openai.com/docs/api-reference/chat/create#max_tokens) | `context window - prompt size` |
| LLM Engine | [`max_new_tokens`](https://github.com/scaleapi/launch-python-client/blob/207adced1c88c1c2907266fa9dd1f1ff3ec0ea5b/launch/client.py#L2910) parameter is required | `100` |
| Anthropic Claude 2 | [`max_tokens_to_sample`](https://docs.anthropic.com/claude/reference/complete_post) parameter is required | `10000` |"""

    model_request_parameters: ModelRequestParameters | None

    presence_penalty: float | None
    """Penalize tokens based on if they have already appeared in the text. Positive values encourage the model to generate new tokens and negative values encourage the model to repeat tokens. Available for models provided by LLM Engine and OpenAI."""

    reasoning_effort: Literal["low", "medium", "high"] | None
    """The reasoning effort to use for the completion. Currently only supported for openai models."""

    stop_sequences: Sequence[str] | None
    """List of up to 4 sequences where the API will stop generating further tokens. The returned text will not contain the stop sequence."""

    temperature: float | None
    """What sampling temperature to use, between [0, 2]. Higher values like 1.8 will make the output more random, while lower values like 0.2 will make it more focused and deterministic. Setting temperature=0.0 will enable fully deterministic (greedy) sampling.NOTE: The temperature parameter range for some model is limited to [0, 1] if the given value is above the available range, it defaults to the max value. Temperature is ignored for OpenAI reasoning models. Server default: 0.2."""

    top_k: float | None
    """Sample from the k most likely next tokens at each step. Lower k focuses on higher probability tokens. Available for models provided by Google and LLM Engine."""

    top_logprobs: int | None
    """Number of top logprobs to return. Currently only supported for llmengine chat models."""

    top_p: float | None
    """The cumulative probability cutoff for token selection. Lower values mean sampling from a smaller, more top-weighted nucleus. Available for models provided by Google, LLM Engine, and OpenAI."""


# The body field of the positional prompt, with its constraints.
PROMPT: dict[str, Any] = {"wire": "prompt", "schema": {"type": "string"}}

# Per keyword argument: its body field, the constraints of its value, and how it is reshaped.
KEYWORDS: dict[str, dict[str, Any]] = {
    "chat_template": {
        "wire": "chat_template",
        "schema": {"type": "string"},
        "reshape": None,
    },
    "chat_template_kwargs": {
        "wire": "chat_template_kwargs",
        "schema": {"type": "object", "additionalProperties": True},
        "reshape": None,
    },
    "frequency_penalty": {
        "wire": "frequency_penalty",
        "schema": {"type": "number"},
        "reshape": None,
    },
    "logprobs": {"wire": "logprobs", "schema": {"type": "boolean"}, "reshape": None},
    "max_tokens": {
        "wire": "max_tokens",
        "schema": {"type": "integer"},
        "reshape": None,
    },
    "model_request_parameters": {
        "wire": "model_request_parameters",
        "schema": {
            "type": "object",
            "properties": {
                "bindings": {
                    "type": "object",
                    "additionalProperties": {
                        "anyOf": [
                            {"type": "string"},
                            {"type": "integer"},
                            {"type": "number"},
                            {"type": "boolean"},
                        ]
                    },
                }
            },
            "required": ["bindings"],
            "additionalProperties": False,
        },
        "reshape": None,
    },
    "presence_penalty": {
        "wire": "presence_penalty",
        "schema": {"type": "number"},
        "reshape": None,
    },
    "reasoning_effort": {
        "wire": "reasoning_effort",
        "schema": {"type": "string", "enum": ["low", "medium", "high"]},
        "reshape": None,
    },
    "stop_sequences": {
        "wire": "stop_sequences",
        "schema": {"type": "array", "maxItems": 4, "items": {"type": "string"}},
        "reshape": None,
    },
    "temperature": {
        "wire": "temperature",
        "schema": {"type": "number", "minimum": 0, "maximum": 2, "default": 0.2},
        "reshape": None,
    },
    "top_k": {"wire": "top_k", "schema": {"type": "number"}, "reshape": None},
    "top_logprobs": {
        "wire": "top_logprobs",
        "schema": {"type": "integer"},
        "reshape": None,
    },
    "top_p": {"wire": "top_p", "schema": {"type": "number"}, "reshape": None},
}
