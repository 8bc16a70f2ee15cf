"""Chaos: 1,000 prompts through ``complete_many`` while the sandbox breaks about one request in five.

The sandbox draws, for each request, each of four faults with probability ``RATE``: a 429 with a short
``Retry-After``, a 503, a connection reset, and a delay past the client's timeout; and, more rarely, a
200 whose body is not JSON. Every prompt must end with exactly one result or one typed error; no prompt
may use more than ``max_retries`` retries (counted on the wire and by the sandbox), where a 429 uses
none (the batch slows down instead), up to ``FORGIVEN_429S`` of them; a retryable error
may end a prompt only once its budget is spent; and nothing may hang.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from helpers import batch_threads, wait_until

from wrapper import BatchResult, RetryPolicy
from wrapper.batch import FORGIVEN_429S
from wrapper.errors import APIResponseValidationError, BadRequestError, ContentFlaggedError
from wrapper.sandbox import Sandbox

from ._clients import MODELS, sandbox_client
from ._tap import Exchange, Tap

PROMPTS = 1_000
RATE = 0.055
"""Per fault; four faults drawn independently hit 1 - (1 - RATE)**4, about 20%, of requests."""
FAULTS: list[dict[str, Any]] = [
    {"status": 429, "retry_after": 0.01},
    {"status": 503},
    {"reset": True},
    {"delay": 0.6},
]
MALFORMED_RATE = 0.01
"""A 200 with a body that is not JSON: not retried, so it ends its prompt with APIResponseValidationError."""
TIMEOUT = 0.25
BATCH: dict[str, Any] = {"concurrency": 32, "return_exceptions": True}
MAX_RETRIES = 3


FAST_BACKOFF = RetryPolicy(initial_backoff=0.01, max_backoff=0.16)
"""Backoff from 10 ms instead of 500 ms: the run tests outcomes and budgets, not the waits."""


def _inject(fault_sandbox: Sandbox, api: str) -> None:
    for fault in FAULTS:
        fault_sandbox.inject(**fault, rate=RATE, api=api)
    fault_sandbox.inject(malformed="json", rate=MALFORMED_RATE, api=api)


def _prompts() -> Iterator[str]:
    return (f"Alice number {i} went down the rabbit hole" for i in range(PROMPTS))


def _kind(exchange: Exchange) -> str:
    if exchange.status is not None:
        return str(exchange.status)
    return type(exchange.error).__name__


def _check(
    results: list[BatchResult], fault_sandbox: Sandbox, tap: Tap | None = None, field: str = ""
) -> Counter[str]:
    """The invariants of a chaos run; with a ``tap`` (which saw every attempt), also the attempts per prompt
    and how they went (status or exception name -> count), which it returns."""
    assert sorted(r.index for r in results) == list(range(PROMPTS)), "each prompt exactly once"
    exchanges = [] if tap is None else [(json.loads(e.request.content)[field], e) for e in tap.exchanges]
    attempts = Counter(prompt for prompt, _ in exchanges)
    limited = Counter(prompt for prompt, e in exchanges if e.status == 429)
    prompts = list(_prompts())
    malformed = 0
    for result in results:
        assert (result.completion is None) != (result.error is None)
        prompt = prompts[result.index]
        tries, forgivable = attempts[prompt], min(limited[prompt], FORGIVEN_429S)
        assert tap is None or 1 <= tries <= MAX_RETRIES + 1 + forgivable, "only forgiven 429s pass the budget"
        if isinstance(result.error, APIResponseValidationError):
            malformed += 1
        elif result.error is not None:
            assert RetryPolicy().retries(result.error), result.error
            assert tap is None or tries >= MAX_RETRIES + 1, (
                "a retryable error is final once the budget is spent"
            )
    assert malformed > 0
    if tap is None:
        assert fault_sandbox.stats().requests >= PROMPTS
        return Counter()
    # Every attempt the sandbox saw was sent; a few sent on a keep-alive connection the sandbox had just
    # reset never reach it.
    assert PROMPTS <= fault_sandbox.stats().requests <= len(tap.exchanges)
    kinds = Counter(_kind(e) for e in tap.exchanges)
    faults = len(tap.exchanges) - kinds["200"]
    assert 0.15 <= faults / len(tap.exchanges) <= 0.25, kinds
    assert {"429", "503", "ReadTimeout"} <= set(kinds), kinds
    print(f"chaos: {len(tap.exchanges)} attempts, {faults} faults {dict(kinds)}, {malformed} malformed")
    return kinds


@pytest.mark.serial  # answers within a 0.25 s timeout; the share of faults
@pytest.mark.timeout(60)
def test_sync_scale_batch_survives_chaos(fault_sandbox: Sandbox) -> None:
    """In input order (``ordered=True``), on httpx's own pool."""
    _inject(fault_sandbox, "scale")
    tap = Tap(httpx.HTTPTransport())
    with (
        httpx.Client(transport=tap) as http,  # the caller's client: the caller closes it
        sandbox_client(
            fault_sandbox,
            "scale",
            timeout=TIMEOUT,
            max_retries=MAX_RETRIES,
            retry=FAST_BACKOFF,
            http_client=http,
        ) as scale,
    ):
        results = list(scale.complete_many(MODELS["scale"], _prompts(), **BATCH, ordered=True, max_tokens=4))
    assert [result.index for result in results] == list(range(PROMPTS))
    kinds = _check(results, fault_sandbox, tap, "prompt")
    assert kinds["RemoteProtocolError"] > 0, kinds  # the resets


