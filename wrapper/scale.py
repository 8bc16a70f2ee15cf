"""Scale GP's ``POST /v4/models/{model_deployment_id}/completions``: ``Scale``, ``AsyncScale``.

    from wrapper.scale import Scale

    with Scale() as scale:  # SGP_API_KEY, SGP_ACCOUNT_ID, SGP_CLIENT_BASE_URL
        print(scale.complete("deployment-id", "What is the capital of France?", max_tokens=32).text)
        for chunk in scale.stream("deployment-id", "Tell me a story"):
            print(chunk.text, end="", flush=True)

``complete`` and ``stream`` at module level use a client built from the environment on first use.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Generator, Mapping
from typing import TYPE_CHECKING, Any, Unpack

import httpx

from ._base import (
    DEFAULT_MAX_RETRIES,
    DEFAULT_TIMEOUT,
    AsyncClient,
    DefaultClient,
    Settings,
    SyncClient,
    Timeout,
    from_env,
    required,
)
from ._network import header_value

if TYPE_CHECKING:
    from generated.scale.params import ScaleParams

    from ._results import Completion, CompletionChunk
    from ._scale_wire import ScaleWire

__all__ = ["DEFAULT_BASE_URL", "AsyncScale", "Scale", "ScaleParams", "complete", "stream"]

DEFAULT_BASE_URL = "https://api.egp.scale.com"


def _settings(api_key: str | None, account_id: str | None, base_url: str | None) -> Settings:
    headers = {"x-api-key": required(api_key, env="SGP_API_KEY", argument="api_key", client="Scale")}
    account_id = from_env(account_id, "SGP_ACCOUNT_ID")
    if account_id:
        headers["x-selected-account-id"] = header_value(account_id, "account_id (or SGP_ACCOUNT_ID)")
    return Settings(from_env(base_url, "SGP_CLIENT_BASE_URL", DEFAULT_BASE_URL) or DEFAULT_BASE_URL, headers)


def _wire() -> ScaleWire:
    from ._scale_wire import ScaleWire  # imported with the first client: `import wrapper.scale` stays light

    return ScaleWire()


class Scale(SyncClient):
    """A Scale GP client: ``complete``, ``stream``, ``complete_many``; close it (or use ``with``) when done.

    Arguments left out come from the environment: ``SGP_API_KEY`` (required), ``SGP_ACCOUNT_ID``
    (sent as ``x-selected-account-id``), ``SGP_CLIENT_BASE_URL``. ``timeout`` applies to each
    attempt; failed requests are retried up to ``max_retries`` times. ``default_headers`` go on
    every request. ``limits`` sizes the connection pool (default: no cap on connections, 1000 kept
    alive); ``http_client`` replaces the pool, with its own proxy and TLS settings (the client
    closes it on ``close()``). See README, "Networks".
    """

    _wire: ScaleWire

    def __init__(
        self,
        *,
        api_key: str | None = None,
        account_id: str | None = None,
        base_url: str | None = None,
        timeout: Timeout = DEFAULT_TIMEOUT,
        max_retries: int = DEFAULT_MAX_RETRIES,
        http_client: httpx.Client | None = None,
        limits: httpx.Limits | None = None,
        default_headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(
            _wire(),
            _settings(api_key, account_id, base_url),
            timeout,
            max_retries,
            http_client,
            limits,
            default_headers,
        )

    def complete(self, model: str, prompt: str, **params: Unpack[ScaleParams]) -> Completion:
        """Complete ``prompt`` with the deployment ``model``."""
        return self._complete(
            self._wire.request(model, prompt, params, stream=False), (model, prompt, params)
        )

    def stream(
        self, model: str, prompt: str, **params: Unpack[ScaleParams]
    ) -> Generator[CompletionChunk, None, None]:
        """The completion as it is generated: text deltas, the last chunk with finish reason and counts.

        Arguments are checked now, the request is sent on the first ``next()``. Breaking out of the
        loop or ``close()`` closes the connection; a connection that breaks mid-stream raises
        ``APIConnectionError`` (never retried once a chunk has been yielded).
        """
        request = self._request(self._wire.request(model, prompt, params, stream=True), stream=True)
        return self._sse(request, self._wire.chunk, (model, prompt, params))


class AsyncScale(AsyncClient):
    """The async ``Scale``: the same methods, awaited; ``stream`` and ``complete_many`` are async iterators.

    By default ``complete`` posts on an aiohttp fast lane, much faster than httpx's own pool under
    concurrency, unless a proxy, a mock or a tracer needs httpx (README, "Networks"); pass
    ``http_client=httpx.AsyncClient(...)`` to choose the pool yourself. Use it within one event
    loop, and ``await client.close()`` (or ``async with``) when done.
    """

    _wire: ScaleWire

    def __init__(
        self,
        *,
        api_key: str | None = None,
        account_id: str | None = None,
        base_url: str | None = None,
        timeout: Timeout = DEFAULT_TIMEOUT,
        max_retries: int = DEFAULT_MAX_RETRIES,
        http_client: httpx.AsyncClient | None = None,
        limits: httpx.Limits | None = None,
        default_headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(
            _wire(),
            _settings(api_key, account_id, base_url),
            timeout,
            max_retries,
            http_client,
            limits,
            default_headers,
        )

    async def complete(self, model: str, prompt: str, **params: Unpack[ScaleParams]) -> Completion:
        """Complete ``prompt`` with the deployment ``model``."""
        return await self._complete(
            self._wire.request(model, prompt, params, stream=False), (model, prompt, params)
        )

    def stream(
        self, model: str, prompt: str, **params: Unpack[ScaleParams]
    ) -> AsyncGenerator[CompletionChunk, None]:
        """The completion as it is generated (``async for``); see ``Scale.stream``.

        To close the connection as soon as you stop early, close the generator:
        ``async with contextlib.aclosing(client.stream(...)) as chunks: ...``.
        """
        request = self._request(self._wire.request(model, prompt, params, stream=True), stream=True)
        return self._sse(request, self._wire.chunk, (model, prompt, params))


_default = DefaultClient(Scale)


def complete(model: str, prompt: str, **params: Unpack[ScaleParams]) -> Completion:
    """``Scale().complete(...)`` on a client built from the environment on first use."""
    return _default.get().complete(model, prompt, **params)


def stream(model: str, prompt: str, **params: Unpack[ScaleParams]) -> Generator[CompletionChunk, None, None]:
    """``Scale().stream(...)`` on a client built from the environment on first use."""
    return _default.get().stream(model, prompt, **params)


def __getattr__(name: str) -> Any:
    """``ScaleParams``, the keyword-argument TypedDict generated from the spec, loaded on first use."""
    if name == "ScaleParams":
        from generated.scale.params import ScaleParams

        return ScaleParams
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
