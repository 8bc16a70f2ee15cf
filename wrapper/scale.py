"""Scale GP's ``POST /v4/models/{model_deployment_id}/completions``: ``Scale``, ``AsyncScale``.

    from wrapper.scale import Scale

    with Scale() as scale:  # SGP_API_KEY, SGP_ACCOUNT_ID, SGP_CLIENT_BASE_URL
        print(scale.complete("llama-3-8b-instruct", "What is the capital of France?", max_tokens=32).text)
        for chunk in scale.stream("llama-3-8b-instruct", "Tell me a story"):
            print(chunk.text, end="", flush=True)

``complete`` and ``stream`` at module level use a client built from the environment on first use.
``API`` is what the rest of the package knows of Scale GP (``wrapper.apis.Api``).
"""

from __future__ import annotations

from collections.abc import AsyncIterable, Iterable, Mapping
from typing import TYPE_CHECKING, Unpack

from wrapper import _telemetry
from wrapper._core.async_client import AsyncClient, load_ahead
from wrapper._core.settings import DefaultClient, lazy_attribute
from wrapper._core.sync_client import SyncClient
from wrapper._core.wires.scale import ScaleWire
from wrapper.apis import Api, Credential
from wrapper.cache import cached_calls

__all__ = ["API", "DEFAULT_BASE_URL", "AsyncScale", "Scale", "ScaleParams", "complete", "stream"]


DEFAULT_BASE_URL = "https://api.egp.scale.com"
API = Api(
    name="scale",
    max_tokens="max_tokens",
    stop="stop_sequences",
    choices=None,
    temperature="temperature",
    streams=True,
    hooks=(_telemetry.traced,),
    cache_hooks=cached_calls,
    model_help="the model deployment id",
    credentials=(
        Credential("api_key", "SGP_API_KEY"),
        Credential("account_id", "SGP_ACCOUNT_ID", required=False),
    ),
    base_url_env="SGP_CLIENT_BASE_URL",
    default_base_url=DEFAULT_BASE_URL,
    log_env="SGP_CLIENT_LOG",
    clients=lambda: CLIENTS,
)


def _connect(credentials: Mapping[str, str]) -> tuple[ScaleWire, dict[str, str]]:
    """Scale's wire, and the headers that carry its credentials."""
    names = {"api_key": "x-api-key", "account_id": "x-selected-account-id"}
    return ScaleWire(), {names[keyword]: value for keyword, value in credentials.items()}


if TYPE_CHECKING:
    import httpx
    import httpx2

    from wrapper._core.options import ClientOptions, H, RequestOptions
    from wrapper._core.results import Completion
    from wrapper._core.streams import AsyncCompletionStream, CompletionStream
    from wrapper._generated.scale.params import ScaleParams
    from wrapper.batch import AsyncBatchIterator, BatchIterator, BatchOptions

    class ScaleCall(ScaleParams, RequestOptions, total=False):
        """A call's keyword arguments: the request's fields, generated from Scale GP's spec
        (``ScaleParams``), and the request options."""

    class ScaleBatch(ScaleCall, BatchOptions, total=False):
        """What ``complete_many`` takes: a call's keyword arguments, and the batch's own
        (``wrapper.batch.BatchOptions``: its concurrency, its order, its limits)."""

    class ScaleArguments(ClientOptions[H], total=False):
        """A Scale GP client's arguments: who calls (each left out comes from its environment variable)
        and the options every client takes (``wrapper.ClientOptions``)."""

        api_key: str | None
        """Sent as ``x-api-key`` (required; default: ``SGP_API_KEY``)."""
        account_id: str | None
        """Sent as ``x-selected-account-id`` (default: ``SGP_ACCOUNT_ID``, else none)."""


