"""LlamaIndex models over the clients: ``ScaleLLM`` and ``GradientLLM`` (llama-index-core ``CustomLLM``).

    from wrapper.llama_index import GradientLLM

    llm = GradientLLM(base_model_slug="nous-hermes2", max_tokens=64)  # GRADIENT_ACCESS_TOKEN, ...
    print(llm.complete("What is the capital of France?"))

``complete``/``stream_complete`` use the sync client, ``acomplete``/``astream_complete`` (and
``achat``/``astream_chat``) the async one; chat goes through ``messages_to_prompt``. Errors are the
clients' own (``wrapper.errors``). Needs the ``llama-index`` extra.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import aclosing, closing
from typing import TYPE_CHECKING, Any, ClassVar

try:
    from llama_index.core.base.llms.generic_utils import (
        astream_completion_response_to_chat_response,
        completion_response_to_chat_response,
    )
    from llama_index.core.base.llms.generic_utils import messages_to_prompt as generic_messages_to_prompt
    from llama_index.core.base.llms.types import (
        ChatMessage,
        ChatResponse,
        ChatResponseAsyncGen,
        CompletionResponse,
        CompletionResponseAsyncGen,
        CompletionResponseGen,
        LLMMetadata,
    )
    from llama_index.core.bridge.pydantic import Field, PrivateAttr, model_validator
    from llama_index.core.constants import DEFAULT_CONTEXT_WINDOW, DEFAULT_NUM_OUTPUTS
    from llama_index.core.llms.callbacks import llm_chat_callback, llm_completion_callback
    from llama_index.core.llms.custom import CustomLLM
except ImportError as exc:  # pragma: no cover - exercised in a subprocess without the extra
    from wrapper.extras import install_hint

    raise ImportError(
        f"wrapper.llama_index needs LlamaIndex ({exc.name} is missing): {install_hint('llama-index')}"
    ) from exc

from . import gradient, scale
from .frameworks import shared
from .gradient import AsyncGradient, Gradient
from .scale import AsyncScale, Scale

if TYPE_CHECKING:
    from wrapper import Completion, CompletionChunk

__all__ = ["GradientBaseModelLLM", "GradientLLM", "GradientModelAdapterLLM", "ScaleLLM"]

_UNKNOWN = -1
"""The cached context window of a model whose server does not say (``metadata`` then uses LlamaIndex's)."""


class _CompletionsLLM(CustomLLM):
    """The machinery both models share: parameters, clients, metadata, completions and streams."""

    max_tokens: int | None = Field(
        default=None,
        description="Tokens to generate at most (Scale's max_tokens, Gradient's max_generated_token_count).",
    )
    temperature: float | None = Field(default=None, description="Sampling temperature (None: the server's).")
    additional_kwargs: dict[str, Any] = Field(
        default_factory=dict, description="Other keyword arguments of the client's complete."
    )
    context_window: int | None = Field(
        default=None, description="The model's context in tokens (None: from the sandbox, else LlamaIndex's)."
    )
    num_output: int | None = Field(
        default=None, description="Tokens reserved for the output (None: max_tokens, else LlamaIndex's)."
    )
    is_chat_model: bool = Field(default=False, description="Whether the model is a chat model.")
    timeout: float | None = Field(default=None, description="Seconds per attempt (None: the client's).")
    max_retries: int | None = Field(
        default=None, description="Retries of a failed request (None: the client's)."
    )
    response_cache: Any = Field(
        default=None,
        description="The clients' response cache (their cache=, wrapper.cache): an SQLite file's path, a "
        "redis:// URL or a store; a hit answers with no request, and the callbacks fire as on a miss.",
    )

    _api_name: ClassVar[str]
    _clients: shared.Clients = PrivateAttr(default_factory=shared.Clients)
    _context: int | None = PrivateAttr(default=None)

    @property
    def _api(self) -> shared.Api:
        return shared.api(self._api_name)

    @property
    def _model_name(self) -> str:
        """The model (deployment) id sent in the URL."""
        raise NotImplementedError

    def _settings(self) -> dict[str, Any]:
        """The constructor arguments of this API's clients: credentials and URL, then the options."""
        raise NotImplementedError

    @property
    def _client(self) -> Scale | Gradient:
        raise NotImplementedError

    @property
    def _async_client(self) -> AsyncScale | AsyncGradient:
        raise NotImplementedError

    def close(self) -> None:
        """Close the sync client this model built (one passed as ``client`` is yours to close)."""
        self._clients.close()

    async def aclose(self) -> None:
        """Close the async client this model built (one passed as ``async_client`` is yours to close)."""
        await self._clients.aclose()

    @property
    def metadata(self) -> LLMMetadata:
        """The context window (given, else the sandbox's for its models, else LlamaIndex's default) and
        output size (``num_output``, else ``max_tokens``, else LlamaIndex's default)."""
        return LLMMetadata(
            context_window=self.context_window or self._known_context() or DEFAULT_CONTEXT_WINDOW,
            num_output=self.num_output or self.max_tokens or DEFAULT_NUM_OUTPUTS,
            is_chat_model=self.is_chat_model,
            model_name=self._model_name,
        )

    def _known_context(self) -> int | None:
        """The sandbox's context window for the model, asked once; never asked of the vendor's own URL."""
        if self._context is None:
            url, vendor = self._urls()
            found = None if url == vendor else shared.sandbox_context(url, self._api, self._model_name)
            self._context = _UNKNOWN if found is None else found
        return None if self._context == _UNKNOWN else self._context

    def _urls(self) -> tuple[str, str]:
        """The base URL of the clients (one given, else the sync one), and the API's default URL."""
        raise NotImplementedError

    def _params(self, kwargs: Mapping[str, Any]) -> dict[str, Any]:
        fields: dict[str, Any] = {"temperature": self.temperature}
        fields[self._api.max_tokens] = self.max_tokens
        defaults = {k: v for k, v in fields.items() if v is not None} | self.additional_kwargs
        return shared.call_params(self._api, defaults, None, kwargs)

    def _prompt(self, prompt: str, formatted: bool) -> str:
        to_prompt = self.completion_to_prompt
        return prompt if formatted or to_prompt is None else to_prompt(prompt)

    def _chat_prompt(self, messages: Sequence[ChatMessage]) -> str:
        return (self.messages_to_prompt or generic_messages_to_prompt)(messages)

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        """Complete ``prompt`` with the sync client."""
        completion = self._client.complete(
            self._model_name, self._prompt(prompt, formatted), **self._params(kwargs)
        )
        return _response(completion)

    @llm_completion_callback()
    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponseGen:
        """The completion as it is generated (Scale: token by token; Gradient: one piece)."""
        stream = self._client.stream(
            self._model_name, self._prompt(prompt, formatted), **self._params(kwargs)
        )

        def responses() -> CompletionResponseGen:
            text = ""
            with closing(stream) as chunks:
                for chunk in chunks:
                    text += chunk.text
                    yield _response(chunk, text)

        return responses()

    @llm_completion_callback()
    async def acomplete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        """Complete ``prompt`` with the async client."""
        completion = await self._async_client.complete(
            self._model_name, self._prompt(prompt, formatted), **self._params(kwargs)
        )
        return _response(completion)

    @llm_completion_callback()
    async def astream_complete(
        self, prompt: str, formatted: bool = False, **kwargs: Any
    ) -> CompletionResponseAsyncGen:
        """The completion as it is generated, with the async client."""
        stream = self._async_client.stream(
            self._model_name, self._prompt(prompt, formatted), **self._params(kwargs)
        )

        async def responses() -> CompletionResponseAsyncGen:
            text = ""
            async with aclosing(stream) as chunks:
                async for chunk in chunks:
                    text += chunk.text
                    yield _response(chunk, text)

        return responses()

    @llm_chat_callback()
    async def achat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        """``chat`` with the async client (``CustomLLM``'s would block on the sync one)."""
        response = await self.acomplete(self._chat_prompt(messages), formatted=True, **kwargs)
        return completion_response_to_chat_response(response)

    @llm_chat_callback()
    async def astream_chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponseAsyncGen:
        """``stream_chat`` with the async client."""
        responses = await self.astream_complete(self._chat_prompt(messages), formatted=True, **kwargs)
        return astream_completion_response_to_chat_response(responses)


def _response(result: Completion | CompletionChunk, text: str | None = None) -> CompletionResponse:
    """A LlamaIndex response for a completion, or for a chunk (``text`` so far, the chunk as ``delta``)."""
    info = shared.generation_info(result)
    if text is None:
        return CompletionResponse(text=result.text, raw=result.raw, additional_kwargs=info)
    return CompletionResponse(text=text, delta=result.text, additional_kwargs=info)


class ScaleLLM(_CompletionsLLM):
    """Scale GP's completions as a LlamaIndex LLM.

    ``model`` is the deployment id. Credentials and URL left out come from ``SGP_API_KEY``,
    ``SGP_ACCOUNT_ID`` and ``SGP_CLIENT_BASE_URL``; ``client``/``async_client`` use clients you built.
    """

    _api_name: ClassVar[str] = "scale"

    model: str = Field(min_length=1, description="The model deployment id.")
    api_key: str | None = Field(default=None, exclude=True, repr=False)
    account_id: str | None = None
    base_url: str | None = None
    client: Scale | None = Field(default=None, exclude=True)
    async_client: AsyncScale | None = Field(default=None, exclude=True)

    @classmethod
    def class_name(cls) -> str:
        return "wrapper_scale_llm"

    @property
    def _model_name(self) -> str:
        return self.model

    def _settings(self) -> dict[str, Any]:
        return {
            "api_key": self.api_key,
            "account_id": self.account_id,
            "base_url": self.base_url,
            **shared.options_given(self.timeout, self.max_retries, self.response_cache),
        }

    @property
    def _client(self) -> Scale:
        return self._clients.get(self.client, Scale, self._settings)

    def _urls(self) -> tuple[str, str]:
        return (self.client or self.async_client or self._client).base_url, scale.DEFAULT_BASE_URL

    @property
    def _async_client(self) -> AsyncScale:
        return self._clients.get(self.async_client, AsyncScale, self._settings)


class GradientLLM(_CompletionsLLM):
    """Gradient's completions as a LlamaIndex LLM, taking the arguments of ``llama-index-llms-gradient``'s
    classes: ``base_model_slug`` or ``model_adapter_id`` (or ``model``: either kind of id),
    ``access_token``, ``workspace_id``, ``host`` (else ``GRADIENT_ACCESS_TOKEN``, ``GRADIENT_WORKSPACE_ID``,
    ``GRADIENT_API_URL``), ``max_tokens`` (sent as ``max_generated_token_count``) and ``is_chat_model``.
    """

    _api_name: ClassVar[str] = "gradient"

    model: str | None = Field(default=None, description="The base model or model adapter id.")
    base_model_slug: str | None = Field(default=None, description="The slug of the base model to use.")
    model_adapter_id: str | None = Field(default=None, description="The id of the model adapter to use.")
    access_token: str | None = Field(default=None, exclude=True, repr=False)
    workspace_id: str | None = None
    host: str | None = Field(default=None, description="Gradient's API URL (default: GRADIENT_API_URL).")
    client: Gradient | None = Field(default=None, exclude=True)
    async_client: AsyncGradient | None = Field(default=None, exclude=True)

    @model_validator(mode="after")
    def _one_model(self) -> GradientLLM:
        given = [
            name
            for name in ("model", "base_model_slug", "model_adapter_id")
            if getattr(self, name) is not None
        ]
        if len(given) != 1:
            raise ValueError(
                "give exactly one of model, base_model_slug and model_adapter_id"
                + (f" (got {', '.join(given)})" if given else "")
            )
        return self

    @classmethod
    def class_name(cls) -> str:
        return "wrapper_gradient_llm"

    @property
    def _model_name(self) -> str:
        name = self.model or self.base_model_slug or self.model_adapter_id
        assert name is not None  # _one_model
        return name

    def _settings(self) -> dict[str, Any]:
        return {
            "access_token": self.access_token,
            "workspace_id": self.workspace_id,
            "base_url": self.host,
            **shared.options_given(self.timeout, self.max_retries, self.response_cache),
        }

    @property
    def _client(self) -> Gradient:
        return self._clients.get(self.client, Gradient, self._settings)

    def _urls(self) -> tuple[str, str]:
        return (self.client or self.async_client or self._client).base_url, gradient.DEFAULT_BASE_URL

    @property
    def _async_client(self) -> AsyncGradient:
        return self._clients.get(self.async_client, AsyncGradient, self._settings)


GradientBaseModelLLM = GradientLLM
"""``llama-index-llms-gradient``'s name, for ``GradientLLM(base_model_slug=...)``."""
GradientModelAdapterLLM = GradientLLM
"""``llama-index-llms-gradient``'s name, for ``GradientLLM(model_adapter_id=...)``."""