@pytest.mark.serial  # answers within a 0.25 s timeout; the share of faults
@pytest.mark.timeout(60)
async def test_async_gradient_batch_survives_chaos(fault_sandbox: Sandbox) -> None:
    """As they finish, on the default client (its aiohttp lane, which no tap can see: outcomes only)."""
    _inject(fault_sandbox, "gradient")
    gradient = sandbox_client(
        fault_sandbox,
        "gradient",
        asynchronous=True,
        timeout=TIMEOUT,
        max_retries=MAX_RETRIES,
        retry=FAST_BACKOFF,
    )
    async with gradient:
        batch = gradient.complete_many(MODELS["gradient"], _prompts(), **BATCH, max_generated_token_count=4)
        results = [result async for result in batch]
    _check(results, fault_sandbox)
    assert asyncio.all_tasks() == {asyncio.current_task()}, "no task outlives the batch"


@pytest.mark.timeout(30)
def test_a_final_error_stops_a_sync_batch_and_its_threads(fault_sandbox: Sandbox) -> None:
    """Without ``return_exceptions`` the first final error ends the batch: raised, its workers gone."""
    fault_sandbox.inject(status=400, count=1, api="scale", rate=0.02)
    with sandbox_client(fault_sandbox, "scale", max_retries=1) as scale:
        results = scale.complete_many(MODELS["scale"], _prompts(), concurrency=16, ordered=True, max_tokens=2)
        with pytest.raises(BadRequestError):
            for _ in results:
                pass
    # Closing the client let a worker still in a request finish it. Idle workers exit at once; one
    # in a request exits when it ends (within the client's timeout).
    assert wait_until(lambda: not batch_threads(), timeout=15), batch_threads()
    assert fault_sandbox.stats().requests < PROMPTS


@pytest.mark.timeout(30)
async def test_a_final_error_stops_an_async_batch_and_its_tasks(fault_sandbox: Sandbox) -> None:
    prompts = (("contraband" if i == 300 else prompt) for i, prompt in enumerate(_prompts()))
    async with sandbox_client(fault_sandbox, "gradient", asynchronous=True, max_retries=1) as gradient:
        with pytest.raises(ContentFlaggedError):
            async for _ in gradient.complete_many(MODELS["gradient"], prompts, concurrency=16):
                pass
    assert fault_sandbox.stats().requests < PROMPTS
    assert asyncio.all_tasks() == {asyncio.current_task()}
