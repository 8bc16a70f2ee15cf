"""How a batch told no limit opens: slowly against a server's limit, at full concurrency without one.

On real sockets: the sandbox enforcing ``rpm`` (a second's budget, 20 requests, may go at once), and
the bench's server holding every answer two seconds (no limit at all). Sync and async batches alike.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import httpx
import pytest
from helpers import fast_server

from wrapper.sandbox import Sandbox
from wrapper.scale import AsyncScale, Scale

pytestmark = [
    pytest.mark.serial,  # they measure rates and requests in flight
    pytest.mark.long("serial"),  # 51 s of one process in make test
]

SCALE_MODEL = "llama-3-8b-instruct"
RPM = 1200  # 20 a second
PROMPTS = 300
IDEAL = PROMPTS * 60 / RPM  # seconds: the batch at the server's limit


@pytest.fixture
def limited() -> Iterator[Sandbox]:
    with Sandbox(rpm=RPM) as sandbox:
        yield sandbox


def _few_429s_at_nearly_the_limit(sandbox: Sandbox, elapsed: float) -> None:
    sent = sandbox.stats()
    assert sent.requests - sent.rate_limited == PROMPTS
    # Sending all 64 at once met 44 429s (the sandbox lets 20 through): the opening meets ~10.
    assert sent.rate_limited <= 0.05 * sent.requests
    assert elapsed <= 1.25 * IDEAL


def test_a_short_sync_batch_with_no_limit_given_meets_few_429s(limited: Sandbox) -> None:
    with Scale(api_key="k", account_id="a", base_url=limited.scale_base_url, timeout=30) as scale:
        batch = scale.complete_many(SCALE_MODEL, ["p"] * PROMPTS, concurrency=64, max_tokens=1)
        assert all(r.ok for r in batch)
    assert batch.stats.rate_limited == limited.stats().rate_limited
    _few_429s_at_nearly_the_limit(limited, batch.stats.elapsed)


async def test_a_short_async_batch_with_no_limit_given_meets_few_429s(limited: Sandbox) -> None:
    async with AsyncScale(api_key="k", account_id="a", base_url=limited.scale_base_url, timeout=30) as scale:
        batch = scale.complete_many(SCALE_MODEL, ["p"] * PROMPTS, concurrency=64, max_tokens=1)
        assert all([r.ok async for r in batch])
    _few_429s_at_nearly_the_limit(limited, batch.stats.elapsed)


async def test_a_batch_told_its_limit_opens_at_it_and_meets_no_429(limited: Sandbox) -> None:
    async with AsyncScale(api_key="k", account_id="a", base_url=limited.scale_base_url, timeout=30) as scale:
        batch = scale.complete_many(
            SCALE_MODEL, ["p"] * 200, concurrency=64, requests_per_minute=RPM, max_tokens=1
        )
        assert all([r.ok async for r in batch])
    assert limited.stats().rate_limited == 0
    # Paced at the limit from the first request: 200 at 20 a second, the first quarter second's at once.
    assert batch.stats.requests_per_minute == pytest.approx(RPM, rel=0.05)


@pytest.fixture(scope="module")
def held() -> Iterator[str]:
    """A server with no limit that holds every answer two seconds: its URL."""
    with fast_server(delay=2.0) as url:
        yield url


def _peak(url: str) -> int:
    """The most requests the server held at once since last asked."""
    return int(httpx.get(f"{url}/in-flight", timeout=10).json()["max_in_flight"])


def test_a_sync_batch_with_no_limit_has_500_in_flight_within_a_second_and_a_half(held: str) -> None:
    _peak(held)
    within: list[int] = []
    timer = threading.Timer(1.5, lambda: within.append(_peak(held)))  # before any answer is back
    with Scale(api_key="k", account_id="a", base_url=held, timeout=30) as scale:
        timer.start()
        try:
            results = list(scale.complete_many("bench-model", ["p"] * 1000, concurrency=500, max_tokens=1))
        finally:
            timer.join()
    assert all(r.ok for r in results)
    assert within == [500]


async def test_an_async_batch_with_no_limit_has_500_in_flight_within_a_second_and_a_half(held: str) -> None:
    _peak(held)
    async with AsyncScale(api_key="k", account_id="a", base_url=held, timeout=30) as scale:
        batch = scale.complete_many("bench-model", ["p"] * 1000, concurrency=500, max_tokens=1)

        async def consume() -> list[bool]:
            return [r.ok async for r in batch]

        consumed = asyncio.create_task(consume())
        await asyncio.sleep(1.5)  # before any answer is back
        within = await asyncio.to_thread(_peak, held)
        assert all(await consumed)
    assert within == 500
