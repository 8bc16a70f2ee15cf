"""complete_many / acomplete_many against the sandbox on a real socket."""

# ruff: noqa: F811  (the shared fixtures are imported, then named as parameters)

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from helpers import Held, LocalServer, batch_threads, json_reply, scale_body, wait_until
from sandbox_fixtures import _no_faults_left, counted_sandbox, recording_sandbox  # noqa: F401

from wrapper import BatchResult, RetryPolicy
from wrapper.batch import FORGIVEN_429S
from wrapper.errors import APITimeoutError, BadRequestError, RateLimitError
from wrapper.gradient import AsyncGradient
from wrapper.sandbox import Sandbox
from wrapper.scale import AsyncScale, Scale

SCALE_MODEL = "llama-3-8b-instruct"
GRADIENT_MODEL = "nous-hermes2"


@pytest.fixture
def scale(counted_sandbox: Sandbox) -> Iterator[Scale]:
    with Scale(api_key="k", account_id="a", base_url=counted_sandbox.scale_base_url) as client:
        yield client


def test_2000_prompts_never_exceed_the_concurrency_and_each_comes_back_once(
    counted_sandbox: Sandbox, scale: Scale
) -> None:
    prompts = (f"Alice {i}" for i in range(2_000))
    indices = [r.index for r in scale.complete_many(SCALE_MODEL, prompts, concurrency=32, max_tokens=1)]
    assert sorted(indices) == list(range(2_000))
    stats = counted_sandbox.stats()
    assert stats.requests == 2_000
    assert 1 < stats.max_in_flight <= 32
    assert wait_until(lambda: not batch_threads())  # idle workers exit once the batch is over


async def test_2000_prompts_async_never_exceed_the_concurrency(counted_sandbox: Sandbox) -> None:
    async with AsyncGradient(
        access_token="t", workspace_id="w", base_url=counted_sandbox.gradient_base_url
    ) as gradient:
        results = gradient.complete_many(
            GRADIENT_MODEL, (f"Alice {i}" for i in range(2_000)), concurrency=32, max_generated_token_count=1
        )
        indices = [r.index async for r in results if r.ok]
    assert sorted(indices) == list(range(2_000))
    stats = counted_sandbox.stats()
    assert stats.requests == 2_000
    assert 1 < stats.max_in_flight <= 32


def test_ordered_results_come_in_input_order(counted_sandbox: Sandbox, scale: Scale) -> None:
    counted_sandbox.inject(
        delay=0.02, rate=0.2
    )  # some answers late, so finishing order differs from input order
    results = list(
        scale.complete_many(SCALE_MODEL, [f"p{i}" for i in range(200)], concurrency=8, ordered=True)
    )
    assert [r.index for r in results] == list(range(200))
    assert all(r.completion is not None and r.completion.text for r in results)
    assert counted_sandbox.stats().max_in_flight <= 8


async def test_ordered_results_come_in_input_order_async(counted_sandbox: Sandbox) -> None:
    counted_sandbox.inject(delay=0.02, rate=0.2)
    async with AsyncScale(api_key="k", account_id="a", base_url=counted_sandbox.scale_base_url) as scale:
        indices = [
            r.index async for r in scale.complete_many(SCALE_MODEL, ["p"] * 200, concurrency=8, ordered=True)
        ]
    assert indices == list(range(200))


class _Sampler:
    """Samples the sandbox's request count every few ms, to find the pauses of a batch."""

    def __init__(self, counted_sandbox: Sandbox) -> None:
        self._sb = counted_sandbox
        self._stop = threading.Event()
        self.samples: list[tuple[float, int]] = []
        self._thread = threading.Thread(target=self._run)

    def _run(self) -> None:
        while not self._stop.wait(0.005):
            self.samples.append((time.monotonic(), self._sb.stats().requests))

    def __enter__(self) -> _Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def longest_pause(self) -> float:
        """The longest time the request count stood still, while the batch still had work."""
        longest, since, count = 0.0, self.samples[0][0], self.samples[0][1]
        for at, requests in self.samples:
            if requests != count:
                longest, since, count = max(longest, at - since), at, requests
        return longest


def test_a_429_burst_pauses_the_whole_batch_then_it_recovers(counted_sandbox: Sandbox, scale: Scale) -> None:
    counted_sandbox.inject(status=429, retry_after_ms=300, count=3, api="scale")
    with _Sampler(counted_sandbox) as sampler:
        results = list(scale.complete_many(SCALE_MODEL, ["p"] * 300, concurrency=16, max_tokens=1))
    assert sorted(r.index for r in results) == list(range(300))
    assert all(r.ok for r in results)
    assert counted_sandbox.stats().requests == 303
    # One worker's 429 held all sixteen: nothing was sent for the Retry-After (per-request
    # backoff would have let the other fifteen keep the server busy).
    assert sampler.longest_pause() >= 0.25


