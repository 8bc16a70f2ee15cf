"""Concurrency N means N requests in flight, sync and async, above the usual pool sizes of 100."""

from __future__ import annotations

import inspect
from collections.abc import Iterator

import pytest

from wrapper.sandbox import Sandbox
from wrapper.scale import AsyncScale, Scale

SCALE_MODEL = "llama-3-8b-instruct"
POOLS_SIZED = "limits" in inspect.signature(Scale).parameters  # clients whose pools have no connection cap
pools_sized = pytest.mark.xfail(
    not POOLS_SIZED, reason="the default connection pools cap requests in flight at 100", strict=True
)


@pytest.fixture(scope="module")
def busy_sandbox() -> Iterator[Sandbox]:
    """A sandbox that holds every request a moment, so a batch's requests overlap."""
    with Sandbox(seed=0) as sb:
        yield sb


@pytest.fixture
def held(busy_sandbox: Sandbox) -> Iterator[Sandbox]:
    busy_sandbox.clear_faults()
    busy_sandbox.reset_stats()
    busy_sandbox.inject(delay=0.5, rate=1.0)
    yield busy_sandbox
    busy_sandbox.clear_faults()


@pools_sized
def test_sync_batch_has_150_in_flight(held: Sandbox) -> None:
    with Scale(api_key="k", account_id="a", base_url=held.scale_base_url, timeout=10) as scale:
        results = list(scale.complete_many(SCALE_MODEL, ["p"] * 300, concurrency=150, max_tokens=1))
    assert all(r.ok for r in results)
    assert held.stats().max_in_flight == 150


@pools_sized
async def test_async_batch_has_150_in_flight(held: Sandbox) -> None:
    async with AsyncScale(api_key="k", account_id="a", base_url=held.scale_base_url, timeout=10) as scale:
        results = [
            r async for r in scale.complete_many(SCALE_MODEL, ["p"] * 300, concurrency=150, max_tokens=1)
        ]
    assert all(r.ok for r in results)
    assert held.stats().max_in_flight == 150


@pytest.mark.xfail(
    not POOLS_SIZED, reason="threads queue on a capped pool and may hang until the timeout", run=False
)
@pytest.mark.timeout(110)
def test_sync_batch_of_600_at_200_never_hangs_or_errs(busy_sandbox: Sandbox) -> None:
    busy_sandbox.clear_faults()
    busy_sandbox.inject(delay=0.02, rate=1.0)
    try:
        with Scale(api_key="k", account_id="a", base_url=busy_sandbox.scale_base_url, timeout=10) as scale:
            for _ in range(20):
                busy_sandbox.reset_stats()
                batch = scale.complete_many(SCALE_MODEL, ["p"] * 600, concurrency=200, max_tokens=1)
                assert sum(r.ok for r in batch) == 600
                assert batch.stats.failed == 0
                assert busy_sandbox.stats().max_in_flight > 100
    finally:
        busy_sandbox.clear_faults()
