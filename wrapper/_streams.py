"""What ``stream(...)`` returns: ``CompletionStream`` (sync) and ``AsyncCompletionStream``.

Each is an iterator (async iterator) of ``CompletionChunk`` and a context manager that closes the
connection when left. It wraps a generator whose first item is the HTTP response, once the stream
has begun (``open()``), and whose other items are the chunks. ``text_stream`` gives the text deltas
alone; ``get_final_completion()`` reads what is left and returns the whole ``Completion``: the text
joined, the finish reason and counts the last chunks carried.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Generator, Iterator
from types import TracebackType
from typing import Self, cast

import httpx

from ._results import Completion, CompletionChunk

__all__ = ["AsyncCompletionStream", "CompletionStream"]


class _Parts:
    """The pieces of a stream seen so far, to join into its ``Completion``."""

    def __init__(self) -> None:
        self.texts: list[str] = []
        self.last: CompletionChunk | None = None
        self.finish: CompletionChunk | None = None

    def add(self, chunk: CompletionChunk) -> CompletionChunk:
        self.texts.append(chunk.text)
        self.last = chunk
        if chunk.finish_reason is not None:
            self.finish = chunk
        return chunk

    def completion(self) -> Completion:
        last, final = self.last, self.finish or self.last
        if last is None or final is None:
            raise RuntimeError("the stream ended without a chunk")
        return Completion(
            "".join(self.texts),
            final.finish_reason,
            final.prompt_tokens,
            final.response_tokens,
            None,
            raw=final._raw,
            headers=last._headers,
        )


class CompletionStream(Iterator[CompletionChunk]):
    """A completion as it is generated: iterate for chunks; ``with`` closes the connection when left."""

    def __init__(self, items: Generator[httpx.Response | CompletionChunk, None, None]) -> None:
        self._chunks = items
        self._parts = _Parts()
        self._response: httpx.Response | None = None

    def open(self) -> httpx.Response:
        """Send the request (if not yet): the stream's HTTP response, its status checked."""
        if self._response is None:
            self._response = cast(httpx.Response, next(self._chunks))
        return self._response

    def __next__(self) -> CompletionChunk:
        if self._response is None:
            self.open()
        return self._parts.add(cast(CompletionChunk, next(self._chunks)))

    def __iter__(self) -> Self:
        return self

    @property
    def text_stream(self) -> Iterator[str]:
        """The text deltas alone, as they come."""
        return (chunk.text for chunk in self)

    def get_final_completion(self) -> Completion:
        """Read the rest of the stream; the whole completion (text joined, finish reason, counts)."""
        for _ in self:
            pass
        return self._parts.completion()

    def close(self) -> None:
        """Close the connection (a stream read to its end is closed already)."""
        self._chunks.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class AsyncCompletionStream(AsyncIterator[CompletionChunk]):
    """The async ``CompletionStream``: ``async for`` chunks; leaving ``async with`` closes the connection."""

    def __init__(self, items: AsyncGenerator[httpx.Response | CompletionChunk, None]) -> None:
        self._chunks = items
        self._parts = _Parts()
        self._response: httpx.Response | None = None

    async def open(self) -> httpx.Response:
        """Send the request (if not yet): the stream's HTTP response, its status checked."""
        if self._response is None:
            self._response = cast(httpx.Response, await anext(self._chunks))
        return self._response

    async def __anext__(self) -> CompletionChunk:
        if self._response is None:
            await self.open()
        return self._parts.add(cast(CompletionChunk, await anext(self._chunks)))

    def __aiter__(self) -> Self:
        return self

    @property
    def text_stream(self) -> AsyncIterator[str]:
        """The text deltas alone, as they come."""
        return (chunk.text async for chunk in self)

    async def get_final_completion(self) -> Completion:
        """Read the rest of the stream; the whole completion (text joined, finish reason, counts)."""
        async for _ in self:
            pass
        return self._parts.completion()

    async def aclose(self) -> None:
        """Close the connection (a stream read to its end is closed already)."""
        await self._chunks.aclose()

    close = aclose

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()
