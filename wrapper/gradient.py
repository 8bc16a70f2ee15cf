"""Gradient's ``POST /models/{id}/complete``: ``Gradient``, ``AsyncGradient``.

    from wrapper.gradient import Gradient

    with Gradient() as gradient:  # GRADIENT_ACCESS_TOKEN, GRADIENT_WORKSPACE_ID, GRADIENT_API_URL
        answer = gradient.complete("nous-hermes2", "Is the sky blue?", guidance=["yes", "no"])
        print(answer.text)

``complete`` and ``stream`` at module level use a client built from the environment on first use.
``API`` is what the rest of the package knows of Gradient (``wrapper.apis.Api``).
"""

from __future__ import annotations

from collections.abc import AsyncIterable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Unpack

import httpx

from wrapper import _telemetry
from wrapper._core.async_client import AsyncClient, load_ahead
from wrapper._core.settings import (
    DEFAULT_MAX_RETRIES,
    DEFAULT_TIMEOUT,
    DefaultClient,
    Settings,
    Timeout,
    client_options,
    from_env,
    required,
)
from wrapper._core.sync_client import SyncClient
from wrapper._core.wires.gradient import GradientWire
from wrapper.apis import Api, Credential

if TYPE_CHECKING:
    from wrapper._core.hooks import HookFactory
    from wrapper._core.options import RequestOptions, RetryPolicy
    from wrapper._core.streams import AsyncCompletionStream, CompletionStream
    from wrapper._generated.gradient.params import GradientParams
    from wrapper.batch import AsyncBatchIterator, BatchIterator

    class GradientCall(GradientParams, RequestOptions, total=False):
        """A call's keyword arguments: the request's fields (``GradientParams``) and the request options."""

    from wrapper._core.results import Completion

__all__ = ["API", "DEFAULT_BASE_URL", "AsyncGradient", "Gradient", "GradientParams", "complete", "stream"]

load_ahead()  # what building an AsyncGradient and its first call need: loaded here, not in an event loop

DEFAULT_BASE_URL = "https://api.gradient.ai/api"
HOOKS = (_telemetry.traced,)
"""What every call of this API's clients gets: its telemetry (``wrapper._telemetry``)."""
API = Api(
    name="gradient",
    credentials=(
        Credential("access_token", "GRADIENT_ACCESS_TOKEN", required=True),
        Credential("workspace_id", "GRADIENT_WORKSPACE_ID", required=True),
    ),
    base_url_env="GRADIENT_API_URL",
    default_base_url=DEFAULT_BASE_URL,
    sandbox_path="/api",
    max_tokens="max_generated_token_count",
    stop=None,
    choices="guidance",
    temperature="temperature",
    streams=False,
    log_env="GRADIENT_LOG",
    model_help="the base model slug or fine-tuned model adapter id",
)


def _config(
    access_token: str | None, workspace_id: str | None, base_url: str | None
) -> tuple[GradientWire, Settings]:
    token = required(access_token, env="GRADIENT_ACCESS_TOKEN", argument="access_token", client="Gradient")
    workspace = required(
        workspace_id, env="GRADIENT_WORKSPACE_ID", argument="workspace_id", client="Gradient"
    )
    url = from_env(base_url, "GRADIENT_API_URL", "base_url", DEFAULT_BASE_URL) or DEFAULT_BASE_URL
    return GradientWire(workspace), Settings(url, {"Authorization": f"Bearer {token}"})


