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
from wrapper._core.transports.network import header_value
from wrapper._core.wires.scale import ScaleWire
from wrapper.apis import Api, Credential

if TYPE_CHECKING:
    from wrapper._core.hooks import HookFactory
    from wrapper._core.options import RequestOptions, RetryPolicy
    from wrapper._core.streams import AsyncCompletionStream, CompletionStream
    from wrapper._generated.scale.params import ScaleParams
    from wrapper.batch import AsyncBatchIterator, BatchIterator

    class ScaleCall(ScaleParams, RequestOptions, total=False):
        """A call's keyword arguments: the request's fields (``ScaleParams``) and the request options."""

    from wrapper._core.results import Completion

__all__ = ["API", "DEFAULT_BASE_URL", "AsyncScale", "Scale", "ScaleParams", "complete", "stream"]

load_ahead()  # what building an AsyncScale and its first call need: loaded here, not in an event loop

DEFAULT_BASE_URL = "https://api.egp.scale.com"
HOOKS = (_telemetry.traced,)
"""What every call of this API's clients gets: its telemetry (``wrapper._telemetry``)."""
API = Api(
    name="scale",
    credentials=(
        Credential("api_key", "SGP_API_KEY", required=True),
        Credential("account_id", "SGP_ACCOUNT_ID", required=False),
    ),
    base_url_env="SGP_CLIENT_BASE_URL",
    default_base_url=DEFAULT_BASE_URL,
    sandbox_path="",
    max_tokens="max_tokens",
    stop="stop_sequences",
    choices=None,
    temperature="temperature",
    streams=True,
    log_env="SGP_CLIENT_LOG",
    model_help="the model deployment id",
)


def _settings(api_key: str | None, account_id: str | None, base_url: str | None) -> Settings:
    headers = {"x-api-key": required(api_key, env="SGP_API_KEY", argument="api_key", client="Scale")}
    account_id = from_env(account_id, "SGP_ACCOUNT_ID", "account_id")
    if account_id:
        headers["x-selected-account-id"] = header_value(account_id, "account_id (or SGP_ACCOUNT_ID)")
    return Settings(
        from_env(base_url, "SGP_CLIENT_BASE_URL", "base_url", DEFAULT_BASE_URL) or DEFAULT_BASE_URL, headers
    )


class Scale(SyncClient):
    """A Scale GP client: ``complete``, ``stream``, ``complete_many``; close it (or use ``with``) when done.

    Arguments left out come from the environment: ``SGP_API_KEY`` (required), ``SGP_ACCOUNT_ID``
    (sent as ``x-selected-account-id``), ``SGP_CLIENT_BASE_URL``. ``timeout`` applies to each
    attempt; failed requests are retried up to ``max_retries`` times. ``default_headers`` go on
    every request. ``limits`` sizes the connection pool (default: no cap on connections, 1000 kept
    alive); ``http_client`` replaces the pool, with its own proxy and TLS settings (the client
    closes it on ``close()``). A closed client refuses calls.
    """

    API = API
    HOOKS = HOOKS
    _wire: ScaleWire

    def __init__(
        self,
        *,
        api_key: str | None = None,
        account_id: str | None = None,
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
            ScaleWire(),
            _settings(api_key, account_id, base_url),
            http_client,
            limits,
            default_headers,
            client_options(timeout, max_retries, retry, deadline, stream_idle_timeout, hooks),
        )

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
        self,
        model: str,
        prompts: Iterable[str],
        *,
        concurrency: int = 16,
        ordered: bool = False,
        return_exceptions: bool = False,
        requests_per_minute: float | None = None,
        tokens_per_minute: float | None = None,
        **params: Unpack[ScaleCall],
    ) -> BatchIterator:
        """``complete`` for each prompt, at most ``concurrency`` in flight, paced to the limits given.

        Iterate for the results (``wrapper.BatchResult``) as they finish, or in input order with
        ``ordered=True``; ``.stats`` has the batch's figures (``wrapper.BatchStats``). A failed prompt
        raises its error unless ``return_exceptions=True``; ``requests_per_minute`` and
        ``tokens_per_minute`` pace the batch evenly, and 429s slow it down.
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


class AsyncScale(AsyncClient):
    """The async ``Scale``: the same methods, awaited; ``stream`` and ``complete_many`` are async iterators.

    By default it sends with aiohttp, much faster than httpx's own pool under concurrency, unless
    a proxy, a mock or a tracer needs httpx; pass ``http_client=httpx.AsyncClient(...)`` to choose
    the pool yourself. It works from any event loop; ``await client.close()`` (or ``async with``)
    when done.
    """

    API = API
    HOOKS = HOOKS
    _wire: ScaleWire

    def __init__(
        self,
        *,
        api_key: str | None = None,
        account_id: str | None = None,
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
            ScaleWire(),
            _settings(api_key, account_id, base_url),
            http_client,
            limits,
            default_headers,
            client_options(timeout, max_retries, retry, deadline, stream_idle_timeout, hooks),
        )

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
        self,
        model: str,
        prompts: Iterable[str] | AsyncIterable[str],
        *,
        concurrency: int = 16,
        ordered: bool = False,
        return_exceptions: bool = False,
        requests_per_minute: float | None = None,
        tokens_per_minute: float | None = None,
        **params: Unpack[ScaleCall],
    ) -> AsyncBatchIterator:
        """The async ``Scale.complete_many``: prompts from an (async) iterable, ``async for`` the results.

        Leaving the loop early and closing the iterator (``aclose()``) cancels the requests in flight.
        """
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


CLIENTS = (Scale, AsyncScale)
_default = DefaultClient(Scale)


def complete(model: str, prompt: str, **params: Unpack[ScaleCall]) -> Completion:
    """``Scale().complete(...)`` on a client built from the environment on first use."""
    return _default.get().complete(model, prompt, **params)


def stream(model: str, prompt: str, **params: Unpack[ScaleCall]) -> CompletionStream:
    """``Scale().stream(...)`` on a client built from the environment on first use."""
    return _default.get().stream(model, prompt, **params)


def __getattr__(name: str) -> Any:
    """``ScaleParams``, the keyword-argument TypedDict generated from the spec, loaded on first use."""
    if name == "ScaleParams":
        from wrapper._generated.scale.params import ScaleParams

        return ScaleParams
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
