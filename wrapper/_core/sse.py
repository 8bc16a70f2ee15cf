"""A stream's server-sent events as the clients read them: httpx-sse's parser, and what it leaves out.

httpx-sse splits a body into events by the WHATWG rules, with three gaps, filled here without a
parser of our own. It decodes the body in the charset the response declares, where the rules say an
event stream is always UTF-8; it keeps a leading byte order mark, which the rules say to drop (so the
first line's field name is not ``data`` and the first event is lost); and it drops a last event
that the body ends without its blank line. ``events``/``aevents`` hand it the body as UTF-8 with a
leading BOM dropped and a blank line after its end.

They yield only what a completion stream is made of: events with no name (or ``message``, the name
the rules give those) carry data, and ``error`` events an error; any other named event (``ping``,
``progress``, ...) is skipped, as the vendor's SDK skips it. A ``data: [DONE]`` event, which
OpenAI-style gateways send last, ends the stream: nothing after it is read.
"""

from __future__ import annotations

import codecs
import itertools
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterator
from contextlib import aclosing
from typing import TYPE_CHECKING, cast

from httpx_sse import EventSource, ServerSentEvent

if TYPE_CHECKING:
    import httpx

__all__ = ["aevents", "events"]

_DATA = frozenset({"", "message"})
"""The names of events that carry a chunk ("" is what httpx-sse reports for an event with none)."""
_DONE = "[DONE]"
_BOM = "\ufeff"
_END = "\n\n"
"""Appended to the body: ends a last event that lacks its blank line (and is nothing after one)."""


class _Body:
    """What ``EventSource`` reads of a response (its headers and text): the text as UTF-8 with a
    leading BOM dropped, then a blank line.

    The body's bytes (``iter_bytes``: content-decoded, counted, as mocks give them) are decoded here by
    one incremental UTF-8 decoder, not by ``iter_text``, whose decoder and chunker are two more Python
    steps and a generator for each read of a stream."""

    def __init__(self, response: httpx.Response) -> None:
        self.headers = response.headers
        self._response = response

    def iter_text(self) -> Iterator[str]:
        decode = _decoder()
        texts = filter(None, map(decode, self._response.iter_bytes()))  # no step of ours per read
        # no empty text, so the first holds the whole BOM even if it came split across reads
        first = next(texts, "").removeprefix(_BOM)
        return itertools.chain((first,), texts, _flushed(decode), (_END,))

    async def aiter_text(self) -> AsyncIterator[str]:
        decode = _decoder()
        pieces = self._response.aiter_bytes()
        async for piece in pieces:
            if text := decode(piece):
                yield text.removeprefix(_BOM)
                break
        async for piece in pieces:
            if text := decode(piece):
                yield text
        for text in _flushed(decode):
            yield text
        yield _END


def _decoder() -> Callable[..., str]:
    """An incremental UTF-8 decoder's ``decode``: a character split across reads is decoded whole, and
    bytes that are not UTF-8 become U+FFFD, as the rules for event streams say."""
    return codecs.getincrementaldecoder("utf-8")(errors="replace").decode


def _flushed(decode: Callable[..., str]) -> Iterator[str]:
    """What ``decode`` holds at the body's end (a character cut short: U+FFFD), if anything."""
    if text := decode(b"", True):
        yield text


def _source(response: httpx.Response) -> EventSource:
    return EventSource(cast("httpx.Response", _Body(response)))


def events(response: httpx.Response) -> Iterator[ServerSentEvent]:
    """The completion and error events of a stream's body, up to its end or a ``data: [DONE]``."""
    for event in _source(response).iter_sse():
        if event.event in _DATA:  # inline, as in ``aevents``: this runs once for each chunk
            if event.data == _DONE:
                return
            yield event
        elif event.event == "error":
            yield event


async def aevents(response: httpx.Response) -> AsyncGenerator[ServerSentEvent]:
    """``events`` of an async response."""
    async with aclosing(_source(response).aiter_sse()) as sse:  # at [DONE] too, not when collected
        async for event in sse:
            if event.event in _DATA:
                if event.data == _DONE:
                    return
                yield event
            elif event.event == "error":
                yield event
