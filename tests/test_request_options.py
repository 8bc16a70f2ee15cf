"""Request options on the constructor, ``with_options`` and each call; raw responses; stream helpers.

Against a scripted local server where the test needs to see what was sent or to script answers
(``x-should-retry``), against the sandbox where the answers are real (streams, delays, a slow model).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
from helpers import CLASSES, CREDENTIALS, ROOT, LocalServer, call, collect, echo_reply, json_reply, scale_body

from wrapper import RetryPolicy
from wrapper.errors import APITimeoutError, BadRequestError, InternalServerError
from wrapper.sandbox import Sandbox

SCALE = "llama-3-8b-instruct"


def scale(mode: str, url: str, **options: Any) -> Any:
    return CLASSES["scale"][mode == "async"](**CREDENTIALS["scale"], base_url=url, **options)


# --- extra_headers, extra_query, extra_body; the innermost wins ----------------------------------------


async def test_extras_reach_the_request_and_the_innermost_wins(
    make_client: Any, server: LocalServer, mode: str
) -> None:
    client = make_client("scale", mode, base_url=server.url).with_options(
        extra_headers={"X-Team": "search", "X-Trace": "client"}, extra_query={"region": "eu"}
    )
    await call(
        client.complete(
            "m",
            "p",
            max_tokens=3,
            extra_headers={"X-Trace": "call", "x-api-key": "stolen"},
            extra_query={"dry": True},
            extra_body={"max_tokens": 7, "new_vendor_field": {"on": 1}},
        )
    )
    await call(client.complete("m", "p"))
    (_, path, headers, body), (_, plain_path, plain_headers, plain_body) = server.requests
    assert path == "/v4/models/m/completions?region=eu&dry=true"
    assert (headers["x-team"], headers["x-trace"]) == ("search", "call")
    assert headers["x-api-key"] == CREDENTIALS["scale"]["api_key"]  # credentials always win
    assert body == {"prompt": "p", "max_tokens": 7, "new_vendor_field": {"on": 1}}  # extra_body over kwargs
    assert plain_path == "/v4/models/m/completions?region=eu"
    assert plain_headers["x-trace"] == "client"
    assert plain_body == {"prompt": "p"}


async def test_each_call_sends_its_own_headers_whatever_went_before_it(
    make_client: Any, server: LocalServer, lane: str, library: Any
) -> None:
    """A client's own pool takes the headers of its plain calls as its defaults (``CommonHeaders``): a
    call with more headers and a stream before the first plain call, a ``with_options`` copy's call and a
    plain call after it each send their own headers, no more and no fewer; a plain call sends what a
    new client's first call sends."""
    server.script(echo_reply)
    await call(make_client("scale", lane, base_url=server.url).complete("m", "p"))  # a new client's
    client = make_client("scale", lane, base_url=server.url)
    await call(client.complete("m", "p", extra_headers={"X-Trace": "call"}))
    await collect(client.stream("m", "p"))
    await call(client.complete("m", "p"))
    await call(client.with_options(extra_headers={"X-Team": "search"}).complete("m", "p"))
    await call(client.complete("m", "p"))
    first, traced, streamed, plain, team, again = (headers for _, _, headers, _ in server.requests)
    assert first["x-api-key"] == CREDENTIALS["scale"]["api_key"]
    assert plain == again == first
    assert traced == {**plain, "x-trace": "call"}
    assert team == {**plain, "x-team": "search"}
    assert streamed == {**plain, "accept": "text/event-stream", "content-length": streamed["content-length"]}


async def test_per_call_timeout_and_max_retries(
    make_client: Any, server: LocalServer, mode: str, sleeps: list[float]
) -> None:
    server.script(
        json_reply(503, {"detail": "busy"}),
        json_reply(503, {"detail": "busy"}),
        json_reply(200, scale_body()),
    )
    client = make_client("scale", mode, base_url=server.url, max_retries=5)
    with pytest.raises(InternalServerError):
        await call(client.complete("m", "p", max_retries=0))
    assert (await call(client.complete("m", "p", max_retries=1))).text == "Paris"
    assert len(server.requests) == 3
    assert len(sleeps) == 1