async def test_a_429_burst_pauses_the_whole_async_batch(counted_sandbox: Sandbox) -> None:
    counted_sandbox.inject(status=429, retry_after_ms=300, count=3, api="scale")
    async with AsyncScale(api_key="k", account_id="a", base_url=counted_sandbox.scale_base_url) as scale:
        with _Sampler(counted_sandbox) as sampler:
            results = [
                r async for r in scale.complete_many(SCALE_MODEL, ["p"] * 300, concurrency=16, max_tokens=1)
            ]
    assert sorted(r.index for r in results if r.ok) == list(range(300))
    assert sampler.longest_pause() >= 0.25


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_a_batch_wide_pause_is_cut_as_the_retry_policy_cuts_retry_after(
    counted_sandbox: Sandbox, mode: str
) -> None:
    """A 429 asking for 30 s pauses the batch no longer than each request would wait for it (the policy's
    ``max_retry_after``): every prompt completes within its deadline."""
    counted_sandbox.inject(status=429, retry_after=30, count=1, api="scale")
    options = {"retry": RetryPolicy(max_retry_after=0.05), "deadline": 5, "max_tokens": 1}
    results = await _batch(counted_sandbox, mode, ["p"] * 6, concurrency=2, **options)
    assert sorted(r.index for r in results if r.ok) == list(range(6))
    assert counted_sandbox.stats().requests == 7  # the 429 retried once, after the policy's wait


@pytest.mark.serial  # a wall-clock time: the batch ends at its prompts' deadline, not after the pause
@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_a_batch_wide_pause_longer_than_the_deadline_ends_each_prompt_at_it_unsent(
    counted_sandbox: Sandbox, mode: str
) -> None:
    """A pause longer than what is left of the calls' deadline ends them at it, unsent: a batch given
    ``deadline=1`` is not held 30 s by one 429's Retry-After (it was, then sent every prompt)."""
    counted_sandbox.inject(status=429, retry_after=30, count=1, api="scale")
    started = time.monotonic()
    results = await _batch(
        counted_sandbox, mode, ["p"] * 6, concurrency=2, deadline=1, max_tokens=1, return_exceptions=True
    )
    assert time.monotonic() - started < 10  # the deadline, and a busy machine's margin; not the 30 s
    assert sorted(r.index for r in results) == list(range(6))
    failed = [r.error for r in results if r.error is not None]
    assert len(failed) >= 3
    assert all(isinstance(error, APITimeoutError | RateLimitError) for error in failed), failed
    assert counted_sandbox.stats().requests <= 4  # those sent before the 429 came back, at most


async def _batch(sandbox: Sandbox, mode: str, prompts: list[str], **kwargs: Any) -> list[BatchResult]:
    if mode == "sync":
        with Scale(api_key="k", account_id="a", base_url=sandbox.scale_base_url) as client:
            return list(client.complete_many(SCALE_MODEL, prompts, **kwargs))
    async with AsyncScale(api_key="k", account_id="a", base_url=sandbox.scale_base_url) as aclient:
        return [r async for r in aclient.complete_many(SCALE_MODEL, prompts, **kwargs)]


def test_out_of_retries_a_429_is_a_typed_error(counted_sandbox: Sandbox) -> None:
    model = "mistral-7b-instruct"
    refusals = FORGIVEN_429S + 2  # what the batch forgives, then a try and its one retry
    counted_sandbox.inject(status=429, retry_after_ms=1, count=refusals, api="scale", model=model)
    with Scale(api_key="k", account_id="a", base_url=counted_sandbox.scale_base_url, max_retries=1) as scale:
        results = list(scale.complete_many(model, ["p"], return_exceptions=True))
    assert [type(r.error).__name__ for r in results] == ["RateLimitError"]
    assert counted_sandbox.stats().requests == refusals


def _counted(n: int, pulled: list[int]) -> Iterator[str]:
    for i in range(n):
        pulled[0] += 1
        yield f"p{i}"


@pytest.mark.parametrize("ordered", [False, True])
def test_a_generator_is_not_read_ahead_of_the_window(scale: Scale, ordered: bool) -> None:
    pulled = [0]
    received = 0
    for _ in scale.complete_many(
        SCALE_MODEL, _counted(300, pulled), concurrency=8, ordered=ordered, max_tokens=1
    ):
        received += 1
        assert pulled[0] - received < 8
    assert received == 300


async def test_an_async_generator_is_not_read_ahead_of_the_window(counted_sandbox: Sandbox) -> None:
    pulled = 0

    async def prompts() -> AsyncIterator[str]:
        nonlocal pulled
        for i in range(300):
            pulled += 1
            yield f"p{i}"

    received = 0
    async with AsyncScale(api_key="k", account_id="a", base_url=counted_sandbox.scale_base_url) as scale:
        async for _ in scale.complete_many(SCALE_MODEL, prompts(), concurrency=8, max_tokens=1):
            received += 1
            assert pulled - received < 8
    assert received == 300


