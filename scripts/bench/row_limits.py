"""Rate limits: ``complete_many`` against the sandbox's per-credential limit, paced and adaptive.

The sandbox (``Sandbox(rpm=...)``) answers 429 with Retry-After once a credential goes over its
requests per minute, enforced per second. Paced: the batch is told the limit
(``requests_per_minute``); its achieved rate should be that one, with hardly a 429. Adaptive: the
batch is told nothing and finds the limit from the 429s; it should use most of it, with few 429s.
"""

from __future__ import annotations

import asyncio

from _apis import ACCOUNT, KEY
from _stats import Figure, Row, Sizes

from wrapper.sandbox import Sandbox
from wrapper.scale import AsyncScale

__all__ = ["limit_rows"]

SANDBOX_MODEL = "llama-3-8b-instruct"


async def _batch(url: str, prompts: int, concurrency: int, rpm: float | None) -> tuple[int, float]:
    """(prompts completed, achieved completions per minute) of one batch."""
    async with AsyncScale(api_key=KEY, account_id=ACCOUNT, base_url=url, timeout=30) as client:
        batch = client.complete_many(
            SANDBOX_MODEL, ["p"] * prompts, concurrency=concurrency, requests_per_minute=rpm, max_tokens=1
        )
        completed = sum([result.ok async for result in batch])
    return completed, completed * 60 / batch.stats.elapsed


def _run(rpm: int, prompts: int, concurrency: int, told: bool) -> tuple[float, int, int]:
    """(achieved completions per minute, requests the sandbox saw, 429s it sent) of one batch."""
    with Sandbox(rpm=rpm) as sandbox:
        completed, per_minute = asyncio.run(
            _batch(sandbox.scale_base_url, prompts, concurrency, rpm if told else None)
        )
        stats = sandbox.stats()
    if completed != prompts:
        raise RuntimeError(f"complete_many finished {completed} of {prompts} prompts")
    return per_minute, stats.requests, stats.rate_limited


def limit_rows(sizes: Sizes) -> list[Row]:
    """Paced to the limit (achieved rate, 429s) and adaptive with no limit given (share used, 429s)."""
    rpm = sizes.limit_rpm
    paced, paced_requests, paced_429 = _run(rpm, sizes.paced_prompts, 64, told=True)
    adaptive, adaptive_requests, adaptive_429 = _run(
        rpm, sizes.adaptive_prompts, sizes.adaptive_concurrency, told=False
    )
    limit = Figure((float(rpm),))
    paced_name = f"{rpm:,}/min set, the sandbox's limit; {sizes.paced_prompts:,} prompts @64"
    adaptive_name = (
        f"no limit given, the sandbox's {rpm:,}/min; {sizes.adaptive_prompts:,} prompts"
        f" @{sizes.adaptive_concurrency}"
    )
    return [
        Row(
            f"rate limit paced, rate: {paced_name}",
            "completions/min",
            Figure((paced,)),
            "set",
            limit,
            target=0.1,
            compare="within",
        ),
        Row(
            f"rate limit paced, 429s: {paced_name}",
            "429s / requests",
            Figure((float(paced_429),)),
            "requests",
            Figure((float(paced_requests),)),
            target=0.01,
            compare="share",
        ),
        Row(
            f"rate limit adaptive, rate: {adaptive_name}",
            "completions/min",
            Figure((adaptive,)),
            "server's limit",
            limit,
            target=0.85,
            compare="floor",
        ),
        Row(
            f"rate limit adaptive, 429s: {adaptive_name}",
            "429s / requests",
            Figure((float(adaptive_429),)),
            "requests",
            Figure((float(adaptive_requests),)),
            target=0.10,
            compare="share",
        ),
    ]