async def test_a_per_call_timeout_applies_to_that_call(sandbox: Sandbox, mode: str) -> None:
    sandbox.inject(delay=1.0, count=1, api="scale")
    client = scale(mode, sandbox.scale_base_url, max_retries=0)
    try:
        with pytest.raises(APITimeoutError):
            await call(client.complete(SCALE, "Alice", max_tokens=2, timeout=httpx.Timeout(5.0, read=0.2)))
        assert (await call(client.complete(SCALE, "Alice", max_tokens=2))).text
    finally:
        await call(client.close())


BAD_OPTIONS: list[tuple[dict[str, Any], str]] = [
    ({"timeout": -1}, "timeout must be"),
    ({"max_retries": -1}, "max_retries must be"),
    ({"deadline": 0}, "deadline must be"),
    ({"stream_idle_timeout": "1"}, "stream_idle_timeout must be"),
    ({"retry": 3}, "retry must be a wrapper.RetryPolicy"),
    ({"extra_headers": {"bad name": "v"}}, "extra_headers: 'bad name' is not a valid HTTP header name"),
    ({"extra_query": {"q": object()}}, r"extra_query\['q'\] must be"),
    ({"extra_body": [1]}, "extra_body must be a mapping"),
    ({"extra_body": {"x": object()}}, "extra_body must hold only values JSON can encode"),
    ({"extra_body": {"x": float("nan")}}, "extra_body must hold only values JSON can encode"),
]


@pytest.mark.usefixtures("clean_env")
@pytest.mark.parametrize(("options", "message"), BAD_OPTIONS)
async def test_bad_options_are_refused_naming_the_option(
    options: dict[str, Any], message: str, mode: str
) -> None:
    client = scale(mode, "https://scale.test")
    with pytest.raises(ValueError, match=message):
        client.with_options(**options)
    with pytest.raises(ValueError, match=message):
        await call(client.complete("m", "p", **options))


@pytest.mark.usefixtures("clean_env")
def test_an_unknown_option_and_a_bad_retry_policy_are_refused() -> None:
    client = scale("sync", "https://scale.test")
    with pytest.raises(
        TypeError,
        match=r"unknown option 'tiemout'; the options are cache, cache_read, .*, deadline, extra_body",
    ):
        client.with_options(tiemout=1)  # type: ignore[call-arg]
    with pytest.raises(ValueError, match=r"retry: max_backoff \(1\) must not be below initial_backoff \(2\)"):
        RetryPolicy(initial_backoff=2, max_backoff=1)
    with pytest.raises(ValueError, match="retry: statuses must be HTTP status codes"):
        RetryPolicy(statuses={99})
    with pytest.raises(ValueError, match="retry: jitter must be a number from 0 to 1"):
        RetryPolicy(jitter=2)


# --- retry control -------------------------------------------------------------------------------------


async def test_a_retry_policy_chooses_the_statuses_and_the_backoff(
    make_client: Any, server: LocalServer, mode: str, sleeps: list[float]
) -> None:
    policy = RetryPolicy(statuses={418}, initial_backoff=0.25, max_backoff=0.25, jitter=0)
    server.script(json_reply(418, {"detail": "teapot"}), json_reply(200, scale_body()))
    client = make_client("scale", mode, base_url=server.url, retry=policy, max_retries=3)
    assert (await call(client.complete("m", "p"))).text == "Paris"
    server.script(json_reply(503, {"detail": "busy"}))
    with pytest.raises(InternalServerError):
        await call(client.complete("m", "p"))  # 503 is not in this policy's statuses
    assert sleeps == [0.25]
    server.script(json_reply(503, {"detail": "busy"}), json_reply(200, scale_body()))
    assert (await call(client.complete("m", "p", retry=RetryPolicy()))).text == "Paris"  # per call


@pytest.mark.parametrize(("status", "header", "retried"), [(400, "true", True), (503, "false", False)])
async def test_the_servers_x_should_retry_overrides_the_status_rule(
    make_client: Any,
    server: LocalServer,
    mode: str,
    sleeps: list[float],
    status: int,
    header: str,
    retried: bool,
) -> None:
    server.script(
        json_reply(status, {"detail": "x"}, {"x-should-retry": header}), json_reply(200, scale_body())
    )
    client = make_client("scale", mode, base_url=server.url, max_retries=2)
    if retried:
        assert (await call(client.complete("m", "p"))).text == "Paris"
    else:
        with pytest.raises(InternalServerError):
            await call(client.complete("m", "p"))
    assert len(server.requests) == (2 if retried else 1)
    assert issubclass(BadRequestError, Exception)


