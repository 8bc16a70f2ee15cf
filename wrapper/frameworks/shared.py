"""What the LangChain and LlamaIndex adapters share: each API's facts, call parameters, result metadata.

Nothing here imports a framework, so ``wrapper.langchain`` and ``wrapper.llama_index`` each need only
their own extra.
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import httpx

from wrapper import apis
from wrapper.apis import Api

if TYPE_CHECKING:
    from wrapper import Completion, CompletionChunk

__all__ = [
    "Api",
    "Clients",
    "api",
    "call_params",
    "generation_info",
    "options_given",
    "sandbox_context",
    "token_usage",
]

C = TypeVar("C")

PROBE_TIMEOUT = 2.0
"""Seconds to wait for the sandbox's model list when asking a server for a model's context window."""


def api(name: str) -> Api:
    """The descriptor of API ``name`` (``Api``): its stop and max-tokens keywords, its rules, ..."""
    return apis.get(name)


def call_params(
    api: Api, defaults: Mapping[str, Any], stop: Sequence[str] | None, kwargs: Mapping[str, Any]
) -> dict[str, Any]:
    """The keyword arguments of ``complete``: ``defaults`` under ``kwargs``, with ``stop`` mapped to the API's
    stop keyword. The client checks the values; an API without stop sequences refuses ``stop``."""
    params = {**defaults, **kwargs}
    given = params.pop("stop", None)
    stops = list(stop if stop is not None else given or ())
    if not stops:
        return params
    if api.stop is None:
        raise ValueError(
            f"stop: {api.name.title()}'s API has no stop sequences, so stop={stops!r} cannot be sent; "
            "leave stop out (or cut the text yourself)"
        )
    other = params.get(api.stop)
    if other is not None and list(other) != stops:
        raise ValueError(f"stop={stops!r} and {api.stop}={list(other)!r} disagree: give one of them")
    params[api.stop] = stops
    return params


def generation_info(result: Completion | CompletionChunk) -> dict[str, Any]:
    """The finish reason, token counts and request id of a result, leaving out what the API did not say."""
    info = {
        "finish_reason": result.finish_reason,
        "prompt_tokens": result.prompt_tokens,
        "response_tokens": result.response_tokens,
        "request_id": result.request_id,
    }
    return {key: value for key, value in info.items() if value is not None}


def token_usage(infos: Iterable[Mapping[str, Any] | None]) -> dict[str, int]:
    """Summed ``prompt_tokens``/``completion_tokens``/``total_tokens`` of results' ``generation_info``
    (empty when the API reports no counts, as Gradient's does not)."""
    prompt = completion = 0
    reported = False
    for info in infos:
        if info and ("prompt_tokens" in info or "response_tokens" in info):
            reported = True
            prompt += info.get("prompt_tokens", 0)
            completion += info.get("response_tokens", 0)
    if not reported:
        return {}
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def sandbox_context(base_url: str, api: Api, model: str) -> int | None:
    """The context window of ``model`` when ``base_url`` is served by the sandbox (which lists its models
    at ``GET /_sandbox/models``); None for any other server, or a model it does not list."""
    url = httpx.URL(base_url).join("/_sandbox/models")
    try:
        response = httpx.get(url, timeout=PROBE_TIMEOUT, follow_redirects=False)
        listed = response.json()[api.name] if response.status_code == 200 else []
        context = next((m.get("context") for m in listed if m.get("id") == model), None)
    except (httpx.HTTPError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return context if isinstance(context, int) and not isinstance(context, bool) else None


class Clients:
    """An adapter's sync and async clients: the ones passed in, else built on first use and kept."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._built: dict[type[Any], Any] = {}

    def get(self, given: C | None, cls: type[C], settings: Callable[[], Mapping[str, Any]]) -> C:
        """``given``, else this adapter's ``cls`` client built with ``settings()``."""
        if given is not None:
            return given
        with self._lock:
            if cls not in self._built:
                self._built[cls] = cls(**settings())
            client: C = self._built[cls]
            return client

    def close(self) -> None:
        """Close the sync clients built here (those passed in are their owner's to close)."""
        for client in self._take(is_async=False):
            client.close()

    async def aclose(self) -> None:
        """Close the async clients built here."""
        for client in self._take(is_async=True):
            await client.close()

    def _take(self, *, is_async: bool) -> list[Any]:
        with self._lock:
            taken = [cls for cls in self._built if inspect.iscoroutinefunction(cls.close) == is_async]
            return [self._built.pop(cls) for cls in taken]


def options_given(timeout: float | None, max_retries: int | None, cache: Any) -> dict[str, Any]:
    """The clients' ``timeout``, ``max_retries`` and ``cache`` arguments, those given (the others: the
    client's default)."""
    options = {"timeout": timeout, "max_retries": max_retries, "cache": cache}
    return {key: value for key, value in options.items() if value is not None}
