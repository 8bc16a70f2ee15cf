"""Property-based fuzzing of response handling: whatever the server sends, the clients return a valid
result or raise a ``wrapper.errors`` exception, nothing else, and the sync and async clients agree.

Bodies are generated from the specs' schemas (valid ones) and then broken (missing fields, wrong types,
extra fields, non-JSON, truncated JSON, huge strings, unicode); they are served by ``httpx.MockTransport``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import httpx
import pytest
from helpers import retry_waits
from hypothesis import given
from hypothesis import strategies as st

from wrapper import Completion, CompletionChunk, RetryPolicy
from wrapper.errors import (
    APIConnectionError,
    APIError,
    APIStatusError,
    ContentFlaggedError,
    GradientError,
    IncompleteStreamError,
    InternalServerError,
    UnprocessableEntityError,
)

from ._clients import new_client
from ._expect import GRADIENT_TYPES, STATUSES, is_gradient_error
from ._schemas import JSON_VALUES, from_schema, fuzz_settings, mutated, schema

pytestmark = pytest.mark.long("parallel")  # 54-69 s of one process in make test

EXAMPLES = 200
fuzz = fuzz_settings(EXAMPLES)

SCALE = "scale.yaml"
GRADIENT = "gradient.json"
SCALE_SUCCESS = from_schema(schema(SCALE, "CompletionResponse"), SCALE)
SCALE_422 = from_schema(schema(SCALE, "HTTPValidationError"), SCALE)
GRADIENT_SUCCESS = from_schema(schema(GRADIENT, "CompleteModelSuccess"), GRADIENT)
GRADIENT_ERROR = from_schema(schema(GRADIENT, "CompleteModelError"), GRADIENT)
ANY_SHAPE = SCALE_SUCCESS | SCALE_422 | GRADIENT_SUCCESS | GRADIENT_ERROR | JSON_VALUES
ERROR_STATUSES = st.sampled_from(sorted(STATUSES))
CONTENT_TYPES = st.sampled_from(
    [
        "application/json",
        "application/json; charset=utf-8",
        "application/json; charset=latin-1",
        "application/json; charset=bogus",
        "text/plain",
        "text/html",
        "text/event-stream",
        None,
    ]
)
RETRY_AFTER = st.sampled_from(
    ["1", "0", "-1", "abc", "1e400", "nan", "Wed, 21 Oct 2015 07:28:00 GMT", "", "9" * 400]
)


class Served:
    """A fixed answer (status, headers, body chunks, optionally a transport failure after them)."""

    def __init__(
        self,
        status: int,
        body: bytes | list[bytes],
        headers: dict[str, str] | None = None,
        fail: bool = False,
    ) -> None:
        self.status, self.headers, self.fail = status, headers or {}, fail
        self.chunks = body if isinstance(body, list) else [body]
        self.requests = 0

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests += 1
        return httpx.Response(self.status, headers=self.headers, stream=_Body(self.chunks, self.fail))


class _Body(httpx.SyncByteStream, httpx.AsyncByteStream):
    def __init__(self, chunks: list[bytes], fail: bool) -> None:
        self.chunks, self.fail = chunks, fail

    def __iter__(self) -> Iterator[bytes]:
        yield from self.chunks
        if self.fail:
            raise httpx.RemoteProtocolError("peer closed connection without sending complete message body")

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self.chunks:
            yield chunk
        if self.fail:
            raise httpx.RemoteProtocolError("peer closed connection without sending complete message body")


Outcome = tuple[str, Any]
Handler = Callable[[httpx.Request], httpx.Response]


def _sync_outcome(api: str, method: str, handler: Handler, retries: int) -> Outcome:
    http = httpx.Client(transport=httpx.MockTransport(handler))
    chunks: list[CompletionChunk] = []
    with new_client(api, "https://mock/api", max_retries=retries, http_client=http) as api_client:
        try:
            if method == "complete":
                return "ok", api_client.complete("model", "prompt")
            for chunk in api_client.stream("model", "prompt"):
                chunks.append(chunk)
            return "ok", chunks
        except APIError as exc:
            return "error", (exc, chunks)


async def _async_outcome(api: str, method: str, handler: Handler, retries: int) -> Outcome:
    http = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    chunks: list[CompletionChunk] = []
    async with new_client(
        api, "https://mock/api", asynchronous=True, max_retries=retries, http_client=http
    ) as api_client:
        try:
            if method == "complete":
                return "ok", await api_client.complete("model", "prompt")
            async for chunk in api_client.stream("model", "prompt"):
                chunks.append(chunk)
            return "ok", chunks
        except APIError as exc:
            return "error", (exc, chunks)


def outcome(api: str, method: str, served: Served, retries: int = 0) -> Outcome:
    """What the sync client makes of ``served``, checked to be valid and the same as what the async one makes.

    Anything but a result or a ``wrapper.errors`` exception propagates and fails the property.
    """
    sync = _sync_outcome(api, method, served, retries)
    sync_requests, served.requests = served.requests, 0
    asynchronous = asyncio.run(_async_outcome(api, method, served, retries))
    assert served.requests == sync_requests <= retries + 1
    kind, value = sync
    assert kind == asynchronous[0], f"sync {sync!r} but async {asynchronous!r}"
    if kind == "ok":
        assert value == asynchronous[1]
        for item in [value] if method == "complete" else value:
            _check_valid(item)
    else:
        exc, chunks = value
        other, other_chunks = asynchronous[1]
        assert type(exc) is type(other)
        assert chunks == other_chunks
        assert str(exc)
        assert isinstance(exc.request, httpx.Request)
        if isinstance(exc, APIStatusError):
            assert exc.retry_after is None or exc.retry_after >= 0.0
            assert exc.request_id == served.headers.get("x-request-id")
    return sync


def _check_valid(item: Completion | CompletionChunk) -> None:
    assert isinstance(item, Completion | CompletionChunk)
    assert isinstance(item.text, str)
    assert item.finish_reason is None or isinstance(item.finish_reason, str)
    for count in (item.prompt_tokens, item.response_tokens):
        assert count is None or (isinstance(count, int) and not isinstance(count, bool))
    assert item.logprobs is None or isinstance(item.logprobs, tuple)
    repr(item)


def _json(body: Any) -> bytes:
    return json.dumps(body).encode()


def _error_headers(draw: st.DrawFn) -> dict[str, str]:
    headers = {"content-type": "application/json"}
    if draw(st.booleans()):
        headers["retry-after"] = draw(RETRY_AFTER)
    if draw(st.booleans()):
        headers["x-request-id"] = draw(st.text("abcdef0123456789-", min_size=1, max_size=36))
    return headers


# -- Scale complete ------------------------------------------------------------------------------------------


@fuzz
@given(body=SCALE_SUCCESS)
def test_scale_valid_success_is_a_completion(body: dict[str, Any]) -> None:
    kind, result = outcome(
        "scale", "complete", Served(200, _json(body), {"content-type": "application/json"})
    )
    assert kind == "ok", result
    pairs = body["completions"]
    assert result.text == (pairs[0][1][0] if pairs and pairs[0][1] else "")
    assert result.finish_reason == body.get("finish_reason")
    assert result.prompt_tokens == body.get("prompt_tokens")
    assert result.response_tokens == body.get("response_tokens")


@fuzz
@given(data=st.data(), status=ERROR_STATUSES)
def test_scale_error_status_maps_to_its_class(data: st.DataObject, status: int) -> None:
    validation = data.draw(st.booleans())  # an HTTPValidationError, or any other body
    body = data.draw(SCALE_422 if validation else st.fixed_dictionaries({"detail": st.text()}) | ANY_SHAPE)
    kind, (exc, _) = outcome(
        "scale", "complete", Served(status, _json(body), data.draw(st.composite(_error_headers)()))
    )
    assert kind == "error"
    assert type(exc) is STATUSES[status]
    assert exc.status_code == status
    assert exc.body == body
    if isinstance(exc, UnprocessableEntityError) and validation:
        detail = body.get("detail", [])
        assert exc.errors == [(tuple(item["loc"]), item["msg"], item["type"]) for item in detail]


@fuzz
@given(data=st.data(), status=st.sampled_from([200, *sorted(STATUSES)]), content_type=CONTENT_TYPES)
def test_scale_broken_bodies_give_a_result_or_a_typed_error(
    data: st.DataObject, status: int, content_type: str | None
) -> None:
    body = data.draw(mutated(SCALE_SUCCESS if status == 200 else SCALE_422 | ANY_SHAPE))
    headers = {"content-type": content_type} if content_type else {}
    kind, result = outcome("scale", "complete", Served(status, body, headers))
    if status >= 400:
        assert kind == "error"
        assert type(result[0]) is STATUSES[status]


# -- Scale stream --------------------------------------------------------------------------------------------


def _event(data: str, name: str | None = None) -> bytes:
    head = f"event: {name}\n" if name else ""
    return (head + "".join(f"data: {line}\n" for line in data.split("\n")) + "\n").encode()


@fuzz
@given(
    chunks=st.lists(SCALE_SUCCESS.filter(lambda b: b["completions"] and b["completions"][0][1]), max_size=6),
    finished=st.booleans(),
)
def test_scale_valid_stream_yields_its_chunks(chunks: list[dict[str, Any]], finished: bool) -> None:
    """Complete once a chunk carries the finish reason; a body that ends before one did raises
    ``IncompleteStreamError`` after its chunks, with their text."""
    if finished and chunks:
        chunks[-1] = {**chunks[-1], "finish_reason": "stop"}
    served = Served(200, [_event(json.dumps(c)) for c in chunks], {"content-type": "text/event-stream"})
    kind, result = outcome("scale", "stream", served)
    texts = [c["completions"][0][1][0] for c in chunks]
    if any(c.get("finish_reason") is not None for c in chunks):
        assert kind == "ok", result
        assert [c.text for c in result] == texts
    else:
        assert kind == "error"
        error, received = result
        assert isinstance(error, IncompleteStreamError)
        assert [c.text for c in received] == texts
        assert error.text == "".join(texts)


SSE_NOISE = st.sampled_from(
    [
        b": keep-alive comment\n\n",
        b"retry: 10\n\n",
        b"id: 7\n\n",
        b"event: ping\ndata: {}\n\n",
        b"data:\n\n",
        b"\n\n\n",
        b"data: [DONE]\n\n",
        b"data: {not json\n\n",
        b'event: error\ndata: {"detail": "boom", "status_code": 500}\n\n',
        b"event: error\ndata: not json\n\n",
        b"event: error\n\n",
        b'data: {"completions": [["p", ["x"]]]}\r\n\r\n',
        b'data: {"completions": [["p", ["x"]]]}',
        b"\xff\xfe\x80\n\n",
        b"data: " + b"y" * 100_000 + b"\n\n",
    ]
)


@fuzz
@given(
    data=st.data(),
    content_type=CONTENT_TYPES,
    fail=st.booleans(),
    split=st.integers(1, 64),
)
def test_scale_broken_streams_give_chunks_or_a_typed_error(
    data: st.DataObject, content_type: str | None, fail: bool, split: int
) -> None:
    pieces = data.draw(
        st.lists(
            SCALE_SUCCESS.map(lambda b: _event(json.dumps(b)))
            | mutated(SCALE_SUCCESS).map(lambda b: _event(b.decode("utf-8", "replace")))
            | SSE_NOISE,
            max_size=6,
        )
    )
    stream = b"".join(pieces)
    if data.draw(st.booleans()):  # cut anywhere, even inside an event or a UTF-8 sequence
        stream = stream[: data.draw(st.integers(0, len(stream)))]
    split = max(split, len(stream) // 256)  # small network reads, but not a hundred thousand of them
    chunks = [stream[i : i + split] for i in range(0, len(stream), split)]
    headers = {"content-type": content_type} if content_type else {}
    kind, _result = outcome("scale", "stream", Served(200, chunks, headers, fail=fail))
    if fail and kind != "error":  # a break after a ``data: [DONE]`` is never read: the stream had ended
        assert b"data: [DONE]\n\n" in stream, "a stream that broke off must not end as if complete"


@fuzz
@given(data=st.data(), status=ERROR_STATUSES)
def test_scale_stream_error_status_maps_to_its_class(data: st.DataObject, status: int) -> None:
    body = data.draw(mutated(SCALE_422) | SCALE_422.map(_json))
    kind, (exc, chunks) = outcome(
        "scale", "stream", Served(status, body, data.draw(st.composite(_error_headers)()))
    )
    assert kind == "error"
    assert type(exc) is STATUSES[status]
    assert chunks == []


# -- Gradient (complete, and its one-chunk stream) -----------------------------------------------------------


@fuzz
@given(body=GRADIENT_SUCCESS, method=st.sampled_from(["complete", "stream"]))
def test_gradient_valid_success_is_a_completion(body: dict[str, Any], method: str) -> None:
    kind, result = outcome("gradient", method, Served(200, _json(body), {"content-type": "application/json"}))
    assert kind == "ok", result
    item = result if method == "complete" else result[-1]
    text = item.text if method == "complete" else "".join(chunk.text for chunk in result)
    assert (text, item.finish_reason) == (body["generatedOutput"], body["finishReason"])


@fuzz
@given(
    data=st.data(),
    status=st.sampled_from([s for s in sorted(STATUSES) if s < 500]),
    method=st.sampled_from(["complete", "stream"]),
)
def test_gradient_typed_error_maps_to_its_type(data: st.DataObject, status: int, method: str) -> None:
    body = data.draw(GRADIENT_ERROR)
    kind, (exc, chunks) = outcome(
        "gradient", method, Served(status, _json(body), data.draw(st.composite(_error_headers)()))
    )
    assert kind == "error"
    assert chunks == []
    assert is_gradient_error(exc, status, body.get("type")), exc  # no type: an untagged variant
    assert (exc.status_code, exc.body) == (status, body)
    if isinstance(exc, GradientError):
        assert exc.type == body["type"]
    if isinstance(exc, ContentFlaggedError):
        assert exc.samples == [item["sample"] for item in body["payload"]["flaggedContent"]]


@fuzz
@given(data=st.data(), status=st.sampled_from([s for s in sorted(STATUSES) if s >= 500]))
def test_gradient_server_error_is_an_internal_server_error(data: st.DataObject, status: int) -> None:
    body = data.draw(GRADIENT_ERROR.map(_json) | mutated(GRADIENT_ERROR))
    kind, (exc, _) = outcome(
        "gradient", "complete", Served(status, body, data.draw(st.composite(_error_headers)()))
    )
    assert kind == "error"
    assert isinstance(exc, InternalServerError)
    assert exc.status_code == status


@fuzz
@given(
    data=st.data(),
    status=st.sampled_from([200, *sorted(STATUSES)]),
    content_type=CONTENT_TYPES,
    method=st.sampled_from(["complete", "stream"]),
)
def test_gradient_broken_bodies_give_a_result_or_a_typed_error(
    data: st.DataObject, status: int, content_type: str | None, method: str
) -> None:
    body = data.draw(mutated(GRADIENT_SUCCESS if status == 200 else GRADIENT_ERROR | ANY_SHAPE))
    headers = {"content-type": content_type} if content_type else {}
    fail = data.draw(st.booleans())
    kind, result = outcome("gradient", method, Served(status, body, headers, fail=fail))
    if fail:  # the body broke off: no complete response, whatever its status
        assert kind == "error"
        assert type(result[0]) is APIConnectionError
    elif status >= 400:
        exc = result[0]
        assert kind == "error"
        assert isinstance(exc, APIStatusError)
        assert exc.status_code == status
        assert isinstance(exc, STATUSES[status])  # a typed error is also the class of its status
        if isinstance(exc, GradientError) and not isinstance(exc, tuple(GRADIENT_TYPES.values())):
            assert isinstance(exc.body, dict)  # a typed body whose type the spec does not name
            assert exc.body["type"] not in GRADIENT_TYPES
            assert exc.type == exc.body["type"]
        elif not isinstance(exc, GradientError):
            assert type(exc) is STATUSES[status]


# -- retries -------------------------------------------------------------------------------------------------


_no_waiting = retry_waits


class Sequence:
    """Serves ``answers`` in turn (the last one again once they run out)."""

    def __init__(self, answers: list[Served]) -> None:
        self.answers, self.requests = answers, 0
        self.headers: dict[str, str] = {}

    def __call__(self, request: httpx.Request) -> httpx.Response:
        answer = self.answers[min(self.requests, len(self.answers) - 1)]
        self.requests += 1
        self.headers = answer.headers
        return answer(request)


@fuzz
@given(
    api=st.sampled_from(["scale", "gradient"]),
    retries=st.integers(0, 3),
    statuses=st.lists(st.sampled_from([200, 400, 408, 409, 429, 500, 503, 0]), min_size=1, max_size=5),
    data=st.data(),
)
def test_retries_stop_at_the_first_final_answer_or_the_budget(
    api: str, retries: int, statuses: list[int], data: st.DataObject
) -> None:
    """Status 0: a connection dropped mid-body. Retried: 408, 409, 429, 5xx and dropped connections."""
    success = _json(
        {"completions": [["p", ["ok"]]]}
        if api == "scale"
        else {"finishReason": "stop", "generatedOutput": "ok"}
    )
    answers = [
        Served(200, b"", {}, fail=True)
        if status == 0
        else Served(status, success, {"content-type": "application/json"})
        if status == 200
        else Served(status, _json({"detail": "x"}), {"retry-after": data.draw(RETRY_AFTER)})
        for status in statuses
    ]
    served = Sequence(answers)
    with _no_waiting() as waits:
        kind, _result = outcome(api, "complete", served, retries)  # type: ignore[arg-type]
    final = next(
        (i for i, status in enumerate(statuses) if status in (200, 400)), retries
    )  # the last repeats
    attempts = min(final, retries) + 1
    assert served.requests == attempts
    assert len(waits) == 2 * (attempts - 1)  # sync and async each waited between attempts
    assert all(0.0 <= wait <= RetryPolicy().max_retry_after for wait in waits)
    assert kind == ("ok" if statuses[min(attempts, len(statuses)) - 1] == 200 else "error")
