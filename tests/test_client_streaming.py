"""Scale's SSE streaming, sync and async: deltas, final chunk, error events, early close, cut connections."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
from helpers import LocalServer, collect, drain, json_reply, scale_body, sse_reply

from wrapper import CompletionChunk
from wrapper.errors import (
    APIConnectionError,
    APIResponseValidationError,
    APIStatusError,
    InternalServerError,
    RateLimitError,
    UnprocessableEntityError,
)

pytestmark = pytest.mark.usefixtures("library")  # every test on httpx and on httpx2


def data(text: str, **extra: Any) -> str:
    return "data: " + json.dumps({"completions": [["prompt", [text]]], **extra})


EVENTS = [
    ": a comment",
    data("Hel"),
    data("lo"),
    "data:",  # an event without data is skipped
    data("!", finish_reason="stop", prompt_tokens=3, response_tokens=3),
]


class EventStream(httpx.SyncByteStream, httpx.AsyncByteStream):
    """A response body of server-sent events that may fail after them and records being closed."""

    def __init__(self, events: list[str], fail: Exception | None = None) -> None:
        self.events, self.fail = events, fail
        self.sent = 0
        self.closed = False

    def _pieces(self) -> Iterator[bytes]:
        for event in self.events:
            self.sent += 1
            yield (event + "\n\n").encode()
        if self.fail is not None:
            raise self.fail

    def __iter__(self) -> Iterator[bytes]:
        yield from self._pieces()

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for piece in self._pieces():
            yield piece

    def close(self) -> None:
        self.closed = True

    async def aclose(self) -> None:
        self.closed = True


class Streamer:
    """A MockTransport handler: answers with ``before`` responses first, then the event stream."""

    def __init__(self, stream: EventStream, *before: httpx.Response) -> None:
        self.stream, self.before = stream, list(before)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if self.before:
            return self.before.pop(0)
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, stream=self.stream)


async def first_then_close(stream: Any) -> CompletionChunk:
    """Take one chunk, then close the iterator the way a caller that stops early should."""
    if hasattr(stream, "__anext__"):
        chunk = await stream.__anext__()
        await stream.aclose()
    else:
        chunk = next(stream)
        stream.close()
    return chunk


async def test_deltas_then_the_final_chunk(make_client: Any, mode: str) -> None:
    handler = Streamer(EventStream(EVENTS))
    client = make_client("scale", mode, handler)
    chunks = await collect(client.stream("my/model", "Say hello", max_tokens=5, temperature=0))
    assert [c.text for c in chunks] == ["Hel", "lo", "!"]
    assert "".join(c.text for c in chunks) == "Hello!"
    assert [c.finish_reason for c in chunks] == [None, None, "stop"]
    assert (chunks[-1].prompt_tokens, chunks[-1].response_tokens) == (3, 3)
    assert (chunks[0].prompt_tokens, chunks[0].response_tokens) == (None, None)
    request = handler.requests[0]
    assert json.loads(request.content) == {
        "prompt": "Say hello",
        "max_tokens": 5,
        "temperature": 0,
        "stream": True,
    }
    assert request.headers["accept"] == "text/event-stream"
    assert request.url.raw_path == b"/api/v4/models/my%2Fmodel/completions"
    assert handler.stream.closed


@pytest.mark.parametrize(
    ("payload", "cls", "status"),
    [
        ('{"status_code": 429, "detail": "slow down"}', RateLimitError, 429),
        ('{"detail": "generation crashed"}', InternalServerError, 500),
        ("the model fell over", InternalServerError, 500),
        (
            '{"status": 422, "detail": [{"loc": ["body", "prompt"], "msg": "too long", "type": "too_long"}]}',
            UnprocessableEntityError,
            422,
        ),
    ],
)
async def test_an_error_event_raises_its_typed_error(
    make_client: Any, mode: str, payload: str, cls: type[APIStatusError], status: int
) -> None:
    stream = EventStream([data("partial"), f"event: error\ndata: {payload}", data("never")])
    client = make_client("scale", mode, Streamer(stream))
    received: list[str] = []
    with pytest.raises(APIStatusError) as caught:
        await drain(client.stream("m", "p"), received)
    assert type(caught.value) is cls
    assert caught.value.status_code == status
    assert received == ["partial"]
    assert stream.closed
    if cls is UnprocessableEntityError:
        assert caught.value.errors == [(("body", "prompt"), "too long", "too_long")]  # type: ignore[attr-defined]


async def test_closing_early_closes_the_connection(make_client: Any, mode: str) -> None:
    stream = EventStream(EVENTS)
    client = make_client("scale", mode, Streamer(stream))
    chunk = await first_then_close(client.stream("m", "p"))
    assert chunk.text == "Hel"
    assert stream.closed
    assert stream.sent < len(EVENTS)


async def test_a_cut_connection_raises_and_is_not_retried(
    make_client: Any, sleeps: list[float], mode: str
) -> None:
    stream = EventStream(EVENTS[:2], fail=httpx.ReadError("connection reset by peer"))
    handler = Streamer(stream)
    client = make_client("scale", mode, handler)
    received: list[str] = []
    with pytest.raises(APIConnectionError):
        await drain(client.stream("m", "p"), received)
    assert received == ["Hel"]
    assert (len(handler.requests), sleeps) == (1, [])


async def test_an_error_status_before_the_stream_is_retried(
    make_client: Any, sleeps: list[float], mode: str
) -> None:
    handler = Streamer(
        EventStream(EVENTS),
        httpx.Response(503, text="busy"),
        httpx.Response(429, headers={"retry-after": "2"}),
    )
    chunks = await collect(make_client("scale", mode, handler).stream("m", "p"))
    assert "".join(c.text for c in chunks) == "Hello!"
    assert len(handler.requests) == 3
    assert sleeps[1] == 2.0


async def test_a_response_that_is_not_an_event_stream(make_client: Any, mode: str) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json=scale_body())

    with pytest.raises(APIResponseValidationError, match="event stream") as caught:
        await collect(make_client("scale", mode, handler).stream("m", "p"))
    assert json.loads(caught.value.text) == scale_body()


@pytest.mark.parametrize("bad", ["{not json", '{"finish_reason": "stop"}', '{"completions": [["p", [1]]]}'])
async def test_a_malformed_event(make_client: Any, mode: str, bad: str) -> None:
    client = make_client("scale", mode, Streamer(EventStream([data("ok"), "data: " + bad])))
    with pytest.raises(APIResponseValidationError) as caught:
        await collect(client.stream("m", "p"))
    assert caught.value.text == bad


async def test_arguments_are_checked_when_stream_is_called(make_client: Any, mode: str) -> None:
    handler = Streamer(EventStream(EVENTS))
    client = make_client("scale", mode, handler)
    with pytest.raises(ValueError, match="temperature"):
        client.stream("m", "p", temperature=3)
    with pytest.raises(ValueError, match="max_generated_token_count"):
        make_client("gradient", mode, handler).stream("m", "q", max_generated_token_count=0)
    assert handler.requests == []


# --- over a real socket (the async client on its default aiohttp transport) -----------------------------


async def test_stream_over_a_socket(make_client: Any, server: LocalServer, mode: str) -> None:
    server.script(sse_reply(EVENTS))
    chunks = await collect(make_client("scale", mode, base_url=server.url).stream("m", "p", max_tokens=3))
    assert [(c.text, c.finish_reason) for c in chunks] == [("Hel", None), ("lo", None), ("!", "stop")]
    assert server.requests[0][3] == {"prompt": "p", "max_tokens": 3, "stream": True}


async def test_closing_early_over_a_socket_closes_the_connection(
    make_client: Any, server: LocalServer, mode: str
) -> None:
    server.script(sse_reply(EVENTS[:2], then="hold"))
    client = make_client("scale", mode, base_url=server.url)
    assert (await first_then_close(client.stream("m", "p"))).text == "Hel"
    assert await asyncio.to_thread(server.disconnected.wait, 5)  # not blocking the loop that closes it


async def test_a_cut_over_a_socket(
    make_client: Any, sleeps: list[float], server: LocalServer, mode: str
) -> None:
    server.script(sse_reply(EVENTS[:3], then="cut"), json_reply(200, scale_body("must not be asked")))
    client = make_client("scale", mode, base_url=server.url)
    received: list[str] = []
    with pytest.raises(APIConnectionError):
        await drain(client.stream("m", "p"), received)
    assert received == ["Hel", "lo"]
    assert (len(server.requests), sleeps) == (1, [])


async def test_module_level_stream(
    server: LocalServer, monkeypatch: pytest.MonkeyPatch, clean_env: None
) -> None:
    import wrapper.scale

    monkeypatch.setenv("SGP_API_KEY", "k")
    monkeypatch.setenv("SGP_CLIENT_BASE_URL", server.url)
    server.script(sse_reply(EVENTS))
    try:
        assert "".join(c.text for c in wrapper.scale.stream("m", "p")) == "Hello!"
    finally:
        wrapper.scale._default.close()


async def test_a_wrong_content_type_whose_body_breaks(make_client: Any, mode: str) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        body = EventStream(['{"completions": '], fail=httpx.RemoteProtocolError("peer closed connection"))
        return httpx.Response(200, headers={"content-type": "application/json"}, stream=body)

    with pytest.raises(APIConnectionError):
        await collect(make_client("scale", mode, handler, max_retries=0).stream("m", "p"))
