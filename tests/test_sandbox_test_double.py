"""The sandbox as a service's test double: counts that a caller who left does not skew, the request log,
recorded exchanges, an ``x-sandbox-fault`` header's ``count`` per request id, and the environment that
points clients built from it at the sandbox."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from helpers import call, wait_until

from wrapper import errors
from wrapper.sandbox import Fault, Sandbox, Stats
from wrapper.scale import Scale

MODELS = {"scale": "llama-3-8b-instruct", "gradient": "nous-hermes2"}


@pytest.fixture(scope="module")
def sb() -> Iterator[Sandbox]:
    with Sandbox(record=True, log=True) as sandbox:
        yield sandbox


@pytest.fixture(autouse=True)
def _fresh(sb: Sandbox) -> None:
    sb.reset()


async def _eventually(condition: Callable[[], bool]) -> bool:
    """``wait_until`` for async tests: polls for 5 s at most without blocking the event loop, where the
    clients close their connections."""
    deadline = time.monotonic() + 5.0
    while not condition():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.01)
    return True


def _finished(sb: Sandbox, count: int) -> bool:
    """Whether ``count`` exchanges were recorded and every one has ended."""
    return len(sb.exchanges) == count and all(e.duration is not None for e in sb.exchanges)


async def test_a_caller_who_gives_up_during_a_delay_leaves_at_once(
    sb: Sandbox, make_client: Callable[..., Any], lane: str
) -> None:
    client = make_client("scale", lane, base_url=sb.scale_base_url, max_retries=0, timeout=0.2)
    sb.inject(delay=30)
    with pytest.raises(errors.APITimeoutError):
        await call(client.complete(MODELS["scale"], "Alice", max_tokens=2))
    assert await _eventually(lambda: sb.stats().in_flight == 0)  # not in 30 s: it saw the caller leave
    assert await _eventually(lambda: _finished(sb, 1))
    (gone,) = sb.exchanges
    assert (gone.status, gone.aborted, gone.fault) == (None, True, Fault(delay=30))


def test_a_request_still_under_way_at_a_reset_counts_in_no_stats_after_it(
    sb: Sandbox, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="wrapper.sandbox")
    with Scale(api_key="k", account_id="a", base_url=sb.scale_base_url, max_retries=0) as scale:
        sb.inject("stall=1")
        with scale.stream(MODELS["scale"], "Alice", max_tokens=8) as held:
            next(held)  # the stream is under way, and stalls
            sb.reset()
            assert scale.complete(MODELS["scale"], "Alice", max_tokens=2).text
            assert sb.stats() == Stats(requests=1, in_flight=0, max_in_flight=1)
        assert wait_until(lambda: any(" aborted " in message for message in caplog.messages))  # it ended
    assert sb.stats() == Stats(requests=1, in_flight=0, max_in_flight=1)


async def test_a_client_that_breaks_off_mid_stream_is_recorded_as_aborted(
    sb: Sandbox, make_client: Callable[..., Any], lane: str
) -> None:
    client = make_client("scale", lane, base_url=sb.scale_base_url, max_retries=0)
    sb.inject(pace=0.05)
    stream = client.stream(MODELS["scale"], "Alice", max_tokens=50, temperature=0)
    if lane == "sync":
        with stream as chunks:
            received = [next(chunks).text for _ in range(2)]
    else:
        async with stream as chunks:
            received = [(await anext(chunks)).text for _ in range(2)]
    assert await _eventually(lambda: _finished(sb, 1))
    (left,) = sb.exchanges
    assert (left.status, left.aborted) == (200, True)
    sent = [json.loads(line[6:]) for line in left.body.decode().splitlines() if line.startswith("data: ")]
    assert [event["completions"][0][1][0] for event in sent[:2]] == received
    assert all("finish_reason" not in event for event in sent)  # the final event was never sent
    assert sb.stats().in_flight == 0


def test_an_exchange_holds_the_request_and_the_answer(sb: Sandbox) -> None:
    with Scale(api_key="secret-key", account_id="acct", base_url=sb.scale_base_url) as scale:
        result = scale.complete(MODELS["scale"], "Alice", max_tokens=3, extra_headers={"x-trace": "t-1"})
    assert wait_until(lambda: _finished(sb, 1))  # the server may still be finishing when the answer arrives
    (exchange,) = sb.exchanges
    assert (exchange.method, exchange.path) == ("POST", f"/v4/models/{MODELS['scale']}/completions")
    assert json.loads(exchange.request_body) == {"prompt": "Alice", "max_tokens": 3}
    assert exchange.request_headers["x-trace"] == "t-1"
    assert exchange.request_headers["x-api-key"] == "<redacted>"
    assert "secret-key" not in repr(exchange)
    assert (exchange.status, exchange.aborted, exchange.fault) == (200, False, None)
    assert exchange.request_id == exchange.headers["x-request-id"] == result.request_id
    assert json.loads(exchange.body)["response_tokens"] == 3
    assert exchange.duration is not None
    assert exchange.duration >= 0


def test_exchanges_need_record() -> None:
    with Sandbox() as plain, pytest.raises(RuntimeError, match="record=True"):
        _ = plain.exchanges


LOG_LINE = re.compile(
    r"(?P<method>\S+) (?P<path>\S+) (?P<status>\d+|-)(?P<aborted> aborted)? (?P<seconds>\d+\.\d{3})s"
    r"(?: fault=(?P<fault>\S+))? id=(?P<id>\S+)"
)


def test_the_log_has_a_line_per_request(sb: Sandbox, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="wrapper.sandbox")
    with Scale(api_key="k", account_id="a", base_url=sb.scale_base_url, max_retries=1) as scale:
        sb.inject("status=503;retry-after=0")
        scale.complete(MODELS["scale"], "Alice", max_tokens=2)  # a 503, then retried
        with pytest.raises(errors.NotFoundError):
            scale.complete("no-such-model", "Alice")
        sb.inject("reset")
        with pytest.raises(errors.APIConnectionError):
            scale.with_options(max_retries=0).complete(MODELS["scale"], "Alice")

    def logged() -> list[str]:
        return [record.getMessage() for record in caplog.records if record.name == "wrapper.sandbox"]

    assert wait_until(lambda: len(logged()) == 4)  # each is logged once its exchange has ended
    lines = [LOG_LINE.fullmatch(line) for line in logged()]
    path = f"/v4/models/{MODELS['scale']}/completions"
    assert [(m["method"], m["path"], m["status"], m["aborted"], m["fault"]) for m in lines if m] == [
        ("POST", path, "503", None, "status=503;retry-after=0"),
        ("POST", path, "200", None, None),
        ("POST", "/v4/models/no-such-model/completions", "404", None, None),
        ("POST", path, "-", " aborted", "reset"),
    ]
    assert [m["id"] for m in lines if m] == [e.request_id for e in sb.exchanges]


def test_without_log_nothing_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="wrapper.sandbox")
    with Sandbox() as quiet, Scale(api_key="k", account_id="a", base_url=quiet.scale_base_url) as scale:
        scale.complete(MODELS["scale"], "Alice", max_tokens=1)
    assert not [r for r in caplog.records if r.name == "wrapper.sandbox"]


async def test_a_fault_headers_count_is_kept_per_request_id(
    sb: Sandbox, make_client: Callable[..., Any], lane: str, sleeps: list[float]
) -> None:
    for api in ("scale", "gradient"):
        client = make_client(api, lane, base_url=sb.base_url(api), max_retries=2)
        once = {"x-sandbox-fault": "status=503;count=1"}
        assert (await call(client.complete(MODELS[api], "Alice", extra_headers=once))).text
        assert [e.status for e in sb.exchanges] == [503, 200]  # one 503, then the retry is served
        await call(client.complete(MODELS[api], "Alice", extra_headers=once))
        assert [e.status for e in sb.exchanges] == [503, 200, 200]  # that header's one use is spent
        for request_id in ("call-1", "call-2"):  # each call of its own id gets its own count
            headers = {**once, "x-request-id": request_id}
            await call(client.complete(MODELS[api], "Alice", extra_headers=headers))
        assert [e.status for e in sb.exchanges][3:] == [503, 200, 503, 200]
        with pytest.raises(errors.InternalServerError):  # without a count, every request carrying it
            await call(client.complete(MODELS[api], "Alice", extra_headers={"x-sandbox-fault": "status=503"}))
        assert [e.status for e in sb.exchanges][7:] == [503, 503, 503]
        sb.reset()


def test_a_bad_count_in_a_fault_header_is_refused_naming_the_rule(sb: Sandbox) -> None:
    bad = {"x-sandbox-fault": "status=503;count=0"}
    with (
        Scale(api_key="k", account_id="a", base_url=sb.scale_base_url, max_retries=0) as scale,
        pytest.raises(errors.UnprocessableEntityError) as refused,
    ):
        scale.complete(MODELS["scale"], "Alice", extra_headers=bad)
    assert "count must be a number of requests >= 1, not 0" in str(refused.value)


def test_environ_points_clients_built_from_the_environment_at_the_sandbox(sb: Sandbox) -> None:
    script = (
        "from wrapper.gradient import Gradient\n"
        "from wrapper.scale import Scale\n"
        "print(Scale().complete('llama-3-8b-instruct', 'Alice', max_tokens=2).response_tokens)\n"
        "print(Gradient().complete('nous-hermes2', 'Is Alice tall?', guidance=['yes', 'no']).text)\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SGP_", "GRADIENT_"))}
    out = subprocess.run(
        [sys.executable, "-c", script],
        env={**env, **sb.environ()},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[0] == "2"
    assert out.stdout.split("\n")[1] in ("yes", "no")
    assert [e.path.split("/")[1] for e in sb.exchanges] == ["v4", "api"]


def test_environ_gives_the_credentials_a_strict_sandbox_takes() -> None:
    with Sandbox(api_key="the-key", access_token="the-token") as strict:
        env = strict.environ("unused")
        assert env == {
            "SGP_API_KEY": "the-key",
            "SGP_ACCOUNT_ID": "unused",
            "SGP_CLIENT_BASE_URL": strict.scale_base_url,
            "GRADIENT_ACCESS_TOKEN": "the-token",
            "GRADIENT_WORKSPACE_ID": "unused",
            "GRADIENT_API_URL": strict.gradient_base_url,
        }
