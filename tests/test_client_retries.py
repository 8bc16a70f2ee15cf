"""Retries: what is retried, how long the clients wait (read from their log, in testing mode), when."""

from __future__ import annotations

import logging
import re
import time
from email.utils import formatdate
from typing import Any

import httpx
import pytest
from helpers import LocalServer, call, json_reply, reset_reply, scale_body

from wrapper import RetryPolicy, testing
from wrapper._core import retries as _retry
from wrapper._core.error_mapping import requested
from wrapper._generated.exceptions import parse_retry_after
from wrapper.errors import (
    APIConnectionError,
    APIStatusError,
    BadRequestError,
    InternalServerError,
    RateLimitError,
    UnknownBaseModelError,
)

pytestmark = pytest.mark.usefixtures("library")  # every test on httpx and on httpx2


class Script:
    """A MockTransport handler answering with a list of responses (or exceptions to raise), in order."""

    def __init__(self, *answers: httpx.Response | Exception) -> None:
        self.answers = list(answers)
        self.calls = 0

    def __call__(self, request: httpx.Request) -> httpx.Response:
        answer = self.answers[min(self.calls, len(self.answers) - 1)]
        self.calls += 1
        if isinstance(answer, Exception):
            raise answer
        return answer


NOT_ASKED = json_reply(200, scale_body("must not be asked"))


def ok() -> httpx.Response:
    return httpx.Response(200, json=scale_body())


def status(code: int, **headers: str) -> httpx.Response:
    return httpx.Response(
        code, json={"detail": "try later"}, headers={k.replace("_", "-"): v for k, v in headers.items()}
    )


@pytest.mark.parametrize(
    ("headers", "wait"),
    [
        ({"retry_after": "2"}, 2.0),
        ({"retry_after": "0.25"}, 0.25),
        ({"retry_after_ms": "1500"}, 1.5),
        ({"retry_after_ms": "1500", "retry_after": "9"}, 1.5),  # the precise one wins
        ({"retry_after": "3600"}, RetryPolicy().max_retry_after),  # capped
    ],
)
async def test_429_waits_as_the_server_says(
    make_client: Any, sleeps: list[float], mode: str, headers: dict[str, str], wait: float
) -> None:
    script = Script(status(429, **headers), ok())
    result = await call(make_client("scale", mode, script).complete("m", "p"))
    assert result.text == "Paris"
    assert (script.calls, sleeps) == (2, [wait])


async def test_retry_after_as_an_http_date(make_client: Any, sleeps: list[float], mode: str) -> None:
    script = Script(status(429, retry_after=formatdate(time.time() + 30, usegmt=True)), ok())
    await call(make_client("scale", mode, script).complete("m", "q"))
    assert len(sleeps) == 1
    assert 28.0 < sleeps[0] <= 30.0


async def test_backoff_grows_with_jitter_until_the_budget_is_spent(
    make_client: Any, sleeps: list[float], mode: str
) -> None:
    script = Script(status(503))
    client = make_client("scale", mode, script, max_retries=4)
    with pytest.raises(InternalServerError):
        await call(client.complete("m", "p"))
    assert script.calls == 5
    bounds = [(0.375, 0.5), (0.75, 1.0), (1.5, 2.0), (3.0, 4.0)]
    assert len(sleeps) == 4
    assert all(low <= wait <= high for wait, (low, high) in zip(sleeps, bounds, strict=True)), sleeps


@pytest.mark.parametrize("code", [408, 409, 429, 500, 502, 503, 504])
async def test_retried_statuses(make_client: Any, sleeps: list[float], code: int) -> None:
    script = Script(status(code), ok())
    make_client("scale", "sync", script).complete("m", "p")
    assert script.calls == 2
    assert len(sleeps) == 1


@pytest.mark.parametrize("code", [400, 401, 403, 404, 422])
async def test_client_errors_are_not_retried(
    make_client: Any, sleeps: list[float], mode: str, code: int
) -> None:
    script = Script(status(code), ok())
    with pytest.raises(APIStatusError):
        await call(make_client("scale", mode, script).complete("m", "p"))
    assert (script.calls, sleeps) == (1, [])


async def test_gradient_typed_errors_are_not_retried(make_client: Any, sleeps: list[float]) -> None:
    script = Script(httpx.Response(404, json={"type": "unknownBaseModel", "message": "no such model"}), ok())
    with pytest.raises(UnknownBaseModelError):
        make_client("gradient", "sync", script).complete("m", "q")
    assert (script.calls, sleeps) == (1, [])


