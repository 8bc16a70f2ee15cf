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
    from ._results import Completion, CompletionChunk, TokenLogprob

__all__ = [
    "AsyncBatchIterator",
    "BatchIterator",
    "BatchResult",
    "BatchStats",
    "Completion",
    "CompletionChunk",
    "DefaultAsyncHttpxClient",
    "DefaultHttpxClient",
    "TokenLogprob",
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
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(module, __name__), name)
    globals()[name] = value
    return value
