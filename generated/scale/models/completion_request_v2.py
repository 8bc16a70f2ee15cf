from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define

from ..models.completion_request_v2_reasoning_effort import (
    CompletionRequestV2ReasoningEffort,
    check_completion_request_v2_reasoning_effort,
)
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.completion_request_v2_chat_template_kwargs import (
        CompletionRequestV2ChatTemplateKwargs,
    )
    from ..models.parameter_bindings import ParameterBindings


T = TypeVar("T", bound="CompletionRequestV2")


@_attrs_define
class CompletionRequestV2:
    """
    Attributes:
        prompt (str):
        model_request_parameters (ParameterBindings | Unset):
        temperature (float | Unset): What sampling temperature to use, between [0, 2]. Higher values like 1.8 will make
            the output more random, while lower values like 0.2 will make it more focused and deterministic. Setting
            temperature=0.0 will enable fully deterministic (greedy) sampling.NOTE: The temperature parameter range for some
            model is limited to [0, 1] if the given value is above the available range, it defaults to the max value.
            Temperature is ignored for OpenAI reasoning models. Server default: 0.2.
        stop_sequences (list[str] | Unset): List of up to 4 sequences where the API will stop generating further tokens.
            The returned text will not contain the stop sequence.
        max_tokens (int | Unset): The maximum number of tokens to generate in the completion. The token count of your
            prompt plus max_tokens cannot exceed the model's context length. If not, specified, max_tokens will be
            determined based on the model used:
            | Model API family | Model API default | EGP applied default |
            | --- | --- | --- |
            | OpenAI Completions | [`16`](https://platform.openai.com/docs/api-reference/completions/create#max_tokens) |
            `context window - prompt size` |
            | OpenAI Chat Completions | [`context window - prompt size`](https://platform.openai.com/docs/api-
            reference/chat/create#max_tokens) | `context window - prompt size` |
            | LLM Engine | [`max_new_tokens`](https://github.com/scaleapi/launch-python-
            client/blob/207adced1c88c1c2907266fa9dd1f1ff3ec0ea5b/launch/client.py#L2910) parameter is required | `100` |
            | Anthropic Claude 2 | [`max_tokens_to_sample`](https://docs.anthropic.com/claude/reference/complete_post)
            parameter is required | `10000` |
        top_p (float | Unset): The cumulative probability cutoff for token selection. Lower values mean sampling from a
            smaller, more top-weighted nucleus. Available for models provided by Google, LLM Engine, and OpenAI.
        top_k (float | Unset): Sample from the k most likely next tokens at each step. Lower k focuses on higher
            probability tokens. Available for models provided by Google and LLM Engine.
        frequency_penalty (float | Unset): Penalize tokens based on how much they have already appeared in the text.
            Positive values encourage the model to generate new tokens and negative values encourage the model to repeat
            tokens. Available for models provided by LLM Engine and OpenAI.
        presence_penalty (float | Unset): Penalize tokens based on if they have already appeared in the text. Positive
            values encourage the model to generate new tokens and negative values encourage the model to repeat tokens.
            Available for models provided by LLM Engine and OpenAI.
        stream (bool | Unset): Flag indicating whether to stream the completion response Server default: false.
        logprobs (bool | Unset): Whether to return logprobs. Currently only supported for llmengine chat models.
        top_logprobs (int | Unset): Number of top logprobs to return. Currently only supported for llmengine chat
            models.
        chat_template (str | Unset): The chat template to use for the completion. Currently only supported for llmengine
            chat models.
        chat_template_kwargs (CompletionRequestV2ChatTemplateKwargs | Unset): Additional keyword arguments for the chat
            template. Currently only supported for llmengine chat models.
        reasoning_effort (CompletionRequestV2ReasoningEffort | Unset): The reasoning effort to use for the completion.
            Currently only supported for openai models.
    """

    prompt: str
    model_request_parameters: ParameterBindings | Unset = UNSET
    temperature: float | Unset = UNSET
    stop_sequences: list[str] | Unset = UNSET
    max_tokens: int | Unset = UNSET
    top_p: float | Unset = UNSET
    top_k: float | Unset = UNSET
    frequency_penalty: float | Unset = UNSET
    presence_penalty: float | Unset = UNSET
    stream: bool | Unset = UNSET
    logprobs: bool | Unset = UNSET
    top_logprobs: int | Unset = UNSET
    chat_template: str | Unset = UNSET
    chat_template_kwargs: CompletionRequestV2ChatTemplateKwargs | Unset = UNSET
    reasoning_effort: CompletionRequestV2ReasoningEffort | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        prompt = self.prompt

        model_request_parameters: dict[str, Any] | Unset = UNSET
        if not isinstance(self.model_request_parameters, Unset):
            model_request_parameters = self.model_request_parameters.to_dict()

        temperature = self.temperature

        stop_sequences: list[str] | Unset = UNSET
        if not isinstance(self.stop_sequences, Unset):
            stop_sequences = self.stop_sequences

        max_tokens = self.max_tokens

        top_p = self.top_p

        top_k = self.top_k

        frequency_penalty = self.frequency_penalty

        presence_penalty = self.presence_penalty

        stream = self.stream

        logprobs = self.logprobs

        top_logprobs = self.top_logprobs

        chat_template = self.chat_template

        chat_template_kwargs: dict[str, Any] | Unset = UNSET
        if not isinstance(self.chat_template_kwargs, Unset):
            chat_template_kwargs = self.chat_template_kwargs.to_dict()

        reasoning_effort: str | Unset = UNSET
        if not isinstance(self.reasoning_effort, Unset):
            reasoning_effort = self.reasoning_effort

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "prompt": prompt,
            }
        )
        if model_request_parameters is not UNSET:
            field_dict["model_request_parameters"] = model_request_parameters
        if temperature is not UNSET:
            field_dict["temperature"] = temperature
        if stop_sequences is not UNSET:
            field_dict["stop_sequences"] = stop_sequences
        if max_tokens is not UNSET:
            field_dict["max_tokens"] = max_tokens
        if top_p is not UNSET:
            field_dict["top_p"] = top_p
        if top_k is not UNSET:
            field_dict["top_k"] = top_k
        if frequency_penalty is not UNSET:
            field_dict["frequency_penalty"] = frequency_penalty
        if presence_penalty is not UNSET:
            field_dict["presence_penalty"] = presence_penalty
        if stream is not UNSET:
            field_dict["stream"] = stream
        if logprobs is not UNSET:
            field_dict["logprobs"] = logprobs
        if top_logprobs is not UNSET:
            field_dict["top_logprobs"] = top_logprobs
        if chat_template is not UNSET:
            field_dict["chat_template"] = chat_template
        if chat_template_kwargs is not UNSET:
            field_dict["chat_template_kwargs"] = chat_template_kwargs
        if reasoning_effort is not UNSET:
            field_dict["reasoning_effort"] = reasoning_effort

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.completion_request_v2_chat_template_kwargs import (
            CompletionRequestV2ChatTemplateKwargs,
        )
        from ..models.parameter_bindings import ParameterBindings

        d = dict(src_dict)
        prompt = d.pop("prompt")

        _model_request_parameters = d.pop("model_request_parameters", UNSET)
        model_request_parameters: ParameterBindings | Unset
        if isinstance(_model_request_parameters, Unset):
            model_request_parameters = UNSET
        else:
            model_request_parameters = ParameterBindings.from_dict(
                _model_request_parameters
            )

        temperature = d.pop("temperature", UNSET)

        stop_sequences = cast(list[str], d.pop("stop_sequences", UNSET))

        max_tokens = d.pop("max_tokens", UNSET)

        top_p = d.pop("top_p", UNSET)

        top_k = d.pop("top_k", UNSET)

        frequency_penalty = d.pop("frequency_penalty", UNSET)

        presence_penalty = d.pop("presence_penalty", UNSET)

        stream = d.pop("stream", UNSET)

        logprobs = d.pop("logprobs", UNSET)

        top_logprobs = d.pop("top_logprobs", UNSET)

        chat_template = d.pop("chat_template", UNSET)

        _chat_template_kwargs = d.pop("chat_template_kwargs", UNSET)
        chat_template_kwargs: CompletionRequestV2ChatTemplateKwargs | Unset
        if isinstance(_chat_template_kwargs, Unset):
            chat_template_kwargs = UNSET
        else:
            chat_template_kwargs = CompletionRequestV2ChatTemplateKwargs.from_dict(
                _chat_template_kwargs
            )

        _reasoning_effort = d.pop("reasoning_effort", UNSET)
        reasoning_effort: CompletionRequestV2ReasoningEffort | Unset
        if isinstance(_reasoning_effort, Unset):
            reasoning_effort = UNSET
        else:
            reasoning_effort = check_completion_request_v2_reasoning_effort(
                _reasoning_effort
            )

        completion_request_v2 = cls(
            prompt=prompt,
            model_request_parameters=model_request_parameters,
            temperature=temperature,
            stop_sequences=stop_sequences,
            max_tokens=max_tokens,
            top_p=top_p,
            top_k=top_k,
            frequency_penalty=frequency_penalty,
            presence_penalty=presence_penalty,
            stream=stream,
            logprobs=logprobs,
            top_logprobs=top_logprobs,
            chat_template=chat_template,
            chat_template_kwargs=chat_template_kwargs,
            reasoning_effort=reasoning_effort,
        )

        return completion_request_v2