async def test_connection_errors_are_retried(make_client: Any, sleeps: list[float], mode: str) -> None:
    script = Script(httpx.ConnectError("refused"), httpx.ReadTimeout("slow"), ok())
    await call(make_client("scale", mode, script).complete("m", "p"))
    assert script.calls == 3
    assert len(sleeps) == 2


async def test_max_retries_zero_disables_retries(make_client: Any, sleeps: list[float], mode: str) -> None:
    script = Script(status(429, retry_after="1"), ok())
    client = make_client("scale", mode, script, max_retries=0)
    with pytest.raises(RateLimitError) as caught:
        await call(client.complete("m", "p"))
    assert caught.value.retry_after == 1.0
    assert (script.calls, sleeps) == (1, [])


async def test_with_options_changes_the_budget_of_the_copy_only(
    make_client: Any, sleeps: list[float], mode: str
) -> None:
    script = Script(status(503), status(503), ok())
    client = make_client("scale", mode, script)
    with pytest.raises(InternalServerError):
        await call(client.with_options(max_retries=0).complete("m", "p"))
    assert (await call(client.complete("m", "p"))).text == "Paris"
    assert script.calls == 3
    assert len(sleeps) == 1


async def test_a_reset_connection_is_retried(
    make_client: Any, sleeps: list[float], server: LocalServer, mode: str
) -> None:
    """A real RST on a real socket; the async client on its default aiohttp transport."""
    server.script(reset_reply, json_reply(200, scale_body("after reset")))
    result = await call(make_client("scale", mode, base_url=server.url).complete("m", "p"))
    assert result.text == "after reset"
    assert len(server.requests) == 2
    assert len(sleeps) == 1


async def test_a_reset_connection_exhausts_the_budget(
    make_client: Any, sleeps: list[float], server: LocalServer, mode: str
) -> None:
    server.script(reset_reply)
    with pytest.raises(APIConnectionError):
        await call(make_client("gradient", mode, base_url=server.url, max_retries=1).complete("m", "q"))
    assert len(server.requests) == 2
    assert len(sleeps) == 1


async def test_429_over_a_socket(
    make_client: Any, sleeps: list[float], server: LocalServer, mode: str
) -> None:
    server.script(
        json_reply(429, {"detail": "slow down"}, {"retry-after": "3"}), json_reply(200, scale_body())
    )
    await call(make_client("scale", mode, base_url=server.url).complete("m", "p"))
    assert sleeps == [3.0]


# --- a deadline with no room for the next wait raises the last real error -----------------------------


async def opened(client: Any) -> Any:
    """``client.stream(...).open()``: the stream's response once its first chunk has come."""
    stream = client.stream("m", "p")
    try:
        return await call(stream.open())
    finally:
        await call(stream.close())


SLOW_BACKOFF = RetryPolicy(initial_backoff=20.0, max_backoff=20.0)
"""Backoffs of 15-20 s, which no deadline of these tests fits."""


@pytest.mark.parametrize("how", ["complete", "open"])
async def test_a_deadline_with_no_room_for_retry_after_raises_the_429(
    make_client: Any, server: LocalServer, lane: str, how: str, caplog: pytest.LogCaptureFixture
) -> None:
    """``Retry-After: 30`` cannot fit in a 5 s deadline: the ``RateLimitError`` itself, at once, with its
    status, body and ``Retry-After``, not an ``APITimeoutError`` that ``except RateLimitError`` misses;
    and no log line announces a retry that will not happen."""
    server.script(json_reply(429, {"detail": "slow down"}, {"retry-after": "30"}), NOT_ASKED)
    client = make_client("scale", lane, base_url=server.url, max_retries=2, deadline=5.0)
    with caplog.at_level(logging.INFO, logger="wrapper"), pytest.raises(RateLimitError) as caught:
        await (call(client.complete("m", "p")) if how == "complete" else opened(client))
    assert not [record.getMessage() for record in caplog.records if "retrying" in record.getMessage()]
    error = caught.value
    assert (error.status_code, error.body, error.retry_after) == (429, {"detail": "slow down"}, 30.0)
    assert re.search(
        r"; the call's deadline of 5 s left no room to retry \([0-9.]+ s left, 30\.00 s to wait before "
        r"the next attempt\)$",
        str(error),
    ), str(error)
    assert len(server.requests) == 1


