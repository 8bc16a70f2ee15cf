"""A fan-out (``Router.fan_out``, ``AsyncRouter.fan_out``): every prompt to each route, one result per
(prompt, route) naming it, a failure the route's own error (each route paced to its own limits: in
tests/test_router_rates.py, with the other rates)."""

# ruff: noqa: F811  (the shared fixtures are imported, then named as parameters)

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import AsyncIterator, Iterator

import pytest
from sandbox_fixtures import _no_faults_left, counted_sandbox, recording_sandbox  # noqa: F401

from wrapper import AsyncRouter, Route, Router
from wrapper.batch import fan_out_with
from wrapper.gradient import AsyncGradient
from wrapper.sandbox import Sandbox
from wrapper.scale import AsyncScale, Scale

LLAMA, MISTRAL = "llama-3-8b-instruct", "mistral-7b-instruct"


@pytest.fixture
def scale(counted_sandbox: Sandbox) -> Iterator[Scale]:
    with Scale(api_key="k", account_id="a", base_url=counted_sandbox.scale_base_url, timeout=10) as client:
        yield client


def test_every_prompt_goes_to_each_model_once_and_each_result_names_its_target(
    counted_sandbox: Sandbox, scale: Scale
) -> None:
    prompts = [f"Alice number {i}" for i in range(30)]
    router = Router([Route(scale, LLAMA), Route(scale, MISTRAL, name="mistral")])
    batch = router.fan_out(prompts, concurrency=8, ordered=True, max_tokens=3)
    results = list(batch)
    assert [(r.index, r.target) for r in results] == [(i, t) for i in range(30) for t in (LLAMA, "mistral")]
    assert all(r.ok and r.completion is not None and r.completion.route == r.target for r in results)
    by_model = Counter(exchange.path.rsplit("/", 2)[-2] for exchange in counted_sandbox.exchanges[-60:])
    assert by_model == {LLAMA: 30, MISTRAL: 30}  # each prompt sent to each model, once
    assert {name: stats.completed for name, stats in batch.stats.routes.items()} == {LLAMA: 30, "mistral": 30}
    assert batch.stats.completed == 60


def test_a_failing_target_gives_its_own_error_and_the_other_answers(
    counted_sandbox: Sandbox, scale: Scale, sleeps: list[float]
) -> None:
    counted_sandbox.inject(status=500, rate=1.0, api="scale", model=MISTRAL)
    with scale.with_options(max_retries=1) as retried:
        router = Router([Route(retried, LLAMA), Route(retried, MISTRAL)])
        results = list(router.fan_out(["Alice", "The Queen"], return_exceptions=True, max_tokens=2))
    assert sorted((r.index, r.target, r.ok) for r in results) == [
        (0, LLAMA, True),
        (0, MISTRAL, False),
        (1, LLAMA, True),
        (1, MISTRAL, False),
    ]
    failed = [r.error for r in results if r.error is not None]
    assert {type(error).__name__ for error in failed} == {"InternalServerError"}  # not AllRoutesFailedError
    assert all(r.to_dict()["error"]["status"] == 500 for r in results if not r.ok)  # type: ignore[index]
    assert counted_sandbox.stats().requests == 2 + 2 * 2  # each failing prompt retried once, on its own route


async def test_an_async_fan_out_over_both_apis_sends_each_its_own_max_tokens(
    counted_sandbox: Sandbox,
) -> None:
    async with contextlib.AsyncExitStack() as stack:
        scale = await stack.enter_async_context(
            AsyncScale(api_key="k", account_id="a", base_url=counted_sandbox.scale_base_url)
        )
        gradient = await stack.enter_async_context(
            AsyncGradient(access_token="t", workspace_id="w", base_url=counted_sandbox.gradient_base_url)
        )
        router = AsyncRouter(
            [Route(scale, LLAMA, name="scale"), Route(gradient, "nous-hermes2", name="gradient")]
        )
        prompts = (f"Alice {i}" async for i in _count(20))
        results = [r async for r in router.fan_out(prompts, concurrency=6, max_tokens=2)]
    assert sorted((r.index, r.target) for r in results) == [
        (i, t) for i in range(20) for t in ("gradient", "scale")
    ]
    assert all(r.completion is not None and len(r.completion.text.split()) <= 2 for r in results)


async def _count(n: int) -> AsyncIterator[int]:
    for i in range(n):
        yield i


def test_fan_out_with_takes_any_targets_and_refuses_a_bad_one(scale: Scale) -> None:
    targets = {"short": lambda prompt, **kw: scale.complete(LLAMA, prompt, max_tokens=1, **kw)}
    [result] = list(fan_out_with(targets, ["Alice"]))
    assert (result.index, result.target, result.completion and result.completion.response_tokens) == (
        0,
        "short",
        1,
    )
    with pytest.raises(TypeError, match="non-empty mapping"):
        fan_out_with({}, ["Alice"])
