"""Typed clients for Gradient's and Scale GP's completion APIs: ``wrapper.gradient``, ``wrapper.scale``.

The result classes, the request options (``RequestOptions``; ``Options`` in force, whose ``split`` is
how a call's keyword arguments are split and checked), the clients' options (``ClientOptions``), the
hooks (``CallHooks``: what extras and your own code add to each call, and ``Routing``, where each
attempt of a call goes, the router's extension of them), the clients' base classes (``SyncClient``,
``AsyncClient``: to annotate code that takes either API's client), the default HTTP clients
(``DefaultHttpxClient``, ``DefaultAsyncHttpxClient``; ``DefaultHttpx2Client``,
``DefaultAsyncHttpx2Client`` on httpx2) and ``HTTP_LIBRARY_ENV`` are importable from here, and so are
the router's ``Router``, ``AsyncRouter`` and ``Route`` (``wrapper.router``); they load on first use, so
that ``import wrapper`` loads none of them.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from wrapper import apis as _apis

if TYPE_CHECKING:
    from wrapper._core.async_client import AsyncClient
    from wrapper._core.hooks import FORGIVEN_429S, CallHooks, CallInfo, HookFactory
    from wrapper._core.options import ClientOptions, Options, RequestOptions, RetryPolicy, StoreLike
    from wrapper._core.raw import (
        AsyncWithRawResponse,
        AsyncWithStreamingResponse,
        RawResponse,
        StreamingResponse,
        WithRawResponse,
        WithStreamingResponse,
    )
    from wrapper._core.results import Completion, CompletionChunk, TokenLogprob
    from wrapper._core.retries import Target
    from wrapper._core.routing import Routing
    from wrapper._core.streams import AsyncCompletionStream, CompletionStream
    from wrapper._core.sync_client import SyncClient
    from wrapper._core.transports.base import ClientClosedError
    from wrapper._core.transports.default_clients import (
        DefaultAsyncHttpx2Client,
        DefaultAsyncHttpxClient,
        DefaultHttpx2Client,
        DefaultHttpxClient,
    )
    from wrapper._core.transports.library import HTTP_LIBRARY_ENV
    from wrapper.batch._run import AsyncBatchIterator, BatchIterator, BatchResult, BatchStats
    from wrapper.router._route import Route
    from wrapper.router._router import AsyncRouter, Router

__all__ = [
    "FORGIVEN_429S",
    "HTTP_LIBRARY_ENV",
    "AsyncBatchIterator",
    "AsyncClient",
    "AsyncCompletionStream",
    "AsyncRouter",
    "AsyncWithRawResponse",
    "AsyncWithStreamingResponse",
    "BatchIterator",
    "BatchResult",
    "BatchStats",
    "CallHooks",
    "CallInfo",
    "ClientClosedError",
    "ClientOptions",
    "Completion",
    "CompletionChunk",
    "CompletionStream",
    "DefaultAsyncHttpx2Client",
    "DefaultAsyncHttpxClient",
    "DefaultHttpx2Client",
    "DefaultHttpxClient",
    "HookFactory",
    "Options",
    "RawResponse",
    "RequestOptions",
    "RetryPolicy",
    "Route",
    "Router",
    "Routing",
    "StoreLike",
    "StreamingResponse",
    "SyncClient",
    "Target",
    "TokenLogprob",
    "WithRawResponse",
    "WithStreamingResponse",
]

# Public name -> the private module that defines it, imported on first access.
_LAZY = {
    "FORGIVEN_429S": "wrapper._core.hooks",
    "ClientOptions": "wrapper._core.options",
    "Options": "wrapper._core.options",
    "Routing": "wrapper._core.routing",
    "Target": "wrapper._core.retries",
    "AsyncBatchIterator": "wrapper.batch._run",
    "AsyncClient": "wrapper._core.async_client",
    "CallHooks": "wrapper._core.hooks",
    "CallInfo": "wrapper._core.hooks",
    "HookFactory": "wrapper._core.hooks",
    "SyncClient": "wrapper._core.sync_client",
    "BatchIterator": "wrapper.batch._run",
    "BatchResult": "wrapper.batch._run",
    "BatchStats": "wrapper.batch._stats",
    "Completion": "wrapper._core.results",
    "CompletionChunk": "wrapper._core.results",
    "DefaultAsyncHttpxClient": "wrapper._core.transports.default_clients",
    "DefaultHttpxClient": "wrapper._core.transports.default_clients",
    "DefaultAsyncHttpx2Client": "wrapper._core.transports.default_clients",  # imports httpx2
    "DefaultHttpx2Client": "wrapper._core.transports.default_clients",
    "HTTP_LIBRARY_ENV": "wrapper._core.transports.library",
    "TokenLogprob": "wrapper._core.results",
    "AsyncCompletionStream": "wrapper._core.streams",
    "ClientClosedError": "wrapper._core.transports.base",
    "CompletionStream": "wrapper._core.streams",
    "RawResponse": "wrapper._core.raw",
    "RequestOptions": "wrapper._core.options",
    "RetryPolicy": "wrapper._core.options",
    "StoreLike": "wrapper._core.options",
    "StreamingResponse": "wrapper._core.raw",
    "WithRawResponse": "wrapper._core.raw",
    "AsyncWithRawResponse": "wrapper._core.raw",
    "WithStreamingResponse": "wrapper._core.raw",
    "AsyncWithStreamingResponse": "wrapper._core.raw",
    "Route": "wrapper.router._route",
    "Router": "wrapper.router._router",
    "AsyncRouter": "wrapper.router._router",
}


def _api_module(name: str) -> object:
    """The public module of the API ``name`` (``wrapper.scale``), imported: its descriptor registers itself.

    The package gives ``wrapper.apis`` this, being above both: the descriptors' module imports none of
    the modules built on it."""
    return import_module(f"wrapper.{name}")


_apis.loader = _api_module


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value
