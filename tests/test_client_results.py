"""Response metadata on results: ``request_id`` and ``headers``, on each lane, for complete and streams."""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any

import httpx
import pytest
from helpers import GRADIENT_BODY, LocalServer, call, collect, json_reply, scale_body, sse_reply

from wrapper import Completion

pytestmark = pytest.mark.usefixtures("library")  # every test on httpx and on httpx2

EVENTS = [
    'data: {"completions": [["p", ["Hel"]]]}',
    'data: {"completions": [["p", ["lo"]]], "finish_reason": "stop", "response_tokens": 2}',
]


async def test_complete_carries_the_request_id_and_headers(
    make_client: Any, server: LocalServer, lane: str
) -> None:
    server.script(json_reply(200, scale_body(), {"X-Request-Id": "req-123", "X-Multi": "a"}))
    result = await call(make_client("scale", lane, base_url=server.url).complete("m", "p"))
    assert result.request_id == "req-123"
    assert result.headers["x-request-id"] == result.headers["X-REQUEST-ID"] == "req-123"
    assert result.headers["content-type"] == "application/json"
    assert "X-Multi" in result.headers
    assert not isinstance(result.headers, MutableMapping)
    with pytest.raises(TypeError):
        result.headers["x-request-id"] = "other"  # type: ignore[index]


async def test_repeated_headers_are_joined_as_httpx_does(
    make_client: Any, server: LocalServer, lane: str
) -> None:
    def reply(handler: Any) -> None:
        handler.send_response(200)
        for value in ("a", "b"):
            handler.send_header("x-multi", value)
        content = b'{"finishReason": "stop", "generatedOutput": "yes"}'
        handler.send_header("content-length", str(len(content)))
        handler.end_headers()
        handler.wfile.write(content)

    server.script(reply)
    result = await call(make_client("gradient", lane, base_url=server.url + "/api").complete("m", "q"))
    assert result.headers["x-multi"] == "a, b"
    assert result.request_id is None


async def test_a_stream_carries_them_to_its_last_chunk(
    make_client: Any, server: LocalServer, lane: str
) -> None:
    server.script(
        sse_reply(EVENTS),
        json_reply(200, GRADIENT_BODY, {"x-request-id": "req-g"}),
    )
    chunks = await collect(make_client("scale", lane, base_url=server.url).stream("m", "p"))
    assert chunks[-1].finish_reason == "stop"
    assert chunks[-1].headers["content-type"] == "text/event-stream"
    gradient = make_client("gradient", lane, base_url=server.url + "/api")
    (chunk,) = await collect(gradient.stream("m", "q"))
    assert (chunk.request_id, chunk.headers["X-Request-ID"]) == ("req-g", "req-g")


async def test_a_stream_request_id(make_client: Any, mode: str) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        body = "".join(event + "\n\n" for event in EVENTS)
        return httpx.Response(
            200, headers={"content-type": "text/event-stream", "x-request-id": "s-1"}, text=body
        )

    chunks = await collect(make_client("scale", mode, handler).stream("m", "p"))
    assert [c.request_id for c in chunks] == ["s-1", "s-1"]


def test_results_built_by_hand_have_no_headers() -> None:
    result = Completion("t", "stop", None, None, None, raw=None)  # type: ignore[arg-type]
    assert (result.request_id, dict(result.headers)) == (None, {})
    assert result == Completion("t", "stop", None, None, None, raw=None)  # type: ignore[arg-type]
