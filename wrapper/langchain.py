"""LangChain models over the clients: ``ScaleLLM`` and ``GradientLLM`` (langchain-core ``BaseLLM``).

    from wrapper.langchain import ScaleLLM

    llm = ScaleLLM(model="deployment-id", max_tokens=64)  # SGP_API_KEY, SGP_ACCOUNT_ID, SGP_CLIENT_BASE_URL
    print(llm.invoke("What is the capital of France?"))

``invoke``/``stream`` use the sync client, ``ainvoke``/``astream`` the async one; ``batch``/``abatch``
send every prompt through one ``complete_many`` with the config's ``max_concurrency`` requests in
flight, paced to the model's ``requests_per_minute``/``tokens_per_minute``. Errors are the clients'
own (``wrapper.errors``), so ``with_retry``/``with_fallbacks`` can tell them apart. Needs the
``langchain`` extra.
"""

from __future__ import annotations

import contextvars
import warnings
from collections.abc import AsyncGenerator, AsyncIterator, Generator, Iterator, Mapping
from contextlib import aclosing, closing
from typing import TYPE_CHECKING, Any, ClassVar

try:
    from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
    from langchain_core.language_models import LanguageModelInput
    from langchain_core.language_models.llms import BaseLLM
    from langchain_core.outputs import Generation, GenerationChunk, LLMResult
    from langchain_core.runnables import RunnableConfig
    from langchain_core.runnables.config import get_config_list
    from pydantic import ConfigDict, Field, PrivateAttr, SecretStr, model_validator
except ImportError as exc:  # pragma: no cover - exercised in a subprocess without the extra
    from wrapper.extras import install_hint

    raise ImportError(
        f"wrapper.langchain needs LangChain ({exc.name} is missing): {install_hint('langchain')}"
    ) from exc

from .frameworks import shared
from .gradient import AsyncGradient, Gradient
from .scale import AsyncScale, Scale

if TYPE_CHECKING:
    from wrapper import BatchResult, Completion, CompletionChunk

__all__ = ["GradientLLM", "ScaleLLM"]

_MAX_CONCURRENCY: contextvars.ContextVar[int | None] = contextvars.ContextVar(
    "wrapper_langchain_max_concurrency", default=None
)
"""The ``max_concurrency`` of the ``batch``/``abatch`` call in progress, for ``_generate`` to pass on."""