class Scale(SyncClient):
    """A Scale GP client: ``complete``, ``stream``, ``complete_many``; close it (or use ``with``) when done.

    Its arguments are its credentials (``api_key``, ``account_id``) and the options every client takes
    (``wrapper.ClientOptions``: ``base_url``, ``timeout``, ``max_retries``,
    ``retry``, ``deadline``, ``stream_idle_timeout``, ``hooks``, ``http_client``, ``limits``,
    ``default_headers``); those left out come from the environment (``SGP_API_KEY``, required;
    ``SGP_ACCOUNT_ID``; ``SGP_CLIENT_BASE_URL``) or their defaults. A closed client refuses calls.
    """

    API = API

    def __init__(self, **arguments: Unpack[ScaleArguments[httpx.Client | httpx2.Client]]) -> None:
        super().__init__(_connect, arguments)

    def complete(self, model: str, prompt: str, **params: Unpack[ScaleCall]) -> Completion:
        """Complete ``prompt`` with the deployment ``model``.

        ``params`` are the request's optional fields, generated from the spec as ``ScaleParams``
        (``help(wrapper.scale.ScaleParams)`` lists each with its type, bounds and description); a value
        the spec forbids raises ``ValueError`` naming the keyword and the rule, before anything is sent.
        """
        return self._complete(model, prompt, params)

    def stream(self, model: str, prompt: str, **params: Unpack[ScaleCall]) -> CompletionStream:
        """The completion as it is generated: text deltas, the last chunk with finish reason and counts.

        Arguments are checked now, the request is sent on the first ``next()`` and retried until its
        first chunk arrives, never after. Breaking out of the loop or ``close()`` closes the
        connection; a connection that breaks mid-stream raises ``APIConnectionError``, a body that
        ends before its final chunk ``IncompleteStreamError`` (with the text received).
        """
        return self._stream(model, prompt, params)

    def complete_many(
        self, model: str, prompts: Iterable[str], **kwargs: Unpack[ScaleBatch]
    ) -> BatchIterator:
        """``complete`` for each prompt, at most ``concurrency`` in flight, paced to the limits given.

        Iterate for the results (``wrapper.BatchResult``) as they finish, or in input order with
        ``ordered=True``; ``.stats`` has the batch's figures (``wrapper.BatchStats``). A failed prompt
        raises its error unless ``return_exceptions=True``; ``requests_per_minute`` and
        ``tokens_per_minute`` pace the batch evenly, and 429s slow it down; a ``budget``
        (``wrapper.batch.Budget``) caps the prompts and tokens it sends (``wrapper.batch.BatchOptions``).
        """
        from wrapper.batch import complete_many

        return complete_many(self, model, prompts, **kwargs)


class AsyncScale(AsyncClient):
    """The async ``Scale``: the same methods, awaited; ``stream`` and ``complete_many`` are async iterators.

    It takes ``Scale``'s arguments, its ``http_client`` an ``httpx.AsyncClient``. By default it sends
    with aiohttp, much faster than httpx's own pool under concurrency, unless a proxy, a mock or a tracer
    needs httpx. It works from any event loop; ``await client.close()`` (or ``async with``) when done.
    """

    API = API

    def __init__(self, **arguments: Unpack[ScaleArguments[httpx.AsyncClient | httpx2.AsyncClient]]) -> None:
        super().__init__(_connect, arguments)

    async def complete(self, model: str, prompt: str, **params: Unpack[ScaleCall]) -> Completion:
        """Complete ``prompt`` with the deployment ``model``.

        ``params`` are the request's optional fields, generated from the spec as ``ScaleParams``
        (``help(wrapper.scale.ScaleParams)`` lists each with its type, bounds and description); a value
        the spec forbids raises ``ValueError`` naming the keyword and the rule, before anything is sent.
        """
        return await self._complete(model, prompt, params)

    def stream(self, model: str, prompt: str, **params: Unpack[ScaleCall]) -> AsyncCompletionStream:
        """The completion as it is generated (``async for``); see ``Scale.stream``.

        To close the connection as soon as you stop early, close the generator:
        ``async with contextlib.aclosing(client.stream(...)) as chunks: ...``.
        """
        return self._stream(model, prompt, params)

    def complete_many(
        self, model: str, prompts: Iterable[str] | AsyncIterable[str], **kwargs: Unpack[ScaleBatch]
    ) -> AsyncBatchIterator:
        """The async ``Scale.complete_many``: prompts from an (async) iterable, ``async for`` the results.

        Leaving the loop early and closing the iterator (``aclose()``) cancels the requests in flight.
        """
        from wrapper.batch import acomplete_many

        return acomplete_many(self, model, prompts, **kwargs)


CLIENTS: tuple[type[Scale], type[AsyncScale]] = (Scale, AsyncScale)
_default = DefaultClient(Scale)


def complete(model: str, prompt: str, **params: Unpack[ScaleCall]) -> Completion:
    """``Scale().complete(...)`` on a client built from the environment on first use (``SGP_API_KEY``,
    ``SGP_ACCOUNT_ID``, ``SGP_CLIENT_BASE_URL``), kept until the interpreter exits."""
    return _default.get().complete(model, prompt, **params)


def stream(model: str, prompt: str, **params: Unpack[ScaleCall]) -> CompletionStream:
    """``Scale().stream(...)``, on the client that ``complete`` uses."""
    return _default.get().stream(model, prompt, **params)


__getattr__ = lazy_attribute("ScaleParams", "wrapper._generated.scale.params")
"""``ScaleParams``, the keyword-argument TypedDict generated from the spec, loaded on first use."""

load_ahead()  # what building an AsyncScale and its first call need: loaded here, not in an event loop
