"""The sandbox's stream faults, each producing on purpose a stream failure seen in the field: the bytes it
sends, and what the clients (sync, and async on each transport) make of them."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from helpers import collect, final
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wrapper.errors import APITimeoutError, IncompleteStreamError
from wrapper.sandbox import Sandbox

pytestmark = pytest.mark.usefixtures("library")  # every test on httpx and on httpx2

MODEL = "llama-3-8b-instruct"
ASK = {"max_tokens": 6, "temperature": 0.0}  # greedy: the same text every time
BOM = b"\xef\xbb\xbf"


@pytest.fixture(scope="module")
def sb() -> Iterator[Sandbox]:
    with Sandbox(seed=0) as sandbox:
        yield sandbox


@pytest.fixture(autouse=True)
def _no_faults_left(sb: Sandbox) -> Iterator[None]:
    sb.clear_faults()
    sb.reset_stats()
    yield
    sb.clear_faults()


def on(sb: Sandbox, make_client: Any, lane: str, **options: Any) -> Any:
    return make_client("scale", lane, base_url=sb.scale_base_url, **options)


def faulted(fault: str) -> dict[str, Any]:
    return {**ASK, "extra_headers": {"x-sandbox-fault": fault}}


def body(sb: Sandbox, fault: str) -> bytes:
    """The raw body of a stream the sandbox sends with ``fault``."""
    url = f"{sb.scale_base_url}/v4/models/{MODEL}/completions"
    headers = {"x-api-key": "k", "x-sandbox-fault": fault}
    return httpx.post(url, json={"prompt": "Alice", "stream": True, **ASK}, headers=headers).content


def blocks(content: bytes) -> list[bytes]:
    return content.removeprefix(BOM).split(b"\n\n")


def test_the_bytes_of_each_stream_fault(sb: Sandbox) -> None:
    plain = blocks(body(sb, ""))
    assert plain[-1] == b""
    assert b"finish_reason" in plain[-2]
    assert body(sb, "bom") == BOM + body(sb, "")
    assert blocks(body(sb, "done")) == [*plain[:-1], b"data: [DONE]", b""]
    assert body(sb, "unterminated") == body(sb, "").removesuffix(b"\n\n")
    assert body(sb, "done;unterminated").endswith(b"}\n\ndata: [DONE]")
    pinged = blocks(body(sb, "event=ping"))[:-1]
    assert pinged[0::2] == [b'event: ping\ndata: {"type": "ping"}'] * (len(plain) - 1)
    assert pinged[1::2] == plain[:-1]
    assert blocks(body(sb, "end=2")) == [*plain[:2], b""]
    assert body(sb, "end=0") == b""
    assert b"\n\n: keep-alive\n\n" in body(sb, "pace=0.05;keepalive=0.01")


def test_a_stall_sends_its_chunks_then_only_comments(sb: Sandbox) -> None:
    url = f"{sb.scale_base_url}/v4/models/{MODEL}/completions"
    headers = {"x-api-key": "k", "x-sandbox-fault": "stall=2;keepalive=0.02"}
    received = b""
    with httpx.stream("POST", url, json={"prompt": "Alice", "stream": True, **ASK}, headers=headers) as r:
        for piece in r.iter_bytes():
            received += piece
            if received.count(b": keep-alive") >= 5:
                break
    data, comments = received.split(b": keep-alive\n\n", 1)
    assert blocks(data) == [*blocks(body(sb, ""))[:2], b""]
    assert set(comments.split(b"\n\n")) <= {b": keep-alive", b""}


@pytest.mark.parametrize(
    "fault", ["bom", "done", "event=ping", "unterminated", "done;unterminated", "bom;event=ping;done"]
)
async def test_a_stream_framed_oddly_reads_as_a_plain_one(
    make_client: Any, lane: str, sb: Sandbox, fault: str
) -> None:
    client = on(sb, make_client, lane)
    plain = await final(client.stream(MODEL, "Alice", **ASK))
    odd = await final(client.stream(MODEL, "Alice", **faulted(fault)))
    assert (odd.text, odd.finish_reason, odd.response_tokens) == (
        plain.text,
        plain.finish_reason,
        plain.response_tokens,
    )


async def test_a_stream_ended_early_raises_with_its_text(make_client: Any, lane: str, sb: Sandbox) -> None:
    client = on(sb, make_client, lane)
    chunks = [chunk.text for chunk in await collect(client.stream(MODEL, "Alice", **ASK))]
    sb.reset_stats()
    with pytest.raises(IncompleteStreamError) as caught:
        await final(client.stream(MODEL, "Alice", **faulted("end=2")))
    assert caught.value.text == "".join(chunks[:2])
    assert sb.stats().requests == 1  # chunks were delivered: not retried


async def test_a_stream_ended_before_its_first_chunk_is_retried(
    make_client: Any, lane: str, sb: Sandbox
) -> None:
    client = on(sb, make_client, lane)
    plain = await final(client.stream(MODEL, "Alice", **ASK))
    sb.reset_stats()
    sb.inject(end=0, count=1)
    assert (await final(client.stream(MODEL, "Alice", **ASK))).text == plain.text
    assert sb.stats().requests == 2


@pytest.mark.serial
async def test_a_stall_with_keep_alive_comments_ends_at_the_deadline(
    make_client: Any, lane: str, sb: Sandbox
) -> None:
    client = on(sb, make_client, lane, deadline=1.0)
    started = time.monotonic()
    with pytest.raises(APITimeoutError, match="deadline"):
        await final(client.stream(MODEL, "Alice", **faulted("stall=2;keepalive=0.05")))
    assert time.monotonic() - started < 2.0


async def test_a_silent_stall_trips_the_idle_timeout(make_client: Any, lane: str, sb: Sandbox) -> None:
    client = on(sb, make_client, lane, stream_idle_timeout=0.3, max_retries=0)
    with pytest.raises(APITimeoutError, match="stream_idle_timeout"):
        await final(client.stream(MODEL, "Alice", **faulted("stall=1")))


FRAMING = st.lists(
    st.sampled_from(["bom", "done", "unterminated", "event=ping", "event=progress", "keepalive=0.001"]),
    unique=True,
) | st.builds(lambda end, more: [f"end={end}", *more], st.integers(0, 8), st.lists(st.just("done")))


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(framing=FRAMING, pace=st.sampled_from(["", "pace=0.002"]))
async def test_any_framing_gives_the_text_or_an_incomplete_stream_with_part_of_it(
    make_client: Any, lane: str, sb: Sandbox, framing: list[str], pace: str
) -> None:
    client = on(sb, make_client, lane, max_retries=0)
    plain = await final(client.stream(MODEL, "Alice", **ASK))
    fault = ";".join([*framing, pace])
    if any(item.startswith("end=") for item in framing):
        with pytest.raises(IncompleteStreamError) as caught:
            await final(client.stream(MODEL, "Alice", **faulted(fault)))
        assert plain.text.startswith(caught.value.text)
    else:
        odd = await final(client.stream(MODEL, "Alice", **faulted(fault)))
        assert (odd.text, odd.finish_reason) == (plain.text, plain.finish_reason), fault