# --- deadline and stream idle timeout ------------------------------------------------------------------


async def test_a_deadline_bounds_the_call_and_says_so(sandbox: Sandbox, mode: str) -> None:
    sandbox.inject(status=503, retry_after=5, count=3, api="scale")
    client = scale(mode, sandbox.scale_base_url, max_retries=3, deadline=2.0)
    try:
        with pytest.raises(  # a 5 s Retry-After cannot fit in 2 s: the 503 itself, at once
            InternalServerError, match=r"; the call's deadline of 2 s left no room to retry \("
        ) as caught:
            await call(client.complete(SCALE, "Alice"))
        assert caught.value.retry_after == 5
        sandbox.clear_faults()
        sandbox.inject(delay=2.0, count=1, api="scale")
        with pytest.raises(APITimeoutError, match=r"deadline of 0\.3 s ran out"):
            await call(client.complete(SCALE, "Alice", deadline=0.3))  # the attempt itself is cut to it
    finally:
        await call(client.close())


@pytest.mark.serial  # chunks within 0.3 s
async def test_a_stalled_stream_hits_its_idle_timeout_but_a_slow_first_answer_does_not(
    sandbox: Sandbox, mode: str
) -> None:
    client = scale(mode, sandbox.scale_base_url, max_retries=0, stream_idle_timeout=0.3)
    try:
        sandbox.inject(delay=0.6, count=1, api="scale")  # before the response: the read timeout's
        chunks = await collect(client.stream(SCALE, "Alice", max_tokens=4))
        assert chunks[-1].response_tokens == 4
        sandbox.inject(pace=1.0, count=1, api="scale")  # between chunks: the idle timeout's
        with pytest.raises(
            APITimeoutError, match=r"the stream sent nothing for 0.3 s \(stream_idle_timeout\)"
        ):
            await collect(client.stream(SCALE, "Alice", max_tokens=4))
    finally:
        await call(client.close())


@pytest.mark.serial  # an answer within a 1 s timeout
async def test_a_batch_applies_the_options_to_each_prompt(sandbox: Sandbox, mode: str) -> None:
    # The held answer outlives the timeout threefold, the other comes within it even on a busy machine
    # (0.3 s once timed out both: the other's thread and connection took longer to start, on 2 busy CPUs).
    sandbox.inject(delay=3.0, count=1, api="scale")
    client = scale(mode, sandbox.scale_base_url, max_retries=0)
    try:
        batch = client.complete_many(
            SCALE, ["a", "b"], return_exceptions=True, ordered=True, max_tokens=2, timeout=1.0
        )
        results = await collect(batch)
    finally:
        await call(client.close())
    assert sorted(type(r.error).__name__ for r in results) == ["APITimeoutError", "NoneType"]


# --- stream helpers ------------------------------------------------------------------------------------


async def test_a_stream_gives_its_text_and_its_final_completion(sandbox: Sandbox, mode: str) -> None:
    client = scale(mode, sandbox.scale_base_url)
    try:
        chunks = await collect(client.stream(SCALE, "Alice", max_tokens=6, temperature=0))
        texts = await collect(client.stream(SCALE, "Alice", max_tokens=6, temperature=0).text_stream)
        stream = client.stream(SCALE, "Alice", max_tokens=6, temperature=0)
        first = await call(anext(stream)) if mode == "async" else next(stream)
        final = await call(stream.get_final_completion())
    finally:
        await call(client.close())
    assert texts == [chunk.text for chunk in chunks if chunk.text]  # the last chunk has none
    assert first.text == chunks[0].text
    assert final.text == "".join(texts)
    assert (final.finish_reason, final.response_tokens) == ("length", 6)
    assert final.request_id is not None


async def test_leaving_the_with_block_closes_the_stream(
    server: LocalServer, make_client: Any, mode: str
) -> None:
    from helpers import sse_reply

    event = json.dumps({"completions": [["p", ["x"]]]})
    server.script(sse_reply([f"data: {event}"], then="hold"))
    client = make_client("scale", mode, base_url=server.url)
    if mode == "async":
        async with client.stream("m", "p") as stream:
            assert (await anext(stream)).text == "x"
        assert await asyncio.to_thread(server.disconnected.wait, 5)  # the loop runs: the socket closes
    else:
        with client.stream("m", "p") as stream:
            assert next(stream).text == "x"
        assert server.disconnected.wait(5)