def test_return_exceptions_yields_typed_errors(counted_sandbox: Sandbox, scale: Scale) -> None:
    counted_sandbox.inject(status=400, count=3, api="scale")
    results = list(scale.complete_many(SCALE_MODEL, ["p"] * 50, concurrency=4, return_exceptions=True))
    failed = [r for r in results if not r.ok]
    assert len(results) == 50
    assert len(failed) == 3
    assert all(isinstance(r.error, BadRequestError) and r.completion is None for r in failed)
    assert all(r.completion is not None for r in results if r.ok)


def test_the_first_failure_raises_and_stops_the_batch(counted_sandbox: Sandbox, scale: Scale) -> None:
    counted_sandbox.inject(status=400, count=1, api="scale")
    with pytest.raises(BadRequestError):
        list(scale.complete_many(SCALE_MODEL, ["p"] * 1000, concurrency=4))
    assert counted_sandbox.stats().requests < 1000
    assert wait_until(lambda: not batch_threads())


def test_a_failure_raises_without_waiting_for_requests_in_flight(server: LocalServer) -> None:
    held = Held(json_reply(200, scale_body()))

    def refused_once_the_others_are_held(handler: Any) -> None:
        wait_until(lambda: held.held == 3, timeout=10)
        json_reply(400, {"detail": "bad prompt"})(handler)

    server.script(refused_once_the_others_are_held, held)
    try:
        with Scale(api_key="k", account_id="a", base_url=server.url, timeout=10) as scale:
            with pytest.raises(BadRequestError):
                list(scale.complete_many(SCALE_MODEL, ["p"] * 4, concurrency=4))
            # Raised while the server still holds the other three: nothing waited for them.
            assert (held.held, held.answered) == (3, 0)
    finally:
        held.release()
    assert wait_until(lambda: not batch_threads())


def test_breaking_out_early_leaks_nothing(counted_sandbox: Sandbox, scale: Scale) -> None:
    for result in scale.complete_many(SCALE_MODEL, _counted(10_000, [0]), concurrency=8):
        assert isinstance(result, BatchResult)
        break
    assert wait_until(lambda: not batch_threads())  # the requests in flight finish on their own
    assert wait_until(lambda: counted_sandbox.stats().in_flight == 0)
    assert counted_sandbox.stats().requests <= 9  # the window in flight at the break, and nothing after


@pytest.mark.serial  # closing within 0.5 s
async def test_closing_an_async_batch_early_cancels_the_requests_in_flight(counted_sandbox: Sandbox) -> None:
    counted_sandbox.inject(delay=1, count=7, api="scale")  # seven of the first eight requests are held 1 s
    async with AsyncScale(api_key="k", account_id="a", base_url=counted_sandbox.scale_base_url) as scale:
        results = scale.complete_many(SCALE_MODEL, ["p"] * 100, concurrency=8)
        first = await anext(results)
        started = time.monotonic()
        await results.aclose()
        assert time.monotonic() - started < 0.5  # not waiting for the held requests
    assert first.ok
    assert asyncio.all_tasks() == {asyncio.current_task()}
    assert counted_sandbox.stats().requests < 100
    for _ in range(40):  # the server finishes the abandoned requests within their delay
        if not counted_sandbox.stats().in_flight:
            break
        await asyncio.sleep(0.05)
    assert counted_sandbox.stats().in_flight == 0


@pytest.mark.parametrize(("prompt", "rule"), [("", "must not be empty"), ("bad \ud800", "lone surrogate")])
def test_a_prompt_refused_before_sending_is_named_by_its_index(scale: Scale, prompt: str, rule: str) -> None:
    """return_exceptions keeps API errors; a prompt refused before sending ends the batch, saying which."""
    with pytest.raises(ValueError, match=rf"{rule}.*\(the prompt at index 2\)$"):
        list(scale.complete_many(SCALE_MODEL, ["a", "b", prompt, "c"], concurrency=1, return_exceptions=True))


def test_bad_arguments_fail_before_any_request(counted_sandbox: Sandbox, scale: Scale) -> None:
    with pytest.raises(ValueError, match="concurrency"):
        scale.complete_many(SCALE_MODEL, ["p"], concurrency=0)
    with pytest.raises(TypeError, match="not one string"):
        scale.complete_many(SCALE_MODEL, "one prompt")
    with pytest.raises(TypeError, match="strings"):
        list(scale.complete_many(SCALE_MODEL, [b"bytes"]))  # type: ignore[list-item]
    with pytest.raises(ValueError, match="temperature"):
        list(scale.complete_many(SCALE_MODEL, ["p"] * 10, temperature=5))
    assert counted_sandbox.stats().requests == 0
