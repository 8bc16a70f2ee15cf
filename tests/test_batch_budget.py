"""A batch's ``Budget``: nothing new is sent once it is reached, the prompts in flight finish, the
overspend is at most what was in flight, and the same budget with a higher cap carries on."""

# ruff: noqa: F811  (the shared fixtures are imported, then named as parameters)

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sandbox_fixtures import _no_faults_left, counted_sandbox, recording_sandbox  # noqa: F401

from wrapper import Route, Router
from wrapper.batch import Budget, estimate_tokens
from wrapper.sandbox import Sandbox
from wrapper.scale import AsyncScale, Scale

MODEL = "llama-3-8b-instruct"
PROMPTS = [f"Alice number {i}" for i in range(120)]
MAX_TOKENS = 4


@pytest.fixture
def scale(counted_sandbox: Sandbox) -> Iterator[Scale]:
    with Scale(api_key="k", account_id="a", base_url=counted_sandbox.scale_base_url, timeout=10) as client:
        yield client


@pytest.mark.parametrize("concurrency", [1, 16])
def test_a_token_budget_stops_the_batch_and_a_higher_cap_goes_on(
    counted_sandbox: Sandbox, scale: Scale, concurrency: int
) -> None:
    budget = Budget(tokens=300)
    batch = scale.complete_many(MODEL, PROMPTS, concurrency=concurrency, budget=budget, max_tokens=MAX_TOKENS)
    first = list(batch)
    assert budget.reached
    assert 0 < len(first) < len(PROMPTS)
    assert counted_sandbox.stats().requests == len(first)  # the prompts held back were not sent
    spent = sum(r.completion.prompt_tokens + r.completion.response_tokens for r in first)  # type: ignore[operator, union-attr]
    assert budget.spent_tokens == batch.stats.prompt_tokens + batch.stats.response_tokens == spent
    most = max(estimate_tokens(prompt, {"max_tokens": MAX_TOKENS}, "max_tokens") for prompt in PROMPTS)
    assert spent <= 300  # each estimate is at least what its answer used: nothing went past the cap
    assert spent > 300 - concurrency * most  # and it stopped only when the next would not fit

    done = {r.index for r in first}
    rest = [prompt for index, prompt in enumerate(PROMPTS) if index not in done]
    budget.tokens = 100_000
    second = list(
        scale.complete_many(MODEL, rest, concurrency=concurrency, budget=budget, max_tokens=MAX_TOKENS)
    )
    assert not budget.reached
    assert sorted(r.index for r in second) == list(range(len(rest)))  # to the end, each once
    assert counted_sandbox.stats().requests == len(PROMPTS)


async def test_a_request_budget_sends_exactly_that_many_prompts(counted_sandbox: Sandbox) -> None:
    budget = Budget(requests=25)
    async with AsyncScale(api_key="k", account_id="a", base_url=counted_sandbox.scale_base_url) as scale:
        batch = scale.complete_many(MODEL, PROMPTS, concurrency=16, budget=budget, max_tokens=1)
        results = [r async for r in batch]
    assert len(results) == budget.spent_requests == counted_sandbox.stats().requests == 25
    assert budget.reached


def test_a_prompt_in_flight_when_the_budget_is_reached_is_retried_to_its_end(
    counted_sandbox: Sandbox, scale: Scale, sleeps: list[float]
) -> None:
    counted_sandbox.inject(status=503, count=2, api="scale")
    budget = Budget(requests=1)
    results = list(scale.complete_many(MODEL, PROMPTS, budget=budget, max_tokens=1))
    # one prompt (whichever worker thread asked first), retried to its end: its retries are not new prompts
    assert [r.ok for r in results] == [True]
    assert counted_sandbox.stats().requests == 3


def test_what_an_earlier_run_spent_counts(scale: Scale) -> None:
    budget = Budget(requests=10, spent_requests=10)
    assert list(scale.complete_many(MODEL, PROMPTS, budget=budget)) == []
    assert budget.reached


def test_a_fan_out_counts_each_target_s_prompt(counted_sandbox: Sandbox, scale: Scale) -> None:
    router = Router([Route(scale, MODEL), Route(scale, "mistral-7b-instruct")])
    budget = Budget(requests=7)
    results = list(router.fan_out(PROMPTS, concurrency=4, budget=budget, max_tokens=1))
    assert len(results) == counted_sandbox.stats().requests == 7


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"tokens": -1}, "Budget: tokens must be an integer >= 0"),
        ({"requests": 2.5}, "Budget: requests must be an integer >= 0"),
        ({"spent_tokens": None}, "Budget: spent_tokens must be an integer >= 0"),
    ],
)
def test_bad_caps_are_refused_naming_the_field(arguments: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Budget(**arguments)  # type: ignore[arg-type]


def test_a_budget_that_is_not_one_is_a_type_error(scale: Scale) -> None:
    with pytest.raises(TypeError, match=r"budget must be a wrapper\.batch\.Budget"):
        scale.complete_many(MODEL, PROMPTS, budget=1000)  # type: ignore[arg-type]
