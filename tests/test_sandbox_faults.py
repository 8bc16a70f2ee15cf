"""Fault injection and stats, each fault mode observed through our clients as designed."""

# ruff: noqa: F811  (the shared fixtures are imported, then named as parameters)

from __future__ import annotations

import asyncio
import contextlib

import httpx
import pytest
from helpers import retry_waits
from sandbox_fixtures import _no_faults_left, gradient, recording_sandbox, scale  # noqa: F401

from wrapper import errors
from wrapper.gradient import Gradient
from wrapper.sandbox import Fault, Sandbox, Stats
from wrapper.scale import AsyncScale, Scale

MODEL = "llama-3-8b-instruct"


def test_a_status_fault_carries_retry_after(recording_sandbox: Sandbox, scale: Scale) -> None:
    recording_sandbox.inject(status=429, retry_after=2)
    with pytest.raises(errors.RateLimitError) as info:
        scale.complete(MODEL, "Alice")
    assert info.value.retry_after == 2.0
    recording_sandbox.inject("status=503;retry-after-ms=250")
    with pytest.raises(errors.InternalServerError) as server_error:
        scale.complete(MODEL, "Alice")
    assert server_error.value.retry_after == 0.25
    assert scale.complete(MODEL, "Alice", max_tokens=2).text  # the faults are used up


def test_the_client_retries_through_count_faults(recording_sandbox: Sandbox) -> None:
    recording_sandbox.inject(status=503, retry_after=1, count=2, api="scale")
    recording_sandbox.reset_stats()
    with (
        retry_waits() as waits,
        Scale(
            api_key="k", account_id="a", base_url=recording_sandbox.scale_base_url, max_retries=2
        ) as client,
    ):
        assert client.complete(MODEL, "Alice", max_tokens=2).text
    assert recording_sandbox.stats().requests == 3
    assert waits == [1.0, 1.0]


def test_faults_select_their_api_and_model(
    recording_sandbox: Sandbox, scale: Scale, gradient: Gradient
) -> None:
    recording_sandbox.inject(status=500, api="gradient", count=1)
    recording_sandbox.inject(status=500, api="scale", model="mistral-7b-instruct", count=1)
    assert scale.complete(MODEL, "Alice", max_tokens=2).text
    with pytest.raises(errors.InternalServerError):
        scale.complete("mistral-7b-instruct", "Alice", max_tokens=2)
    with pytest.raises(errors.APIStatusError) as info:
        gradient.complete("nous-hermes2", "Alice")
    assert info.value.status_code == 500


def test_a_gradient_4xx_fault_still_has_the_typed_body(
    recording_sandbox: Sandbox, gradient: Gradient
) -> None:
    recording_sandbox.inject(status=429, retry_after=1, api="gradient")
    with pytest.raises(errors.APIStatusError) as info:
        gradient.complete("nous-hermes2", "Alice")
    assert (info.value.status_code, info.value.body["type"]) == (429, "failed")
    assert info.value.retry_after == 1.0


def test_a_delay_fault_makes_the_client_time_out(recording_sandbox: Sandbox, scale: Scale) -> None:
    recording_sandbox.inject(delay=0.5)
    with pytest.raises(errors.APITimeoutError):
        scale.with_options(timeout=0.1).complete(MODEL, "Alice", max_tokens=2)


def test_a_cut_stream_raises_after_its_chunks(recording_sandbox: Sandbox, scale: Scale) -> None:
    recording_sandbox.inject(cut=3)
    received = []
    with pytest.raises(errors.APIConnectionError):  # noqa: PT012 (the chunks before the cut arrive first)
        for chunk in scale.stream(MODEL, "The White Rabbit", max_tokens=20, temperature=0.0):
            received.append(chunk.text)
    assert len(received) == 3


@pytest.mark.parametrize("spec", ["reset", "cut=0"])
def test_a_reset_is_a_connection_error(recording_sandbox: Sandbox, scale: Scale, spec: str) -> None:
    recording_sandbox.inject(spec)
    with pytest.raises(errors.APIConnectionError):
        scale.complete(MODEL, "Alice")


@pytest.mark.parametrize("kind", ["json", "shape"])
def test_a_malformed_body_is_a_response_validation_error(
    recording_sandbox: Sandbox, scale: Scale, gradient: Gradient, kind: str
) -> None:
    recording_sandbox.inject(malformed=kind, count=3)
    with pytest.raises(errors.APIResponseValidationError):
        scale.complete(MODEL, "Alice")
    with pytest.raises(errors.APIResponseValidationError):
        gradient.complete("nous-hermes2", "Alice")
    with pytest.raises(errors.APIResponseValidationError):
        list(scale.stream(MODEL, "Alice"))


def test_rates_hit_about_their_share_of_requests_each_drawn_on_its_own(
    recording_sandbox: Sandbox, scale: Scale
) -> None:
    recording_sandbox.inject(status=503, rate=0.25)
    recording_sandbox.inject(
        status=429, rate=1 / 3
    )  # a third of the requests the first rule spares: a quarter
    outcomes: list[int] = []
    for _ in range(120):
        try:
            scale.complete(MODEL, "Alice", max_tokens=1)
            outcomes.append(200)
        except errors.APIStatusError as error:
            outcomes.append(error.status_code)
    for status in (200, 503, 429):
        assert outcomes.count(status) >= 15, outcomes
    assert 30 <= outcomes.count(200) <= 90