class Gradient(SyncClient):
    """A Gradient client: ``complete``, ``stream``, ``complete_many``; close it (or use ``with``) when done.

    Arguments left out come from the environment: ``GRADIENT_ACCESS_TOKEN`` and
    ``GRADIENT_WORKSPACE_ID`` (both required), ``GRADIENT_API_URL``. ``timeout`` applies to each
    attempt; failed requests are retried up to ``max_retries`` times. ``default_headers`` go on
    every request. ``limits`` sizes the connection pool (default: no cap on connections, 1000 kept
    alive); ``http_client`` replaces the pool, with its own proxy and TLS settings (the client
    closes it on ``close()``). A closed client refuses calls.
    """

    API = API
    HOOKS = HOOKS
    _wire: GradientWire

    def __init__(
        self,
        *,
        access_token: str | None = None,
        workspace_id: str | None = None,
        base_url: str | None = None,
        timeout: Timeout = DEFAULT_TIMEOUT,
        max_retries: int = DEFAULT_MAX_RETRIES,
        retry: RetryPolicy | None = None,
        deadline: float | None = None,
        stream_idle_timeout: float | None = None,
        hooks: Sequence[HookFactory] = (),
        http_client: httpx.Client | None = None,
        limits: httpx.Limits | None = None,
        default_headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(
            *_config(access_token, workspace_id, base_url),
            http_client,
            limits,
            default_headers,
            client_options(timeout, max_retries, retry, deadline, stream_idle_timeout, hooks),
        )

    def complete(self, model: str, prompt: str, **params: Unpack[GradientCall]) -> Completion:
        """Complete ``prompt`` (sent as ``query``) with the base or fine-tuned model ``model``.

        ``params`` are the request's optional fields, generated from the spec as ``GradientParams``
        (``help(wrapper.gradient.GradientParams)`` lists each with its type, bounds and description); a
        value the spec forbids raises ``ValueError`` naming the keyword and the rule, before anything is sent.
        """
        return self._complete(model, prompt, params)

    def stream(self, model: str, prompt: str, **params: Unpack[GradientCall]) -> CompletionStream:
        """Gradient's API does not stream: this yields the whole output as one chunk once it is complete.

        It is here so that code written for streaming works with both providers.
        """
        return self._stream(model, prompt, params)

    def complete_many(
        self,
        model: str,
        prompts: Iterable[str],
        *,
        concurrency: int = 16,
        ordered: bool = False,
        return_exceptions: bool = False,
        requests_per_minute: float | None = None,
        tokens_per_minute: float | None = None,
        **params: Unpack[GradientCall],
    ) -> BatchIterator:
        """``complete`` for each prompt, at most ``concurrency`` in flight, paced to the limits given.

        As ``Scale.complete_many``: results as they finish (``ordered=True``: in input order),
        ``.stats``, ``return_exceptions``, ``requests_per_minute``/``tokens_per_minute``.
        """
        from wrapper.batch import complete_many

        return complete_many(
            self,
            model,
            prompts,
            concurrency=concurrency,
            ordered=ordered,
            return_exceptions=return_exceptions,
            requests_per_minute=requests_per_minute,
            tokens_per_minute=tokens_per_minute,
            **params,
        )


class AsyncGradient(AsyncClient):
    """The async ``Gradient``: the same methods, awaited; ``stream``, ``complete_many`` are async iterators.

    By default it sends with aiohttp unless a proxy, a mock or a tracer needs httpx; pass
    ``http_client=httpx.AsyncClient(...)`` to choose the pool yourself. It works from any event
    loop; ``await client.close()`` (or ``async with``) when done.
    """

    API = API
    HOOKS = HOOKS
    _wire: GradientWire

    def __init__(
        self,
        *,
        access_token: str | None = None,
        workspace_id: str | None = None,
        base_url: str | None = None,
        timeout: Timeout = DEFAULT_TIMEOUT,
        max_retries: int = DEFAULT_MAX_RETRIES,
        retry: RetryPolicy | None = None,
        deadline: float | None = None,
        stream_idle_timeout: float | None = None,
        hooks: Sequence[HookFactory] = (),
        http_client: httpx.AsyncClient | None = None,
        limits: httpx.Limits | None = None,
        default_headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(
            *_config(access_token, workspace_id, base_url),
            http_client,
            limits,
            default_headers,
            client_options(timeout, max_retries, retry, deadline, stream_idle_timeout, hooks),
        )

    async def complete(self, model: str, prompt: str, **params: Unpack[GradientCall]) -> Completion:
        """Complete ``prompt`` (sent as ``query``) with the base or fine-tuned model ``model``.

        ``params`` are the request's optional fields, generated from the spec as ``GradientParams``
        (``help(wrapper.gradient.GradientParams)`` lists each with its type, bounds and description); a
        value the spec forbids raises ``ValueError`` naming the keyword and the rule, before anything is sent.
        """
        return await self._complete(model, prompt, params)

    def stream(self, model: str, prompt: str, **params: Unpack[GradientCall]) -> AsyncCompletionStream:
        """Gradient's API does not stream: this yields the whole output as one chunk once it is complete."""
        return self._stream(model, prompt, params)

    def complete_many(
        self,
        model: str,
        prompts: Iterable[str] | AsyncIterable[str],
        *,
        concurrency: int = 16,
        ordered: bool = False,
        return_exceptions: bool = False,
        requests_per_minute: float | None = None,
        tokens_per_minute: float | None = None,
        **params: Unpack[GradientCall],
    ) -> AsyncBatchIterator:
        """The async ``Gradient.complete_many``; closing the iterator cancels the requests in flight."""
        from wrapper.batch import acomplete_many

        return acomplete_many(
            self,
            model,
            prompts,
            concurrency=concurrency,
            ordered=ordered,
            return_exceptions=return_exceptions,
            requests_per_minute=requests_per_minute,
            tokens_per_minute=tokens_per_minute,
            **params,
        )


CLIENTS = (Gradient, AsyncGradient)
_default = DefaultClient(Gradient)


def complete(model: str, prompt: str, **params: Unpack[GradientCall]) -> Completion:
    """``Gradient().complete(...)`` on a client built from the environment on first use."""
    return _default.get().complete(model, prompt, **params)


def stream(model: str, prompt: str, **params: Unpack[GradientCall]) -> CompletionStream:
    """``Gradient().stream(...)`` on a client built from the environment on first use."""
    return _default.get().stream(model, prompt, **params)


def __getattr__(name: str) -> Any:
    """``GradientParams``, the keyword-argument TypedDict generated from the spec, loaded on first use."""
    if name == "GradientParams":
        from wrapper._generated.gradient.params import GradientParams

        return GradientParams
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
