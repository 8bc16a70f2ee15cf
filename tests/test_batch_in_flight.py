"""Concurrency N means N requests in flight, sync and async, above the usual pool sizes of 100."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from helpers import fast_server

from wrapper.sandbox import Sandbox
from wrapper.scale import AsyncScale, Scale

SCALE_MODEL = "llama-3-8b-instruct"


@pytest.fixture(scope="module")
def busy_sandbox() -> Iterator[Sandbox]:
    """A sandbox that holds every request a moment, so a batch's requests overlap."""
    with Sandbox(seed=0) as sb:
        yield sb


@pytest.fixture
def held(busy_sandbox: Sandbox) -> Iterator[Sandbox]:
    """Every request held 2 s: long enough for 150 threads to connect and send on a busy machine."""
    busy_sandbox.clear_faults()
    busy_sandbox.reset_stats()
    busy_sandbox.inject(delay=2, rate=1.0)
    yield busy_sandbox
    busy_sandbox.clear_faults()


@pytest.mark.serial  # an in-flight peak: 150 requests within a 2 s hold
def test_sync_batch_has_150_in_flight(held: Sandbox) -> None:
    with Scale(api_key="k", account_id="a", base_url=held.scale_base_url, timeout=10) as scale:
        results = list(scale.complete_many(SCALE_MODEL, ["p"] * 150, concurrency=150, max_tokens=1))
    assert all(r.ok for r in results)
    assert held.stats().max_in_flight == 150


@pytest.mark.serial  # an in-flight peak: 150 requests within a 2 s hold
async def test_async_batch_has_150_in_flight(held: Sandbox) -> None:
    async with AsyncScale(api_key="k", account_id="a", base_url=held.scale_base_url, timeout=10) as scale:
        results = [
            r async for r in scale.complete_many(SCALE_MODEL, ["p"] * 150, concurrency=150, max_tokens=1)
        ]
    assert all(r.ok for r in results)
    assert held.stats().max_in_flight == 150


@pytest.mark.timeout(110)
def test_sync_batch_of_600_at_200_never_hangs_or_errs() -> None:
    # 6,000 requests on 200 threads, each batch on its own threads and the client's one pool
    with (
        fast_server(delay=0.05) as url,
        Scale(api_key="k", account_id="a", base_url=url, timeout=10) as scale,
    ):
        for _ in range(10):
            batch = scale.complete_many("bench-model", ["p"] * 600, concurrency=200, max_tokens=1)
            assert sum(r.ok for r in batch) == 600
            assert batch.stats.failed == 0
