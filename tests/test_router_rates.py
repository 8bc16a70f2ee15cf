"""A batch over routes runs at the sum of their limits, split by them, with almost no 429s, and a fan-out
paces each route to its own (rates: ``serial``). Each route's sandbox keeps the route's limit."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest

from wrapper import AsyncRouter, BatchStats, Route, Router
from wrapper.sandbox import Sandbox
from wrapper.scale import AsyncScale, Scale

pytestmark = pytest.mark.long("serial")  # 25 s of serial tests: handed out last, they ended the part alone

MODEL = "llama-3-8b-instruct"
SECONDS = 5  # of batch at the sum of the limits: long enough for a rate within 10%


@pytest.fixture(params=[{"us": 600, "eu": 600}, {"big": 1800, "small": 600}], ids=["600+600", "1800+600"])
def limits(request: pytest.FixtureRequest) -> dict[str, int]:
    """Each route's requests a minute, which its sandbox keeps."""
    return dict(request.param)


@pytest.fixture
def sandboxes(limits: dict[str, int]) -> Iterator[dict[str, Sandbox]]:
    with contextlib.ExitStack() as stack:
        yield {name: stack.enter_context(Sandbox(rpm=rpm)) for name, rpm in limits.items()}


def _prompts(limits: dict[str, int]) -> list[str]:
    return ["Alice was"] * (sum(limits.values()) * SECONDS // 60)


def _routes(sandboxes: dict[str, Sandbox], limits: dict[str, int], cls: Any) -> list[Route]:
    return [
        Route(cls(api_key="key", base_url=sandboxes[name].scale_base_url, timeout=10), MODEL, name=name,
              requests_per_minute=rpm)
        for name, rpm in limits.items()
    ]  # fmt: skip


def _at_the_sum_of_the_limits(
    stats: BatchStats, sandboxes: dict[str, Sandbox], limits: dict[str, int]
) -> None:
    total, prompts = sum(limits.values()), len(_prompts(limits))
    assert stats.completed == prompts
    assert 0.9 * total <= stats.requests_per_minute <= 1.1 * total, stats
    sent = [sandbox.stats() for sandbox in sandboxes.values()]
    assert sum(s.rate_limited for s in sent) <= 0.01 * sum(s.requests for s in sent), sent
    for name, rpm in limits.items():  # split by the limits
        share = stats.routes[name].completed / prompts
        assert abs(share - rpm / total) <= 0.07, (name, share)


@pytest.mark.serial  # a rate
async def test_an_async_batch_over_two_routes_runs_at_the_sum_of_their_limits(
    sandboxes: dict[str, Sandbox], limits: dict[str, int]
) -> None:
    async with AsyncRouter(_routes(sandboxes, limits, AsyncScale)) as router:
        batch = router.complete_many(_prompts(limits), concurrency=32, max_tokens=2)
        results = [r async for r in batch]
    assert all(r.ok for r in results)
    _at_the_sum_of_the_limits(batch.stats, sandboxes, limits)


@pytest.mark.serial  # a rate
def test_a_sync_batch_over_two_routes_runs_at_the_sum_of_their_limits(
    sandboxes: dict[str, Sandbox], limits: dict[str, int]
) -> None:
    with Router(_routes(sandboxes, limits, Scale)) as router:
        batch = router.complete_many(_prompts(limits), concurrency=32, max_tokens=2)
        results = list(batch)
    assert all(r.ok for r in results)
    _at_the_sum_of_the_limits(batch.stats, sandboxes, limits)


@pytest.fixture
def two_limits() -> Iterator[dict[str, Sandbox]]:
    """Two deployments, each keeping its own limit: 1,200 and 600 requests a minute."""
    with Sandbox(rpm=1200) as fast, Sandbox(rpm=600) as slow:
        yield {"fast": fast, "slow": slow}


@pytest.mark.serial  # a rate
def test_a_fan_out_paces_each_route_to_its_own_limits(two_limits: dict[str, Sandbox]) -> None:
    limits = {"fast": 1200, "slow": 600}
    with contextlib.ExitStack() as stack:
        routes = [
            Route(
                stack.enter_context(Scale(api_key="k", base_url=two_limits[name].scale_base_url, timeout=10)),
                MODEL,
                name=name,
                requests_per_minute=rpm,
            )
            for name, rpm in limits.items()
        ]
        batch = Router(routes).fan_out(["Alice"] * 40, concurrency=16, max_tokens=1)
        results = list(batch)
    assert len(results) == 80
    assert all(r.ok for r in results)
    for name, sandbox in two_limits.items():
        sent = sandbox.stats()
        assert sent.requests >= 40
        assert sent.rate_limited <= 2, (name, sent)  # paced to its own limit, not to the other's
