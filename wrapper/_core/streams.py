"""What ``stream(...)`` returns: ``CompletionStream`` (sync) and ``AsyncCompletionStream``.

Each is an iterator (async iterator) of ``CompletionChunk`` and a context manager that closes the
connection when left. It wraps a generator whose first item is the HTTP response, once the stream
has begun (``open()``: when its first chunk has come, since the request is retried until then), and
whose other items are the chunks. ``text_stream`` gives the text deltas alone, never an empty one;
``get_final_completion()`` reads what is left and returns the whole ``Completion``: the text
joined, the finish reason and counts of the last chunk (which carries them).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Generator, Iterator
from types import TracebackType
from typing import Any, Self

import httpx

from .results import Completion, CompletionChunk

__all__ = ["AsyncCompletionStream", "CompletionStream"]


def _joined(texts: list[str], last: CompletionChunk | None) -> Completion:
    """The ``Completion`` of a stream: its texts joined, the last chunk's finish reason and counts."""
    if last is None:
        raise RuntimeError("the stream ended without a chunk")
    return Completion(
        "".join(texts),
        last.finish_reason,
        last.prompt_tokens,
        last.response_tokens,
        None,
        raw=last._raw,
        headers=last._headers,
        route=last.route,
        cached=last.cached,
    )


class CompletionStream(Iterator[CompletionChunk]):
    """A completion as it is generated: iterate for chunks; ``with`` closes the connection when left."""

    def __init__(self, items: Generator[Any, None, None]) -> None:
        self._items = items
        self._texts: list[str] = []
        self._last: CompletionChunk | None = None
        self._response: httpx.Response | None = None

    def open(self) -> httpx.Response:
        """Send the request (if not yet): the stream's HTTP response, status checked, once its first
        chunk has come (until then, a failed request is retried)."""
        if self._response is None:
            first: httpx.Response = next(self._items)  # the generator's first item
            self._response = first
            return first
        return self._response

    def __next__(self) -> CompletionChunk:
        if self._response is None:
            self.open()
        chunk: CompletionChunk = next(self._items)  # every item after it
        self._texts.append(chunk.text)
        self._last = chunk
        return chunk

    def __iter__(self) -> Self:
        return self

    @property
    def text_stream(self) -> Iterator[str]:
        """The text deltas alone, as they come; never an empty one (the last chunk often has no text)."""
        return (chunk.text for chunk in self if chunk.text)

    def get_final_completion(self) -> Completion:
        """Read the rest of the stream; the whole completion (text joined, finish reason, counts)."""
        for _ in self:
            pass
        return _joined(self._texts, self._last)

    def close(self) -> None:
        """Close the connection (a stream read to its end is closed already)."""
        self._items.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class AsyncCompletionStream(AsyncIterator[CompletionChunk]):
    """The async ``CompletionStream``: ``async for`` chunks; leaving ``async with`` closes the connection."""

    def __init__(self, items: AsyncGenerator[Any, None]) -> None:
        self._items = items
        self._texts: list[str] = []
        self._last: CompletionChunk | None = None
        self._response: httpx.Response | None = None

    async def open(self) -> httpx.Response:
        """Send the request (if not yet): the stream's HTTP response, status checked, once its first
        chunk has come (until then, a failed request is retried)."""
        if self._response is None:
            first: httpx.Response = await anext(self._items)  # the generator's first item
            self._response = first
            return first
        return self._response

    async def __anext__(self) -> CompletionChunk:
        if self._response is None:
            await self.open()
        chunk: CompletionChunk = await anext(self._items)
        self._texts.append(chunk.text)
        self._last = chunk
        return chunk

    def __aiter__(self) -> Self:
        return self

    @property
    def text_stream(self) -> AsyncIterator[str]:
        """The text deltas alone, as they come; never an empty one (the last chunk often has no text)."""
        return (chunk.text async for chunk in self if chunk.text)

    async def get_final_completion(self) -> Completion:
        """Read the rest of the stream; the whole completion (text joined, finish reason, counts)."""
        async for _ in self:
            pass
        return _joined(self._texts, self._last)

    async def aclose(self) -> None:
        """Close the connection (a stream read to its end is closed already)."""
        await self._items.aclose()

    close = aclose

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()
