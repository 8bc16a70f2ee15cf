"""A batch over routes runs at the sum of their limits, split by them, with almost no 429s (rates:
``serial``). Each route's sandbox keeps the route's limit."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from wrapper import AsyncRouter, BatchStats, Route, Router
from wrapper.sandbox import Sandbox
from wrapper.scale import AsyncScale, Scale

MODEL = "llama-3-8b-instruct"
LIMITS = {"big": 1800, "small": 600}  # requests a minute; 2,400 together
PROMPTS = 200  # five seconds at 2,400 a minute


@pytest.fixture
def sandboxes() -> Iterator[dict[str, Sandbox]]:
    with Sandbox(rpm=LIMITS["big"]) as big, Sandbox(rpm=LIMITS["small"]) as small:
        yield {"big": big, "small": small}


def _routes(sandboxes: dict[str, Sandbox], cls: Any) -> list[Route]:
    return [
        Route(cls(api_key="key", base_url=sandboxes[name].scale_base_url, timeout=10), MODEL, name=name,
              requests_per_minute=rpm)
        for name, rpm in LIMITS.items()
    ]  # fmt: skip


def _at_the_sum_of_the_limits(stats: BatchStats, sandboxes: dict[str, Sandbox]) -> None:
    total = sum(LIMITS.values())
    assert stats.completed == PROMPTS
    assert 0.9 * total <= stats.requests_per_minute <= 1.1 * total, stats
    sent = [sandbox.stats() for sandbox in sandboxes.values()]
    assert sum(s.rate_limited for s in sent) <= 0.01 * sum(s.requests for s in sent), sent
    for name, rpm in LIMITS.items():
        share = stats.routes[name].completed / PROMPTS
        assert abs(share - rpm / total) <= 0.07, (name, share)


@pytest.mark.serial  # a rate
async def test_an_async_batch_over_two_routes_runs_at_the_sum_of_their_limits(
    sandboxes: dict[str, Sandbox],
) -> None:
    async with AsyncRouter(_routes(sandboxes, AsyncScale)) as router:
        batch = router.complete_many(["Alice was"] * PROMPTS, concurrency=32, max_tokens=2)
        results = [r async for r in batch]
    assert all(r.ok for r in results)
    _at_the_sum_of_the_limits(batch.stats, sandboxes)


@pytest.mark.serial  # a rate
def test_a_sync_batch_over_two_routes_runs_at_the_sum_of_their_limits(sandboxes: dict[str, Sandbox]) -> None:
    with Router(_routes(sandboxes, Scale)) as router:
        batch = router.complete_many(["Alice was"] * PROMPTS, concurrency=32, max_tokens=2)
        results = list(batch)
    assert all(r.ok for r in results)
    _at_the_sum_of_the_limits(batch.stats, sandboxes)
