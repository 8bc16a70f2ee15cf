"""Gradient's ``POST /models/{id}/complete``: ``Gradient``, ``AsyncGradient``.

    from wrapper.gradient import Gradient

    with Gradient() as gradient:  # GRADIENT_ACCESS_TOKEN, GRADIENT_WORKSPACE_ID, GRADIENT_API_URL
        answer = gradient.complete("nous-hermes2", "Is the sky blue?", guidance=["yes", "no"])
        print(answer.text)

``complete`` and ``stream`` at module level use a client built from the environment on first use.
``API`` is what the rest of the package knows of Gradient (``wrapper.apis.Api``).
"""

from __future__ import annotations

from collections.abc import AsyncIterable, Iterable, Mapping
from typing import TYPE_CHECKING, Unpack

from wrapper import _telemetry
from wrapper._core.async_client import AsyncClient, load_ahead
from wrapper._core.settings import DefaultClient, lazy_attribute
from wrapper._core.sync_client import SyncClient
from wrapper._core.wires.gradient import GradientWire
from wrapper.apis import Api, Credential
from wrapper.cache import cached_calls

__all__ = ["API", "DEFAULT_BASE_URL", "AsyncGradient", "Gradient", "GradientParams", "complete", "stream"]


DEFAULT_BASE_URL = "https://api.gradient.ai/api"
API = Api(
    name="gradient",
    max_tokens="max_generated_token_count",
    stop=None,
    choices="guidance",
    temperature="temperature",
    streams=False,
    hooks=(_telemetry.traced,),
    cache_hooks=cached_calls,
    model_help="the base model slug or fine-tuned model adapter id",
    credentials=(
        Credential("access_token", "GRADIENT_ACCESS_TOKEN"),
        Credential("workspace_id", "GRADIENT_WORKSPACE_ID"),
    ),
    base_url_env="GRADIENT_API_URL",
    default_base_url=DEFAULT_BASE_URL,
    log_env="GRADIENT_LOG",
    clients=lambda: CLIENTS,
)


def _connect(credentials: Mapping[str, str]) -> tuple[GradientWire, dict[str, str]]:
    """Gradient's wire for the workspace, and the header that carries the access token."""
    token = credentials["access_token"]
    return GradientWire(credentials["workspace_id"]), {"Authorization": f"Bearer {token}"}


if TYPE_CHECKING:
    import httpx
    import httpx2

    from wrapper._core.options import ClientOptions, H, RequestOptions
    from wrapper._core.results import Completion
    from wrapper._core.streams import AsyncCompletionStream, CompletionStream
    from wrapper._generated.gradient.params import GradientParams
    from wrapper.batch import AsyncBatchIterator, BatchIterator, BatchOptions

    class GradientCall(GradientParams, RequestOptions, total=False):
        """A call's keyword arguments: the request's fields (``GradientParams``, generated from the spec,
        with ``guidance`` and ``rag_collection`` reshaped) and the request options."""

    class GradientBatch(GradientCall, BatchOptions, total=False):
        """What ``complete_many`` takes: a call's keyword arguments and ``wrapper.batch.BatchOptions``."""

    class GradientArguments(ClientOptions[H], total=False):
        """A Gradient client's arguments: the access token and the workspace, both required (each from
        its environment variable when left out), and the options every client takes
        (``wrapper.ClientOptions``)."""

        access_token: str | None
        """Sent as a Bearer token (default: ``GRADIENT_ACCESS_TOKEN``)."""
        workspace_id: str | None
        """Sent as ``x-gradient-workspace-id`` (default: ``GRADIENT_WORKSPACE_ID``)."""


class Gradient(SyncClient):
    """A Gradient client: ``complete``, ``stream``, ``complete_many``; close it (or use ``with``) when done.

    Its arguments are its credentials (``access_token``, ``workspace_id``) and the options every client
    takes (``wrapper.ClientOptions``); those left out come from the environment
    (``GRADIENT_ACCESS_TOKEN`` and ``GRADIENT_WORKSPACE_ID``, both required; ``GRADIENT_API_URL``) or
    their defaults. A closed client refuses calls.
    """

    API = API

    def __init__(self, **arguments: Unpack[GradientArguments[httpx.Client | httpx2.Client]]) -> None:
        super().__init__(_connect, arguments)

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
        self, model: str, prompts: Iterable[str], **kwargs: Unpack[GradientBatch]
    ) -> BatchIterator:
        """``complete`` for each prompt, at most ``concurrency`` in flight, paced to the limits given.

        As ``Scale.complete_many``: results as they finish (``ordered=True``: in input order),
        ``.stats``, ``return_exceptions``, ``requests_per_minute``/``tokens_per_minute``, ``budget``.
        """
        from wrapper.batch import complete_many

        return complete_many(self, model, prompts, **kwargs)


class AsyncGradient(AsyncClient):
    """The async ``Gradient``: the same methods, awaited; ``stream``, ``complete_many`` are async iterators.

    It takes ``Gradient``'s arguments, its ``http_client`` an ``httpx.AsyncClient``. By default it sends
    with aiohttp unless a proxy, a mock or a tracer needs httpx. It works from any event loop;
    ``await client.close()`` (or ``async with``) when done.
    """

    API = API

    def __init__(
        self, **arguments: Unpack[GradientArguments[httpx.AsyncClient | httpx2.AsyncClient]]
    ) -> None:
        super().__init__(_connect, arguments)

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
        self, model: str, prompts: Iterable[str] | AsyncIterable[str], **kwargs: Unpack[GradientBatch]
    ) -> AsyncBatchIterator:
        """The async ``Gradient.complete_many``; closing the iterator cancels the requests in flight."""
        from wrapper.batch import acomplete_many

        return acomplete_many(self, model, prompts, **kwargs)


CLIENTS: tuple[type[Gradient], type[AsyncGradient]] = (Gradient, AsyncGradient)
_default = DefaultClient(Gradient)


def complete(model: str, prompt: str, **params: Unpack[GradientCall]) -> Completion:
    """``Gradient().complete(...)`` on a client built from the environment on first use
    (``GRADIENT_ACCESS_TOKEN``, ``GRADIENT_WORKSPACE_ID``, ``GRADIENT_API_URL``), kept until the
    interpreter exits."""
    return _default.get().complete(model, prompt, **params)


def stream(model: str, prompt: str, **params: Unpack[GradientCall]) -> CompletionStream:
    """``Gradient().stream(...)``, on the client that ``complete`` uses: the whole output as one chunk."""
    return _default.get().stream(model, prompt, **params)


__getattr__ = lazy_attribute("GradientParams", "wrapper._generated.gradient.params")
"""``GradientParams``, the keyword-argument TypedDict generated from the spec, loaded on first use."""

load_ahead()  # what building an AsyncGradient and its first call need: loaded here, not in an event loop
