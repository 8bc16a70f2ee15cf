"""Streams that broke for users of other SDKs, each on a loopback server that misbehaves that way, on
the sync client and on the async client with each transport (``lane``): a body that outlives the
deadline, a body that ends without its final chunk, SSE framing (named events, a byte order mark,
``[DONE]``), and a stream cut before its first chunk."""

from __future__ import annotations

import asyncio
import pickle
import ssl
import time
from typing import Any

import httpx
import pytest
import trustme
from helpers import LocalServer, collect, drain, final, json_reply, scale_body, sse_data, sse_reply

from wrapper.errors import (
    APIConnectionError,
    APITimeoutError,
    IncompleteStreamError,
    InternalServerError,
)

pytestmark = [
    pytest.mark.usefixtures("library"),  # every test on httpx and on httpx2
    pytest.mark.long("serial"),  # 37 s of one process in the serial part (its deadlines run out)
]

FINAL = sse_data("!", finish_reason="stop", prompt_tokens=3, response_tokens=3)
EVENTS = [sse_data("Hel"), sse_data("lo"), FINAL]
NOT_ASKED = json_reply(200, scale_body("must not be asked"))


def on(server: LocalServer, make_client: Any, lane: str, **options: Any) -> Any:
    return make_client("scale", lane, base_url=server.url, **options)


# --- the deadline bounds the body -------------------------------------------------------------------

DEADLINE = 1.0  # each test below waits it out: the bounds' margins are in absolute seconds (+1.0, -0.1)
BODIES = {
    "keep-alive comments from the start": sse_reply([], then="hold"),
    "keep-alive comments after a chunk": sse_reply([sse_data("Hel")], then="hold"),
    "a chunk every quarter second": sse_reply([sse_data("Hel"), *[0.25, sse_data("lo")] * 20]),
    "a stall after 0.75 s": sse_reply([sse_data("Hel"), 0.75, sse_data("lo")], then="stall"),
}
TLS_DEADLINE = 2.0
"""Over TLS: "lo" comes 0.5 s after "Hel", well inside it however slow the handshake on a busy machine."""


@pytest.mark.serial
@pytest.mark.parametrize("body", list(BODIES))
async def test_the_deadline_bounds_the_body(
    make_client: Any, lane: str, server: LocalServer, body: str
) -> None:
    server.script(BODIES[body], NOT_ASKED)
    client = on(server, make_client, lane, deadline=DEADLINE)
    received: list[str] = []
    started = time.monotonic()
    with pytest.raises(APITimeoutError) as caught:
        await drain(client.stream("m", "p"), received)
    took = time.monotonic() - started
    assert DEADLINE - 0.1 <= took < DEADLINE + 1.0, took
    message = str(caught.value)
    assert message.count(f"deadline of {DEADLINE:g} s ran out") == 1, message  # said once, not wrapped
    assert ("before the stream's first chunk" in message) == ("from the start" in body), message
    assert len(server.requests) == 1
    if "from the start" not in body:
        assert received[0] == "Hel"
    if "chunk every" not in body:  # the client closed the connection, and the server saw it go
        assert await asyncio.to_thread(server.disconnected.wait, 5)