# --- raw responses -------------------------------------------------------------------------------------


async def test_with_raw_response_gives_the_http_response_and_parses(sandbox: Sandbox, mode: str) -> None:
    client = scale(mode, sandbox.scale_base_url)
    try:
        raw = await call(client.with_raw_response.complete(SCALE, "Alice", max_tokens=3))
        if mode == "async":
            async with client.with_streaming_response.stream(SCALE, "Alice", max_tokens=3) as response:
                streamed = (
                    response.status_code,
                    response.request_id,
                    [c.text async for c in response.parse()],
                )
        else:
            with client.with_streaming_response.stream(SCALE, "Alice", max_tokens=3) as response:
                streamed = (response.status_code, response.request_id, [c.text for c in response.parse()])
    finally:
        await call(client.close())
    assert raw.status_code == 200
    assert raw.headers["content-type"].startswith("application/json")
    assert raw.request_id == raw.parse().request_id is not None
    assert json.loads(raw.content)["completions"][0][1][0] == raw.parse().text
    assert raw.parse().response_tokens == 3
    status, request_id, texts = streamed
    assert status == 200
    assert "".join(texts)
    assert request_id is not None


async def test_a_raw_response_still_raises_the_typed_error(
    make_client: Any, server: LocalServer, mode: str
) -> None:
    server.script(json_reply(400, {"detail": "no"}))
    client = make_client("scale", mode, base_url=server.url)
    with pytest.raises(BadRequestError):
        await call(client.with_raw_response.complete("m", "p"))


# --- None means "none" for every option that adds or replaces something --------------------------------


async def test_none_means_none_for_every_optional_option(
    make_client: Any, server: LocalServer, mode: str, sleeps: list[float]
) -> None:
    """``extra_headers=None`` (``extra_query``, ``extra_body``, ``hooks``) adds nothing and ``retry=None``
    keeps the policy in force, as ``deadline=None`` means no deadline: on a call, on ``with_options`` and
    (all but ``extra_*``, which it does not take) on the constructor."""
    server.script(
        json_reply(503, {"detail": "busy"}), json_reply(200, scale_body()), json_reply(200, scale_body())
    )
    client = make_client(
        "scale", mode, base_url=server.url, retry=None, hooks=None, deadline=None, stream_idle_timeout=None
    ).with_options(extra_headers={"X-Team": "search"}, retry=RetryPolicy(statuses={503}, jitter=0))
    nones = {"extra_headers": None, "extra_query": None, "extra_body": None, "hooks": None, "retry": None}
    derived = client.with_options(**nones)
    assert derived.options == client.options
    assert (await call(derived.complete("m", "p", deadline=None, **nones))).text == "Paris"
    (_, path, headers, body), (_, _, retried, _) = server.requests[:2]
    assert path == "/v4/models/m/completions"
    assert headers["x-team"] == retried["x-team"] == "search"  # the client's extras kept
    assert body == {"prompt": "p"}
    assert sleeps == [0.5]  # retried as the policy in force says: 503 is among its statuses
    await call(client.close())


@pytest.mark.parametrize("name", ["extra_headers", "extra_query", "extra_body", "hooks", "retry"])
def test_a_wrong_value_of_an_optional_option_still_names_it(name: str) -> None:
    client = scale("sync", "http://127.0.0.1:9")
    with pytest.raises(ValueError, match=rf"^{name} must be "):
        client.with_options(**{name: 12})


def test_an_unknown_keyword_is_a_type_error_as_the_params_page_says(mode: str) -> None:
    """docs/reference/params.md: a keyword the API does not have raises ``TypeError``, before anything is
    sent; a value the spec forbids ``ValueError``."""
    page = " ".join((ROOT / "docs" / "reference" / "params.md").read_text().split())
    assert "an unknown keyword raises `TypeError`" in page
    client = scale(mode, "http://127.0.0.1:9")
    with pytest.raises(TypeError, match="'bogus'"):
        client.stream(SCALE, "Alice", bogus=1)
    with pytest.raises(ValueError, match="temperature"):
        client.stream(SCALE, "Alice", temperature=9)
