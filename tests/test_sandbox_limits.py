"""The sandbox's rate limits: per credential, paced per second, 429 in each API's shape with Retry-After."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from typing import Any

import httpx
import pytest

from wrapper import errors
from wrapper.gradient import AsyncGradient
from wrapper.sandbox import Sandbox
from wrapper.scale import Scale

SCALE_MODEL, GRADIENT_MODEL = "llama-3-8b-instruct", "nous-hermes2"


def _scale(sb: Sandbox, key: str, **body: Any) -> httpx.Response:
    url = f"{sb.scale_base_url}/v4/models/{SCALE_MODEL}/completions"
    return httpx.post(
        url, json={"prompt": "Alice", "max_tokens": 2, **body}, headers={"x-api-key": key}, timeout=10
    )


def _gradient(sb: Sandbox, token: str) -> httpx.Response:
    url = f"{sb.gradient_base_url}/models/{GRADIENT_MODEL}/complete"
    headers = {"authorization": f"Bearer {token}", "x-gradient-workspace-id": "ws"}
    return httpx.post(url, json={"query": "Alice", "maxGeneratedTokenCount": 2}, headers=headers, timeout=10)


def _retry_after_ms(response: httpx.Response) -> int:
    """The wait a 429 asks for, after checking that its two headers agree."""
    ms = int(response.headers["retry-after-ms"])
    assert ms > 0
    assert response.headers["retry-after"] == str(math.ceil(ms / 1000))  # whole seconds, rounded up
    return ms


def test_rpm_is_paced_per_second_per_credential_with_429s_in_each_api_shape() -> None:
    # 6 a minute is a tenth of a request a second: the first request is admitted on a full budget and
    # leaves it ten seconds in debt, where a per-minute window would have let six through at once.
    with Sandbox(rpm=6) as sb:
        assert _scale(sb, "key-a").status_code == 200
        refused = _scale(sb, "key-a")
        assert refused.status_code == 429
        assert set(refused.json()) == {"detail"}
        assert "6 requests per minute" in refused.json()["detail"]
        assert _retry_after_ms(refused) <= 10_000
        assert _scale(sb, "key-b").status_code == 200  # another credential has a budget of its own

        assert _gradient(sb, "token-a").status_code == 200
        limited = _gradient(sb, "token-a")
        assert limited.status_code == 429
        assert limited.json()["type"] == "failed"
        assert "6 requests per minute" in limited.json()["message"]
        assert _retry_after_ms(limited) <= 10_000
        assert _gradient(sb, "token-b").status_code == 200
        assert sb.stats().rate_limited == 2
        assert sb.stats().requests == 6


@pytest.mark.parametrize("stream", [False, True])
def test_tpm_charges_max_tokens_then_corrects_to_the_tokens_used(stream: bool) -> None:
    # 60 a minute is one token a second, so each request leaves the budget in debt by what it cost.
    with Sandbox(tpm=60) as sb:
        answer = _scale(
            sb, "key", prompt="Alice was beginning to", max_tokens=300, temperature=0.0, stream=stream
        )
        assert answer.status_code == 200
        last = (
            json.loads(answer.text.split("data: ")[-1]) if stream else answer.json()
        )  # a stream's last event
        used = last["prompt_tokens"] + last["response_tokens"]
        assert last["response_tokens"] < 300  # stopped early: less was used than max_tokens reserved
        refused = _scale(sb, "key")
        assert refused.status_code == 429
        assert "60 tokens per minute" in refused.json()["detail"]
        assert _retry_after_ms(refused) <= used * 1000  # the debt is what was used, not the reservation
        assert _scale(sb, "other-key").status_code == 200
        assert sb.stats().rate_limited == 1


def test_faults_come_first_and_use_no_budget() -> None:
    with Sandbox(rpm=6) as sb:
        sb.inject(status=503, api="scale")
        assert _scale(sb, "key").status_code == 503
        assert _scale(sb, "key").status_code == 200
        assert _scale(sb, "key", **{"__unknown__": 1}).status_code == 422  # invalid bodies are not charged
        assert _scale(sb, "key").status_code == 429
        assert sb.stats().rate_limited == 1


@pytest.mark.serial  # two requests within the 1 s budget
def test_clients_that_honour_retry_after_get_through() -> None:
    # 60 a minute is one request a second: each second request of a credential waits up to a second.
    with Sandbox(rpm=60) as sb:
        with Scale(
            api_key="k", account_id="a", base_url=sb.scale_base_url, timeout=10, max_retries=0
        ) as scale:
            assert scale.complete(SCALE_MODEL, "Alice", max_tokens=2).text
            with pytest.raises(errors.RateLimitError) as info:
                scale.complete(SCALE_MODEL, "Alice", max_tokens=2)
            assert info.value.retry_after is not None
            assert 0 < info.value.retry_after <= 1
            patient = scale.with_options(max_retries=3)
            assert [patient.complete(SCALE_MODEL, "Alice", max_tokens=2).text for _ in range(2)]
        assert sb.stats().rate_limited >= 2


@pytest.mark.serial  # two requests within the 1 s budget
async def test_async_gradient_honours_retry_after_too() -> None:
    with Sandbox(rpm=60) as sb:
        async with AsyncGradient(
            access_token="t", workspace_id="w", base_url=sb.gradient_base_url, timeout=10, max_retries=3
        ) as gradient:
            texts = [(await gradient.complete(GRADIENT_MODEL, "Alice", max_generated_token_count=2)).text
                     for _ in range(3)]  # fmt: skip
        assert all(texts)
        assert sb.stats().rate_limited >= 1


@pytest.mark.parametrize(("option", "value"), [("rpm", 0), ("tpm", -5), ("rpm", float("nan")), ("tpm", "60")])
def test_a_limit_must_be_a_positive_number(option: str, value: Any) -> None:
    with pytest.raises(ValueError, match=f"{option} must be a positive number"):
        Sandbox(**{option: value})


@pytest.mark.parametrize("args", [["--rpm", "0"], ["--tpm", "lots"]])
def test_the_command_line_refuses_a_bad_limit(args: list[str]) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "wrapper", "sandbox", *args], capture_output=True, text=True, timeout=30
    )
    assert run.returncode == 2
    assert f"argument {args[0]}: must be a positive number" in run.stderr


def test_reset_refills_every_budget_and_zeroes_the_count() -> None:
    with Sandbox(rpm=6) as sb:
        assert _scale(sb, "key").status_code == 200
        assert _scale(sb, "key").status_code == 429
        sb.reset()
        assert sb.stats().rate_limited == 0
        assert _scale(sb, "key").status_code == 200