@pytest.mark.parametrize("how", ["complete", "open"])
async def test_a_deadline_with_no_room_for_the_backoff_raises_the_500(
    make_client: Any, server: LocalServer, lane: str, how: str
) -> None:
    """The first backoff (20 s, less up to 25% jitter) cannot fit in 5 s: a deadline long enough for
    the attempt itself on a busy machine, far too short for the wait."""
    server.script(json_reply(500, {"detail": "boom"}), NOT_ASKED)
    client = make_client("scale", lane, base_url=server.url, max_retries=2, deadline=5.0, retry=SLOW_BACKOFF)
    with pytest.raises(InternalServerError) as caught:
        await (call(client.complete("m", "p")) if how == "complete" else opened(client))
    assert caught.value.body == {"detail": "boom"}
    assert "the call's deadline of 5 s left no room to retry" in str(caught.value)
    assert len(server.requests) == 1


async def test_a_connection_error_with_no_room_to_retry_says_so_and_counts_its_attempts(
    make_client: Any, server: LocalServer, lane: str
) -> None:
    server.script(reset_reply, NOT_ASKED)
    client = make_client("scale", lane, base_url=server.url, max_retries=2, deadline=5.0, retry=SLOW_BACKOFF)
    with pytest.raises(APIConnectionError) as caught:
        await call(client.complete("m", "p"))
    message = str(caught.value)
    assert type(caught.value) is APIConnectionError
    assert message.endswith("s to wait before the next attempt) (after 1 attempt)"), message
    assert "the call's deadline of 5 s left no room to retry" in message


def test_policy_functions() -> None:
    """The pieces of the decision: the policy's ``retries`` and backoff, ``parse_retry_after``."""
    request = httpx.Request("POST", "https://x.test")
    policy = RetryPolicy()
    assert policy.retries(APIConnectionError("x", request=request))
    assert not policy.retries(ValueError("x"))
    assert not policy.retries(BadRequestError("x", response=httpx.Response(400, request=request), body=None))
    assert policy.backoff(0, 0.0) == 0.0
    assert policy.backoff(3, -5.0) == 0.0
    assert policy.backoff(50, None) <= policy.max_backoff
    assert parse_retry_after(httpx.Headers({"retry-after": "soon"})) is None
    assert parse_retry_after(httpx.Headers({"retry-after-ms": "x", "retry-after": "4"})) == 4.0
    assert parse_retry_after(httpx.Headers({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"})) == 0.0


def test_retry_or_raise_decides_and_logs(caplog: pytest.LogCaptureFixture) -> None:
    """The one decision every call's attempts take: the delay (logged at INFO), or the error raised."""
    request = httpx.Request("POST", "https://x.test/v4/models/m/completions")
    limited = RateLimitError(
        "HTTP 429", response=httpx.Response(429, headers={"retry-after": "3"}, request=request), body=None
    )
    with caplog.at_level(logging.INFO, logger="wrapper"):
        assert _retry.retry_or_raise(limited, 0, 2, RetryPolicy()) == 3.0
    assert caplog.messages == [
        "retrying POST https://x.test/v4/models/m/completions in 3.00s (retry 1 of 2) after: HTTP 429"
    ]
    with pytest.raises(RateLimitError):
        _retry.retry_or_raise(limited, 2, 2, RetryPolicy())  # the budget is spent
    bad = BadRequestError("HTTP 400", response=httpx.Response(400, request=request), body=None)
    with pytest.raises(BadRequestError):
        _retry.retry_or_raise(bad, 0, 2, RetryPolicy())  # not retryable


def test_retry_log_names_the_request_once_and_redacts_its_query(caplog: pytest.LogCaptureFixture) -> None:
    """A status error's message already ends with its request: the log line does not say it twice, and a
    query parameter (which may hold a credential) is shown redacted, as in the error's own message."""
    request = httpx.Request("POST", "https://x.test/v4/models/m/completions?key=s3cret")
    busy = requested(
        InternalServerError("HTTP 503: busy", response=httpx.Response(503, request=request), body=None)
    )
    with caplog.at_level(logging.INFO, logger="wrapper"):
        _retry.retry_or_raise(busy, 0, 2, RetryPolicy(jitter=0))
    (message,) = caplog.messages
    assert message == (
        "retrying POST https://x.test/v4/models/m/completions?key=<redacted> in 0.50s (retry 1 of 2) "
        "after: HTTP 503: busy"
    )
    assert "s3cret" not in message


async def test_testing_mode_skips_the_waits() -> None:
    assert not testing.is_testing()
    testing.set_testing(True)
    try:
        assert testing.is_testing()
        _retry.sleep(3600)  # returns at once (or pytest-timeout fails the test)
        await _retry.asleep(3600)
    finally:
        testing.set_testing(False)
    assert not testing.is_testing()
