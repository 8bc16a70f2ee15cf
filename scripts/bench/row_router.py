"""The router: a batch over three routes, each a sandbox keeping its own limit, against the sum of
their limits.

Each route is told its limit (``Route(requests_per_minute=...)``) and its sandbox (``Sandbox(rpm=...)``)
answers 429 past it: the batch should run at the sum of the limits, with hardly a 429.
"""

from __future__ import annotations

import asyncio
from contextlib import ExitStack

from _apis import ACCOUNT, KEY
from _stats import Figure, Row, Sizes

from wrapper import AsyncRouter, Route
from wrapper.sandbox import Sandbox
from wrapper.scale import AsyncScale

__all__ = ["router_rows"]

SANDBOX_MODEL = "llama-3-8b-instruct"


async def _batch(urls: list[str], limits: tuple[int, ...], prompts: int) -> tuple[int, float]:
    """(prompts completed, wall seconds) of one batch over the routes."""
    routes = [
        Route(AsyncScale(api_key=KEY, account_id=ACCOUNT, base_url=url, timeout=30), SANDBOX_MODEL,
              requests_per_minute=rpm, name=f"route{i}")
        for i, (url, rpm) in enumerate(zip(urls, limits, strict=True))
    ]  # fmt: skip
    async with AsyncRouter(routes) as router:
        batch = router.complete_many(["p"] * prompts, concurrency=64, max_tokens=1)
        completed = sum([result.ok async for result in batch])
    return completed, batch.stats.elapsed


def router_rows(sizes: Sizes) -> list[Row]:
    """The achieved rate against the sum of the routes' limits, and the share of 429s."""
    limits, prompts = sizes.router_rpm, sizes.router_prompts
    with ExitStack() as stack:
        sandboxes = [stack.enter_context(Sandbox(rpm=rpm)) for rpm in limits]
        completed, seconds = asyncio.run(_batch([sb.scale_base_url for sb in sandboxes], limits, prompts))
        sent = [sb.stats() for sb in sandboxes]
    if completed != prompts:
        raise RuntimeError(f"the router finished {completed} of {prompts} prompts")
    name = f"{' + '.join(f'{rpm:,}' for rpm in limits)}/min over 3 routes; {prompts:,} prompts @64"
    return [
        Row(
            f"router, rate: {name}",
            "completions/min",
            Figure((prompts * 60 / seconds,)),
            "sum of the routes' limits",
            Figure((float(sum(limits)),)),
            target=0.1,
            compare="within",
        ),
        Row(
            f"router, 429s: {name}",
            "429s / requests",
            Figure((float(sum(s.rate_limited for s in sent)),)),
            "requests",
            Figure((float(sum(s.requests for s in sent)),)),
            target=0.01,
            compare="share",
        ),
    ]
