"""Rate limits: ``complete_many`` against the sandbox's per-credential limit, paced and adaptive.

The sandbox (``Sandbox(rpm=...)``) answers 429 with Retry-After once a credential goes over its
requests per minute, enforced per second. Paced: the batch is told the limit
(``requests_per_minute``); its achieved rate should be that one, with hardly a 429. Adaptive: the
batch is told nothing and finds the limit from the 429s; over a long batch it should use most of
it, with few 429s, and a short batch (where how it opens weighs most) should meet few 429s and take
little longer than the limit allows (the ideal: prompts over the limit).
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
    """(prompts completed, wall seconds) of one batch."""
    async with AsyncScale(api_key=KEY, account_id=ACCOUNT, base_url=url, timeout=30) as client:
        batch = client.complete_many(
            SANDBOX_MODEL, ["p"] * prompts, concurrency=concurrency, requests_per_minute=rpm, max_tokens=1
        )
        completed = sum([result.ok async for result in batch])
    return completed, batch.stats.elapsed


def _run(rpm: int, prompts: int, concurrency: int, told: bool) -> tuple[float, int, int]:
    """(wall seconds, requests the sandbox saw, 429s it sent) of one batch."""
    with Sandbox(rpm=rpm) as sandbox:
        completed, seconds = asyncio.run(
            _batch(sandbox.scale_base_url, prompts, concurrency, rpm if told else None)
        )
        stats = sandbox.stats()
    if completed != prompts:
        raise RuntimeError(f"complete_many finished {completed} of {prompts} prompts")
    return seconds, stats.requests, stats.rate_limited


def limit_rows(sizes: Sizes) -> list[Row]:
    """Paced to the limit (achieved rate, 429s); adaptive with no limit given over a long batch (share
    of the limit used, 429s) and a short one (wall time against the ideal, 429s)."""
    rpm, concurrency = sizes.limit_rpm, sizes.adaptive_concurrency
    paced, paced_requests, paced_429 = _run(rpm, sizes.paced_prompts, 64, told=True)
    adaptive, adaptive_requests, adaptive_429 = _run(rpm, sizes.adaptive_prompts, concurrency, told=False)
    short, short_requests, short_429 = _run(rpm, sizes.short_prompts, concurrency, told=False)
    limit = Figure((float(rpm),))
    paced_name = f"{rpm:,}/min set, the sandbox's limit; {sizes.paced_prompts:,} prompts @64"
    adaptive_name = (
        f"no limit given, the sandbox's {rpm:,}/min; {sizes.adaptive_prompts:,} prompts @{concurrency}"
    )
    short_name = f"no limit given, the sandbox's {rpm:,}/min; {sizes.short_prompts:,} prompts @{concurrency}"
    return [
        Row(
            f"rate limit paced, rate: {paced_name}",
            "completions/min",
            Figure((sizes.paced_prompts * 60 / paced,)),
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
            Figure((sizes.adaptive_prompts * 60 / adaptive,)),
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
        Row(
            f"rate limit adaptive short batch, wall: {short_name}",
            "s wall",
            Figure((short,)),
            "ideal: prompts / limit",
            Figure((sizes.short_prompts * 60 / rpm,)),
            target=1.25,
        ),
        Row(
            f"rate limit adaptive short batch, 429s: {short_name}",
            "429s / requests",
            Figure((float(short_429),)),
            "requests",
            Figure((float(short_requests),)),
            target=0.05,
            compare="share",
        ),
    ]
