"""Typed clients for Gradient's and Scale GP's completion APIs: ``wrapper.gradient``, ``wrapper.scale``.

The result classes and the default HTTP clients (``DefaultHttpxClient``, ``DefaultAsyncHttpxClient``)
are importable from here; they load on first use, so that importing a client module stays as cheap
as importing httpx.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._batch import AsyncBatchIterator, BatchIterator, BatchResult, BatchStats
    from ._http_clients import DefaultAsyncHttpxClient, DefaultHttpxClient
    from ._options import RequestOptions
    from ._raw import (
        AsyncWithRawResponse,
        AsyncWithStreamingResponse,
        RawResponse,
        StreamingResponse,
        WithRawResponse,
        WithStreamingResponse,
    )
    from ._results import Completion, CompletionChunk, TokenLogprob
    from ._retry_policy import RetryPolicy
    from ._streams import AsyncCompletionStream, CompletionStream
    from ._transport import ClientClosedError

__all__ = [
    "AsyncBatchIterator",
    "AsyncCompletionStream",
    "AsyncWithRawResponse",
    "AsyncWithStreamingResponse",
    "BatchIterator",
    "BatchResult",
    "BatchStats",
    "ClientClosedError",
    "Completion",
    "CompletionChunk",
    "CompletionStream",
    "DefaultAsyncHttpxClient",
    "DefaultHttpxClient",
    "RawResponse",
    "RequestOptions",
    "RetryPolicy",
    "StreamingResponse",
    "TokenLogprob",
    "WithRawResponse",
    "WithStreamingResponse",
]

# Public name -> the private module that defines it, imported on first access.
_LAZY = {
    "AsyncBatchIterator": "._batch",
    "BatchIterator": "._batch",
    "BatchResult": "._batch",
    "BatchStats": "._batch_stats",
    "Completion": "._results",
    "CompletionChunk": "._results",
    "DefaultAsyncHttpxClient": "._http_clients",
    "DefaultHttpxClient": "._http_clients",
    "TokenLogprob": "._results",
    "AsyncCompletionStream": "._streams",
    "ClientClosedError": "._transport",
    "CompletionStream": "._streams",
    "RawResponse": "._raw",
    "RequestOptions": "._options",
    "RetryPolicy": "._retry_policy",
    "StreamingResponse": "._raw",
    "WithRawResponse": "._raw",
    "AsyncWithRawResponse": "._raw",
    "WithStreamingResponse": "._raw",
    "AsyncWithStreamingResponse": "._raw",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(module, __name__), name)
    globals()[name] = value
    return value