class _CompletionsLLM(BaseLLM):
    """The machinery both models share: parameters, clients, batches, streams, results."""

    model_kwargs: dict[str, Any] = Field(default_factory=dict)
    """Keyword arguments of the client's ``complete`` sent with every call (a call's own win)."""
    requests_per_minute: float | None = None
    """Pace ``batch``/``abatch`` to this many requests a minute (None: adapt to the server's 429s)."""
    tokens_per_minute: float | None = None
    """Pace ``batch``/``abatch`` to this many tokens a minute (None: no token limit)."""
    streaming: bool = False
    """``invoke`` (a ``generate`` of one prompt) streams, so callbacks see ``on_llm_new_token``; batches
    of several prompts still go through ``complete_many``."""
    timeout: float | None = None
    """Seconds each attempt may take (None: the client's default)."""
    max_retries: int | None = None
    """How many times the client retries a failed request (None: the client's default)."""
    response_cache: Any = None
    """The clients' response cache (their ``cache``: ``wrapper.cache``): an SQLite file's path, a
    ``redis://`` URL or a store; a hit answers with no request, and the callbacks fire as on a miss
    (None: none). Not LangChain's own ``cache`` (``set_llm_cache``), which keys on the prompt and this
    model's fields, not on the request as sent."""

    model_config = ConfigDict(populate_by_name=True, arbitrary_types_allowed=True, extra="forbid")

    _api_name: ClassVar[str]
    _clients: shared.Clients = PrivateAttr(default_factory=shared.Clients)

    @model_validator(mode="before")
    @classmethod
    def _keywords_into_model_kwargs(cls, values: Any) -> Any:
        """Keyword arguments of ``complete`` given as constructor arguments (``max_tokens=64``) go into
        ``model_kwargs``; anything else unknown is refused by the model."""
        if not isinstance(values, dict):
            return values
        keywords = shared.api(cls._api_name).rules().keys()
        given = {k: values[k] for k in values if k in keywords and k not in cls.model_fields}
        if not given:
            return values
        rest = {k: v for k, v in values.items() if k not in given}
        return {**rest, "model_kwargs": {**given, **rest.get("model_kwargs", {})}}

    _secrets: ClassVar[dict[str, str]]
    """The secret fields, each with the client's credential keyword it is given as."""

    @property
    def _api(self) -> shared.Api:
        return shared.api(self._api_name)

    @property
    def lc_secrets(self) -> dict[str, str]:
        """Each secret field with the environment variable the API's client reads it from."""
        envs = {credential.keyword: credential.env for credential in self._api.credentials}
        return {field: envs[keyword] for field, keyword in self._secrets.items()}

    @property
    def _model_name(self) -> str:
        """The model (deployment) id sent in the URL."""
        raise NotImplementedError

    def _settings(self) -> dict[str, Any]:
        """The constructor arguments of this API's clients: credentials and URL, then the options."""
        raise NotImplementedError

    def _options(self) -> dict[str, Any]:
        return shared.options_given(self.timeout, self.max_retries, self.response_cache)

    @property
    def _client(self) -> Scale | Gradient:
        raise NotImplementedError

    @property
    def _async_client(self) -> AsyncScale | AsyncGradient:
        raise NotImplementedError

    @property
    def _identifying_params(self) -> Mapping[str, Any]:
        return {"model": self._model_name, "model_kwargs": self.model_kwargs}

    def close(self) -> None:
        """Close the sync client this model built (one passed as ``client`` is yours to close)."""
        self._clients.close()

    async def aclose(self) -> None:
        """Close the async client this model built (one passed as ``async_client`` is yours to close)."""
        await self._clients.aclose()

    # batch and abatch: every prompt in one generate call, hence one complete_many

    def batch(
        self,
        inputs: list[LanguageModelInput],
        config: RunnableConfig | list[RunnableConfig] | None = None,
        *,
        return_exceptions: bool = False,
        **kwargs: Any,
    ) -> list[str]:
        """``invoke`` on each input, through one ``complete_many`` with ``max_concurrency`` in flight."""
        configs, token = self._take_concurrency(inputs, config)
        try:
            return super().batch(inputs, configs, return_exceptions=return_exceptions, **kwargs)
        finally:
            _MAX_CONCURRENCY.reset(token)

    async def abatch(
        self,
        inputs: list[LanguageModelInput],
        config: RunnableConfig | list[RunnableConfig] | None = None,
        *,
        return_exceptions: bool = False,
        **kwargs: Any,
    ) -> list[str]:
        """``ainvoke`` on each input, through one async ``complete_many``, ``max_concurrency`` in flight."""
        configs, token = self._take_concurrency(inputs, config)
        try:
            return await super().abatch(inputs, configs, return_exceptions=return_exceptions, **kwargs)
        finally:
            _MAX_CONCURRENCY.reset(token)

    @staticmethod
    def _take_concurrency(
        inputs: list[LanguageModelInput], config: RunnableConfig | list[RunnableConfig] | None
    ) -> tuple[list[RunnableConfig], contextvars.Token[int | None]]:
        """The configs without ``max_concurrency`` (BaseLLM would cut the batch into sequential chunks of
        that size), and the contextvar token that hands it to ``_generate`` instead."""
        configs = get_config_list(config, len(inputs))
        limit = configs[0].get("max_concurrency") if configs else None
        stripped: list[RunnableConfig] = [{**c, "max_concurrency": None} for c in configs]
        return stripped, _MAX_CONCURRENCY.set(limit)

    def _batch_options(self) -> dict[str, Any]:
        options: dict[str, Any] = {
            "ordered": True,
            "requests_per_minute": self.requests_per_minute,
            "tokens_per_minute": self.tokens_per_minute,
        }
        limit = _MAX_CONCURRENCY.get()
        if limit is not None:
            options["concurrency"] = limit
        return options

    def _paced(self) -> bool:
        return self.requests_per_minute is not None or self.tokens_per_minute is not None

    def _params(self, stop: list[str] | None, kwargs: Mapping[str, Any]) -> dict[str, Any]:
        keywords = self._api.rules()
        fields = {
            name: value
            for name in type(self).model_fields
            if name in keywords and (value := getattr(self, name)) is not None
        }  # keywords of ``complete`` the model declares as its own fields (``max_tokens``)
        return shared.call_params(self._api, {**fields, **self.model_kwargs}, stop, kwargs)

    # the four BaseLLM hooks

    def _generate(
        self,
        prompts: list[str],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> LLMResult:
        if self.streaming and len(prompts) == 1:
            return self._result([_joined(self._chunks(prompts[0], stop, run_manager, **kwargs))])
        params = self._params(stop, kwargs)
        if len(prompts) == 1 and not self._paced():
            return self._result([_generation(self._client.complete(self._model_name, prompts[0], **params))])
        batch = self._client.complete_many(self._model_name, prompts, **self._batch_options(), **params)
        with closing(batch):
            return self._result([_generation(_completed(r)) for r in batch])

    async def _agenerate(
        self,
        prompts: list[str],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> LLMResult:
        if self.streaming and len(prompts) == 1:
            chunk: GenerationChunk | None = None
            async for piece in self._achunks(prompts[0], stop, run_manager, **kwargs):
                chunk = piece if chunk is None else chunk + piece
            return self._result([_as_generation(chunk)])
        params = self._params(stop, kwargs)
        if len(prompts) == 1 and not self._paced():
            completion = await self._async_client.complete(self._model_name, prompts[0], **params)
            return self._result([_generation(completion)])
        batch = self._async_client.complete_many(self._model_name, prompts, **self._batch_options(), **params)
        async with aclosing(batch):
            return self._result([_generation(_completed(r)) async for r in batch])

    def _stream(
        self,
        prompt: str,
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[GenerationChunk]:
        """The chunks with text (``stream`` yields their texts: the last chunk often has none)."""
        with closing(self._chunks(prompt, stop, run_manager, **kwargs)) as chunks:
            for chunk in chunks:
                if chunk.text:
                    yield chunk

    async def _astream(
        self,
        prompt: str,
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[GenerationChunk]:
        """The async ``_stream``."""
        async with aclosing(self._achunks(prompt, stop, run_manager, **kwargs)) as chunks:
            async for chunk in chunks:
                if chunk.text:
                    yield chunk

    def _chunks(
        self,
        prompt: str,
        stop: list[str] | None,
        run_manager: CallbackManagerForLLMRun | None,
        **kwargs: Any,
    ) -> Generator[GenerationChunk]:
        """Every chunk of a stream (the last, maybe without text, has the finish reason and counts);
        the callbacks get each one's text, when it has some."""
        with closing(self._client.stream(self._model_name, prompt, **self._params(stop, kwargs))) as chunks:
            for piece in chunks:
                chunk = _chunk(piece)
                if run_manager is not None and chunk.text:
                    run_manager.on_llm_new_token(chunk.text, chunk=chunk)
                yield chunk

    async def _achunks(
        self,
        prompt: str,
        stop: list[str] | None,
        run_manager: AsyncCallbackManagerForLLMRun | None,
        **kwargs: Any,
    ) -> AsyncGenerator[GenerationChunk]:
        """The async ``_chunks``."""
        stream = self._async_client.stream(self._model_name, prompt, **self._params(stop, kwargs))
        async with aclosing(stream) as chunks:
            async for piece in chunks:
                chunk = _chunk(piece)
                if run_manager is not None and chunk.text:
                    await run_manager.on_llm_new_token(chunk.text, chunk=chunk)
                yield chunk

    def _result(self, generations: list[Generation]) -> LLMResult:
        usage = shared.token_usage(g.generation_info for g in generations)
        output: dict[str, Any] = {"model_name": self._model_name}
        if usage:
            output["token_usage"] = usage
        return LLMResult(generations=[[g] for g in generations], llm_output=output)


def _completed(result: BatchResult) -> Completion:
    if result.completion is None:  # only with return_exceptions=True, which _generate never asks for
        raise result.error or RuntimeError(f"prompt {result.index} has neither completion nor error")
    return result.completion


def _generation(completion: Completion) -> Generation:
    return Generation(text=completion.text, generation_info=shared.generation_info(completion))


def _chunk(piece: CompletionChunk) -> GenerationChunk:
    """A LangChain chunk; only the last (with the finish reason) has ``generation_info``, since adding
    chunks joins the values of their infos (a request id on each would be repeated)."""
    last = piece.finish_reason is not None
    return GenerationChunk(text=piece.text, generation_info=shared.generation_info(piece) if last else None)


def _joined(chunks: Iterator[GenerationChunk]) -> Generation:
    chunk: GenerationChunk | None = None
    for piece in chunks:
        chunk = piece if chunk is None else chunk + piece
    return _as_generation(chunk)


def _as_generation(chunk: GenerationChunk | None) -> Generation:
    if chunk is None:
        return Generation(text="")
    return Generation(text=chunk.text, generation_info=chunk.generation_info)


class ScaleLLM(_CompletionsLLM):
    """Scale GP's completions as a LangChain LLM.

    ``model`` is the deployment id. Credentials and URL left out come from ``SGP_API_KEY``,
    ``SGP_ACCOUNT_ID`` and ``SGP_CLIENT_BASE_URL``; ``client``/``async_client`` use clients you built.
    Keyword arguments of ``Scale.complete`` (``max_tokens``, ``temperature``, ...) may be given to the
    constructor, in ``model_kwargs`` or per call; ``stop`` is sent as the API's stop sequences.
    """

    _api_name: ClassVar[str] = "scale"
    _secrets: ClassVar[dict[str, str]] = {"api_key": "api_key"}

    model: str = Field(min_length=1)
    """The model deployment id."""
    max_tokens: int | None = None
    """The most tokens to generate (None: the deployment's default)."""
    temperature: float | None = None
    """The sampling temperature (None: the deployment's default)."""
    api_key: SecretStr | None = None
    account_id: str | None = None
    base_url: str | None = None
    client: Scale | None = Field(default=None, exclude=True)
    async_client: AsyncScale | None = Field(default=None, exclude=True)

    @property
    def _llm_type(self) -> str:
        return "scale"

    @property
    def _model_name(self) -> str:
        return self.model

    def _settings(self) -> dict[str, Any]:
        key = self.api_key.get_secret_value() if self.api_key is not None else None
        return {"api_key": key, "account_id": self.account_id, "base_url": self.base_url, **self._options()}

    @property
    def _client(self) -> Scale:
        return self._clients.get(self.client, Scale, self._settings)

    @property
    def _async_client(self) -> AsyncScale:
        return self._clients.get(self.async_client, AsyncScale, self._settings)


class GradientLLM(_CompletionsLLM):
    """Gradient's completions as a LangChain LLM, taking the arguments of langchain_community's
    ``GradientLLM``: ``model`` (or ``model_id``), ``gradient_access_token``, ``gradient_workspace_id``,
    ``gradient_api_url`` (else ``GRADIENT_ACCESS_TOKEN``, ``GRADIENT_WORKSPACE_ID``, ``GRADIENT_API_URL``)
    and ``model_kwargs`` (``max_generated_token_count``, ``temperature``, ``top_k``, ``top_p``, ...).

    Gradient's API has no stop sequences: a non-empty ``stop`` raises ``ValueError``. ``stream`` yields
    the whole completion as one chunk, as the client does.
    """

    _api_name: ClassVar[str] = "gradient"
    _secrets: ClassVar[dict[str, str]] = {"gradient_access_token": "access_token"}

    model_id: str = Field(alias="model", min_length=1)
    """The base model or model adapter id."""
    gradient_access_token: SecretStr | None = None
    gradient_workspace_id: str | None = None
    gradient_api_url: str | None = None
    aiosession: Any = Field(default=None, exclude=True)
    """Accepted for compatibility, not used: the async client keeps its own pool (see ``async_client``)."""
    client: Gradient | None = Field(default=None, exclude=True)
    async_client: AsyncGradient | None = Field(default=None, exclude=True)

    @model_validator(mode="after")
    def _warn_aiosession(self) -> GradientLLM:
        if self.aiosession is not None:
            warnings.warn(
                "GradientLLM(aiosession=...) is not used: requests go through the async client's own pool; "
                "pass async_client=AsyncGradient(...) to choose it",
                DeprecationWarning,
                stacklevel=2,
            )
        return self

    @property
    def _llm_type(self) -> str:
        return "gradient"

    @property
    def _model_name(self) -> str:
        return self.model_id

    def _settings(self) -> dict[str, Any]:
        token = self.gradient_access_token
        return {
            "access_token": token.get_secret_value() if token is not None else None,
            "workspace_id": self.gradient_workspace_id,
            "base_url": self.gradient_api_url,
            **self._options(),
        }

    @property
    def _client(self) -> Gradient:
        return self._clients.get(self.client, Gradient, self._settings)

    @property
    def _async_client(self) -> AsyncGradient:
        return self._clients.get(self.async_client, AsyncGradient, self._settings)