@pytest.mark.serial
async def test_the_deadline_bounds_a_stalled_body_over_tls(
    make_client: Any, lane: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the sync client shuts the socket under the TLS layer down: its reader sees the end, not an error
    ca = trustme.CA()
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(server_context)
    with ca.cert_pem.tempfile() as ca_file:
        monkeypatch.setenv("SSL_CERT_FILE", ca_file)
        server = LocalServer(tls=server_context)
        server.start()
        try:
            # "lo" comes well inside the deadline (TLS_DEADLINE); then the body stalls
            server.script(sse_reply([sse_data("Hel"), 0.5, sse_data("lo")], then="stall"))
            trusting = ssl.create_default_context(cafile=ca_file)
            options = {"http_client": httpx.AsyncClient(verify=trusting)} if lane == "httpx" else {}
            client = make_client("scale", lane, base_url=server.url, deadline=TLS_DEADLINE, **options)
            received: list[str] = []
            started = time.monotonic()
            with pytest.raises(APITimeoutError, match="deadline"):
                await drain(client.stream("m", "p"), received)
            assert time.monotonic() - started < TLS_DEADLINE + 1.0
            assert received == ["Hel", "lo"]
            assert await asyncio.to_thread(server.disconnected.wait, 5)
        finally:
            server.stop()


# --- a body must end with its final chunk ---------------------------------------------------------------


@pytest.mark.parametrize("ending", [[], ["data: [DONE]"]], ids=["end of body", "[DONE]"])
async def test_a_body_that_ends_without_its_final_chunk_raises(
    make_client: Any, lane: str, server: LocalServer, sleeps: list[float], ending: list[str]
) -> None:
    server.script(sse_reply([sse_data("Hel"), sse_data("lo"), *ending]), NOT_ASKED)
    received: list[str] = []
    with pytest.raises(IncompleteStreamError) as caught:
        await drain(on(server, make_client, lane).stream("m", "p"), received)
    assert isinstance(caught.value, APIConnectionError)
    assert caught.value.text == "".join(received) == "Hello"
    assert "without its final chunk" in str(caught.value)
    copy = pickle.loads(pickle.dumps(caught.value))  # as Ray sends it between processes
    assert (type(copy), copy.text, str(copy)) == (IncompleteStreamError, "Hello", str(caught.value))
    assert IncompleteStreamError.__module__ == "wrapper.errors"
    assert (len(server.requests), sleeps) == (1, [])  # chunks were delivered: never retried


async def test_get_final_completion_raises_for_a_body_without_its_final_chunk(
    make_client: Any, lane: str, server: LocalServer
) -> None:
    server.script(sse_reply([sse_data("Hel"), sse_data("lo")]), NOT_ASKED)
    with pytest.raises(IncompleteStreamError) as caught:
        await final(on(server, make_client, lane).stream("m", "p"))
    assert caught.value.text == "Hello"


@pytest.mark.parametrize("ending", [b"", b"\n", b"\r"], ids=["no line break", "LF", "CR"])
async def test_a_last_event_without_its_blank_line_is_read(
    make_client: Any, lane: str, server: LocalServer, ending: bytes
) -> None:
    server.script(sse_reply([sse_data("Hel"), FINAL.encode() + ending]))
    chunks = await collect(on(server, make_client, lane).stream("m", "p"))
    assert [(c.text, c.finish_reason, c.response_tokens) for c in chunks] == [
        ("Hel", None, None),
        ("!", "stop", 3),
    ]


# --- SSE framing -----------------------------------------------------------------------------------------


async def test_named_events_other_than_error_are_skipped(
    make_client: Any, lane: str, server: LocalServer
) -> None:
    server.script(
        sse_reply(
            [
                'event: ping\ndata: {"type": "ping"}',
                sse_data("Hel"),
                "event: progress\ndata: 50%",
                "event: message\n" + sse_data("lo"),  # "message" is the name of an unnamed event
                "event: ping",
                FINAL,
            ]
        )
    )
    chunks = await collect(on(server, make_client, lane).stream("m", "p"))
    assert [c.text for c in chunks] == ["Hel", "lo", "!"]


@pytest.mark.parametrize("split", [False, True], ids=["whole", "split across reads"])
async def test_a_byte_order_mark_before_the_first_event_is_dropped(
    make_client: Any, lane: str, server: LocalServer, split: bool
) -> None:
    bom, first = b"\xef\xbb\xbf", (EVENTS[0] + "\n\n").encode()
    start = [bom[:1], 0.05, bom[1:] + first] if split else [bom + first]
    server.script(sse_reply([*start, *EVENTS[1:]]))
    chunks = await collect(on(server, make_client, lane).stream("m", "p"))
    assert [c.text for c in chunks] == ["Hel", "lo", "!"]


async def test_an_event_stream_is_read_as_utf_8(make_client: Any, lane: str, server: LocalServer) -> None:
    # whatever charset it declares; a character split across reads is read whole, and a byte that is
    # not UTF-8 becomes U+FFFD (the rules for event streams), as it does at the body's very end
    first = 'data: {"completions": [["p", ["é☃"]]]}\n\n'.encode()  # not json.dumps, which escapes them
    cut = first.index("☃".encode()) + 1
    wrong = b'data: {"completions": [["p", ["a\xffb"]]]}\n\n'
    events = [first[:cut], 0.05, first[cut:], wrong, FINAL]
    server.script(sse_reply(events, content_type="text/event-stream; charset=iso-8859-1"))
    chunks = await collect(on(server, make_client, lane).stream("m", "p"))
    assert [c.text for c in chunks] == ["é☃", "a\ufffdb", "!"]


@pytest.mark.parametrize("done", ["data: [DONE]", "data:[DONE]"])
async def test_done_ends_the_stream(make_client: Any, lane: str, server: LocalServer, done: str) -> None:
    # after [DONE]: an event that is not a chunk, then keep-alive comments until the client leaves
    server.script(sse_reply([*EVENTS, done, "data: not a chunk"], then="hold"))
    completion = await final(on(server, make_client, lane).stream("m", "p"))
    assert (completion.text, completion.finish_reason) == ("Hello!", "stop")
    assert await asyncio.to_thread(server.disconnected.wait, 5)  # nothing after [DONE] was read


# --- retried until the first chunk, never after ------------------------------------------------------

BEFORE_THE_FIRST_CHUNK = {
    "cut after the headers": sse_reply([], then="cut"),
    "cut after a comment": sse_reply([": keep-alive"], then="cut"),
    "ended with no chunk": sse_reply([]),
    "an error event": sse_reply(['event: error\ndata: {"detail": "busy", "status_code": 503}']),
}


@pytest.mark.parametrize("failure", list(BEFORE_THE_FIRST_CHUNK))
async def test_a_stream_that_fails_before_its_first_chunk_is_retried(
    make_client: Any, lane: str, server: LocalServer, sleeps: list[float], failure: str
) -> None:
    server.script(BEFORE_THE_FIRST_CHUNK[failure], sse_reply(EVENTS))
    chunks = await collect(on(server, make_client, lane).stream("m", "p"))
    assert "".join(c.text for c in chunks) == "Hello!"
    assert (len(server.requests), len(sleeps)) == (2, 1)


async def test_a_stream_idle_before_its_first_chunk_is_retried(
    make_client: Any, lane: str, server: LocalServer, sleeps: list[float]
) -> None:
    server.script(sse_reply([], then="stall"), sse_reply(EVENTS))
    stream = on(server, make_client, lane, stream_idle_timeout=0.3).stream("m", "p")
    assert "".join(c.text for c in await collect(stream)) == "Hello!"
    assert (len(server.requests), len(sleeps)) == (2, 1)


@pytest.mark.parametrize(
    ("then", "raised"),
    [("cut", APIConnectionError), ("error", InternalServerError), ("end", IncompleteStreamError)],
)
async def test_a_stream_that_fails_after_a_chunk_is_not_retried(
    make_client: Any,
    lane: str,
    server: LocalServer,
    sleeps: list[float],
    then: str,
    raised: type[Exception],
) -> None:
    events = [sse_data("Hel")]
    if then == "error":
        events.append('event: error\ndata: {"detail": "busy", "status_code": 503}')
    server.script(sse_reply(events, then="cut" if then == "cut" else "end"), NOT_ASKED)
    received: list[str] = []
    with pytest.raises(raised):
        await drain(on(server, make_client, lane).stream("m", "p"), received)
    assert received == ["Hel"]
    assert (len(server.requests), sleeps) == (1, [])
