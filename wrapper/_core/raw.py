"""The HTTP response under a result: ``client.with_raw_response`` and ``client.with_streaming_response``.

As in the vendors' own SDKs: ``client.with_raw_response.complete(...)`` returns a ``RawResponse``
(status, headers, request id, the body's bytes, ``parse()`` to the usual ``Completion``), and
``with client.with_streaming_response.stream(...) as response:`` a ``StreamingResponse`` whose
``parse()`` is the stream of chunks, closed when the block is left. Error statuses still raise
their typed errors.
"""

from __future__ import annotations

import contextvars
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator
from contextlib import (
    AbstractAsyncContextManager,
    AbstractContextManager,
    asynccontextmanager,
    contextmanager,
)
from typing import TYPE_CHECKING, Any, Generic, ParamSpec, TypeVar

import httpx

if TYPE_CHECKING:
    from .results import Completion
    from .streams import AsyncCompletionStream, CompletionStream

__all__ = [
    "AsyncWithRawResponse",
    "AsyncWithStreamingResponse",
    "RawResponse",
    "StreamingResponse",
    "WithRawResponse",
    "WithStreamingResponse",
]

P = ParamSpec("P")
T = TypeVar("T")

RAW: contextvars.ContextVar[bool] = contextvars.ContextVar("wrapper_raw_response", default=False)
"""Set while a ``with_raw_response`` call runs: the client then returns the ``RawResponse``."""


class _HTTP:
    """What every raw response says of the HTTP response it holds."""

    def __init__(self, response: httpx.Response) -> None:
        self.http_response = response

    @property
    def status_code(self) -> int:
        return self.http_response.status_code

    @property
    def headers(self) -> httpx.Headers:
        """The response's headers (case-insensitive)."""
        return self.http_response.headers

    @property
    def request_id(self) -> str | None:
        """The response's ``x-request-id`` (quote it to the vendor's support)."""
        request_id: str | None = self.http_response.headers.get("x-request-id")
        return request_id


class RawResponse(_HTTP):
    """A finished call's HTTP response: status, headers, request id, ``content`` and ``parse()``."""

    def __init__(self, response: httpx.Response, completion: Completion) -> None:
        super().__init__(response)
        self._completion = completion

    @property
    def content(self) -> bytes:
        """The body's bytes, as received (decompressed)."""
        return self.http_response.content

    def parse(self) -> Completion:
        """The ``Completion`` the call returns without ``with_raw_response``."""
        return self._completion


S = TypeVar("S", "CompletionStream", "AsyncCompletionStream")


class StreamingResponse(_HTTP, Generic[S]):
    """A stream's HTTP response once it began: ``status_code``, ``headers``, ``request_id``, ``parse()``."""

    def __init__(self, response: httpx.Response, stream: S) -> None:
        super().__init__(response)
        self._stream: S = stream

    def parse(self) -> S:
        """The stream of chunks (read it inside the ``with`` block)."""
        return self._stream


def raw(complete: Callable[P, Completion]) -> Callable[P, RawResponse]:
    """``complete`` returning its ``RawResponse`` instead (sync)."""

    def call(*args: P.args, **kwargs: P.kwargs) -> RawResponse:
        token = RAW.set(True)
        try:
            result: Any = complete(*args, **kwargs)
        finally:
            RAW.reset(token)
        return result  # type: ignore[no-any-return]

    return call


def araw(
    complete: Callable[P, Coroutine[Any, Any, Completion]],
) -> Callable[P, Coroutine[Any, Any, RawResponse]]:
    """``complete`` returning its ``RawResponse`` instead (async)."""

    async def call(*args: P.args, **kwargs: P.kwargs) -> RawResponse:
        token = RAW.set(True)
        try:
            result: Any = await complete(*args, **kwargs)
        finally:
            RAW.reset(token)
        return result  # type: ignore[no-any-return]

    return call


def streaming(
    stream: Callable[P, CompletionStream],
) -> Callable[P, AbstractContextManager[StreamingResponse[CompletionStream]]]:
    """``stream`` as a context manager of its ``StreamingResponse``, opened on entry (sync)."""

    @contextmanager
    def call(*args: P.args, **kwargs: P.kwargs) -> Iterator[StreamingResponse[CompletionStream]]:
        with stream(*args, **kwargs) as chunks:
            yield StreamingResponse(chunks.open(), chunks)

    return call


def astreaming(
    stream: Callable[P, AsyncCompletionStream],
) -> Callable[P, AbstractAsyncContextManager[StreamingResponse[AsyncCompletionStream]]]:
    """``stream`` as an async context manager of its ``StreamingResponse``, opened on entry."""

    @asynccontextmanager
    async def call(
        *args: P.args, **kwargs: P.kwargs
    ) -> AsyncIterator[StreamingResponse[AsyncCompletionStream]]:
        async with stream(*args, **kwargs) as chunks:
            yield StreamingResponse(await chunks.open(), chunks)

    return call


class WithRawResponse:
    """``client.with_raw_response``: the client's calls, returning the HTTP response under the result."""

    complete: Callable[..., RawResponse]
    """``client.complete``, the same arguments, returning its ``RawResponse``."""

    def __init__(self, client: Any) -> None:
        self.complete = raw(getattr(client, "complete"))  # noqa: B009


class AsyncWithRawResponse:
    """``client.with_raw_response`` of an async client."""

    complete: Callable[..., Awaitable[RawResponse]]
    """``client.complete``, the same arguments, returning (awaited) its ``RawResponse``."""

    def __init__(self, client: Any) -> None:
        self.complete = araw(getattr(client, "complete"))  # noqa: B009


class WithStreamingResponse:
    """``client.with_streaming_response``: the client's ``stream`` as a context manager of its
    ``StreamingResponse``, whose status and headers are known before the first chunk is read."""

    stream: Callable[..., AbstractContextManager[StreamingResponse[CompletionStream]]]
    """``with client.with_streaming_response.stream(...) as response:``, the arguments of ``stream``."""

    def __init__(self, client: Any) -> None:
        self.stream = streaming(getattr(client, "stream"))  # noqa: B009


class AsyncWithStreamingResponse:
    """``client.with_streaming_response`` of an async client."""

    stream: Callable[..., AbstractAsyncContextManager[StreamingResponse[AsyncCompletionStream]]]
    """``async with client.with_streaming_response.stream(...) as response:``, the arguments of ``stream``."""

    def __init__(self, client: Any) -> None:
        self.stream = astreaming(getattr(client, "stream"))  # noqa: B009