def test_faults_from_a_header_and_over_http(recording_sandbox: Sandbox) -> None:
    url = f"{recording_sandbox.scale_base_url}/v4/models/{MODEL}/completions"
    with httpx.Client(headers={"x-api-key": "k"}) as http:
        r = http.post(url, json={"prompt": "a"}, headers={"x-sandbox-fault": "status=429;retry-after=3"})
        assert (r.status_code, r.headers["retry-after"]) == (429, "3")
        bad = {"x-sandbox-fault": "status=oops"}
        assert http.post(url, json={"prompt": "a"}, headers=bad).status_code == 422
        gradient = f"{recording_sandbox.gradient_base_url}/models/nous-hermes2/complete"
        answer = http.post(gradient, json={"query": "a"}, headers=bad)
        assert (answer.status_code, answer.json()["type"]) == (400, "queryOrPathParsingError")
        queued = http.post(f"{recording_sandbox.url}/_sandbox/faults", json={"status": 409, "count": 2})
        assert queued.json()[0]["count"] == 2
        assert [http.post(url, json={"prompt": "a"}).status_code for _ in range(3)] == [409, 409, 200]
        http.post(f"{recording_sandbox.url}/_sandbox/faults", json={"status": 409})
        assert http.delete(f"{recording_sandbox.url}/_sandbox/faults").json() == []
        assert http.post(url, json={"prompt": "a"}).status_code == 200
        assert http.post(f"{recording_sandbox.url}/_sandbox/faults", json={"bogus": 1}).status_code == 400


def test_inject_rejects_unknown_options(recording_sandbox: Sandbox) -> None:
    with pytest.raises(ValueError, match="bogus"):
        recording_sandbox.inject(bogus=1)
    with pytest.raises(ValueError, match="malformed"):
        recording_sandbox.inject(malformed="xml")


@pytest.mark.serial  # an in-flight peak within a 0.2 s hold
async def test_stats_count_requests_in_flight_until_their_streams_end(recording_sandbox: Sandbox) -> None:
    for _ in range(100):  # an earlier test's abandoned request (a client timeout) may still be served
        if recording_sandbox.stats().in_flight == 0:
            break
        await asyncio.sleep(0.05)
    recording_sandbox.inject(delay=0.2, count=6, api="scale")
    recording_sandbox.reset_stats()
    async with AsyncScale(api_key="k", account_id="a", base_url=recording_sandbox.scale_base_url) as client:

        async def drain() -> None:
            async for _ in client.stream(MODEL, "Alice", max_tokens=3):
                pass

        await asyncio.gather(*(client.complete(MODEL, "Alice", max_tokens=2) for _ in range(6)))
        assert recording_sandbox.stats() == Stats(requests=6, in_flight=0, max_in_flight=6)
        recording_sandbox.reset_stats()
        recording_sandbox.inject(pace=0.1, count=2, api="scale")  # queued now, or the completes would use it
        await asyncio.gather(drain(), drain())
    async with httpx.AsyncClient(base_url=recording_sandbox.url) as http:
        stats = (await http.get("/_sandbox/stats")).json()
        assert stats == {"requests": 2, "in_flight": 0, "max_in_flight": 2, "rate_limited": 0}
        assert (await http.delete("/_sandbox/stats")).json()["requests"] == 0


def test_queued_rules_compose_each_matching_one_firing(recording_sandbox: Sandbox, scale: Scale) -> None:
    recording_sandbox.inject(delay=0.01, count=2, api="scale")
    recording_sandbox.inject(status=503, retry_after=7, count=1)
    recording_sandbox.inject(status=429, retry_after_ms=5, count=2)  # its status loses to the 503 once
    for expected in (errors.InternalServerError, errors.RateLimitError):
        with pytest.raises(expected):
            scale.complete(MODEL, "Alice", max_tokens=1)
    assert scale.complete(MODEL, "Alice", max_tokens=1).text  # every rule used up: each fired each time
    first, second, third = (exchange.fault for exchange in recording_sandbox.exchanges[-3:])
    assert first == Fault(status=503, retry_after=7, delay=0.01)  # a status keeps its own headers
    assert second == Fault(status=429, retry_after_ms=5, delay=0.01)
    assert third is None
    assert recording_sandbox.app.faults.rules() == []


@pytest.mark.parametrize(
    "fault",
    [
        Fault(status=429, retry_after=1.5, retry_after_ms=250),
        Fault(delay=0.01, pace=0.01, event="ping"),
        Fault(malformed="shape"),
        Fault(end=0, bom=True, done=True, unterminated=True),
    ],
    ids=str,
)
def test_a_fault_reads_as_the_rule_that_makes_it(
    recording_sandbox: Sandbox, scale: Scale, fault: Fault
) -> None:
    recording_sandbox.inject(str(fault))  # as the request log and Exchange.fault show it
    with contextlib.suppress(errors.APIError):
        list(scale.stream(MODEL, "Alice", max_tokens=2))
    assert recording_sandbox.exchanges[-1].fault == fault
