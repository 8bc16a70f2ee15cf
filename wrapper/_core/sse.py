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

import itertools
from collections.abc import AsyncGenerator, AsyncIterator, Iterator
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
    leading BOM dropped, then a blank line."""

    def __init__(self, response: httpx.Response) -> None:
        response.encoding = "utf-8"
        self.headers = response.headers
        self._response = response

    def iter_text(self) -> Iterator[str]:
        # httpx yields no empty text, so the first piece holds the whole BOM even if split across reads
        texts = self._response.iter_text()
        first = next(texts, "").removeprefix(_BOM)
        return itertools.chain((first,), texts, (_END,))  # no generator of ours: a stream's hot path

    async def aiter_text(self) -> AsyncIterator[str]:
        texts = self._response.aiter_text()
        yield (await anext(texts, "")).removeprefix(_BOM)
        async for text in texts:
            yield text
        yield _END


def _source(response: httpx.Response) -> EventSource:
    return EventSource(cast("httpx.Response", _Body(response)))


def _read(event: ServerSentEvent) -> bool | None:
    """Whether the clients read ``event`` (a chunk's or an error's) or skip it; None at ``[DONE]``."""
    name = event.event
    if name in _DATA:
        return None if event.data == _DONE else True
    return name == "error"


def events(response: httpx.Response) -> Iterator[ServerSentEvent]:
    """The completion and error events of a stream's body, up to its end or a ``data: [DONE]``."""
    for event in _source(response).iter_sse():
        if (read := _read(event)) is None:
            return
        if read:
            yield event


async def aevents(response: httpx.Response) -> AsyncGenerator[ServerSentEvent]:
    """``events`` of an async response."""
    async with aclosing(_source(response).aiter_sse()) as sse:  # at [DONE] too, not when collected
        async for event in sse:
            if (read := _read(event)) is None:
                return
            if read:
                yield event
